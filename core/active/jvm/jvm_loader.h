// Java active code (the Active RDMA paper's form): shipped class files or jars, run in an OpenJDK JVM
// embedded in the server through the JNI invocation API.
//
// The JVM starts on the first LOAD of kind jvm (never when no Java code is used); libjvm.so is
// opened at run time, so a host without a JDK still runs ardmad and answers a jvm LOAD with
// FAILED_PRECONDITION. One JVM per process (JNI allows no more), shared by every server in it and
// started with the options of the first loader that needs it.
//
// Each blob gets its own class loader, so two versions of a class coexist; its public static
// methods of the forms int[] f(ActiveRDMA, int[]), int f(ActiveRDMA, int[]) and
// byte[] f(ActiveRDMA, byte[]) are exported as "Class.f" (an int[] travels as little-endian
// 32-bit words). Java code reaches memory and other functions (native or Java) through
// ardma.ActiveRDMA, whose native methods are bound to the request's Context. Threads attach to
// the JVM once and stay attached. An uncaught Java exception becomes the request's status:
// ardma.ActiveRDMAException keeps its code, anything else is UNKNOWN "class: message". Past its
// deadline a running call is interrupted, and stopped (Thread.stop) if it does not return within
// 20 ms; the request gets DEADLINE_EXCEEDED and the thread serves on.
#ifndef ARDMA_CORE_ACTIVE_JVM_JVM_LOADER_H_
#define ARDMA_CORE_ACTIVE_JVM_JVM_LOADER_H_

#include <memory>
#include <string>
#include <vector>

#include "core/active/code_registry.h"

namespace ardma {

struct JvmOptions {
  std::string libjvm;                // empty: the JDK found when the server was built
  std::vector<std::string> options;  // passed to the JVM, e.g. "-Xmx256m"
  std::string classpath;             // more classes visible to all Java code (after the API)
};

// Whether this build can run Java code at all (it found a JDK's JNI headers).
bool JvmBuiltIn();

// The libjvm.so used when JvmOptions::libjvm is empty (the JDK found at build time; "" without).
std::string JvmDefaultLibrary();

// The loader for CodeKind::kJvm; null if !JvmBuiltIn().
std::unique_ptr<CodeLoader> NewJvmLoader(const JvmOptions& options);

// Starts this process's JVM now rather than at the first LOAD (an isolated worker does, before it
// confines itself: a JVM reads many files as it starts). FAILED_PRECONDITION without a JDK.
absl::Status StartJvm(const JvmOptions& options);

}  // namespace ardma

#endif  // ARDMA_CORE_ACTIVE_JVM_JVM_LOADER_H_
