// Where the build put the Java test code (core/active/jvm/testdata), and the native twin of JList.
//
//   main/JList.class    byte[] append(a, [list:u64 value:u64]) -> length:u64
//                       byte[] get(a, [list:u64 index:u64])   -> value:u64
//   main/Calls.class    int[] noop, int[] twice, int total, byte[] viaNative (calls listdemo.get)
//   main/Faulty.class   int[] boom (throws), int[] outOfRange, int[] spin (never returns)
//   v1/Greeter.class, greeter-v2.jar: Greeter.execute answers 1 and 2
// listdemo.append / listdemo.get do in C++ what JList does; listdemo.call calls any function:
// args [name_length:u16 name payload] -> its result.
#ifndef ARDMA_CORE_ACTIVE_JVM_JAVA_TESTDATA_H_
#define ARDMA_CORE_ACTIVE_JVM_JAVA_TESTDATA_H_

#include <fstream>
#include <iterator>
#include <string>

#include "core/active/active_library.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(listdemo);

namespace ardma::java_testdata {

inline std::string Path(const std::string& relative) {
  return std::string(ARDMA_JAVA_TESTDATA) + "/" + relative;
}

// The bytes of a built test class or jar ("" if missing).
inline std::string Bytes(const std::string& relative) {
  std::ifstream in(Path(relative), std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace ardma::java_testdata

#endif  // ARDMA_CORE_ACTIVE_JVM_JAVA_TESTDATA_H_
