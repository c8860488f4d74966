// jvm_loader.h for builds without a JDK: no loader, so a jvm LOAD gets FAILED_PRECONDITION.
#include "core/active/jvm/jvm_loader.h"

namespace ardma {

bool JvmBuiltIn() { return false; }

std::string JvmDefaultLibrary() { return ""; }

std::unique_ptr<CodeLoader> NewJvmLoader(const JvmOptions&) { return nullptr; }

absl::Status StartJvm(const JvmOptions&) {
  return absl::FailedPreconditionError("this ardmad was built without Java support");
}

}  // namespace ardma
