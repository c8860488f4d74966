// jvm_loader.h for builds without a JDK: no loader, so a jvm LOAD gets FAILED_PRECONDITION.
#include "core/active/jvm/jvm_loader.h"

namespace ardma {

bool JvmBuiltIn() { return false; }

std::unique_ptr<CodeLoader> NewJvmLoader(const JvmOptions&) { return nullptr; }

}  // namespace ardma
