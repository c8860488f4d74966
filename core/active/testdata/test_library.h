// Active-code libraries used by the core tests: "test" (which Calls into "test2") and "test2".
//
// Arguments and results are little-endian u64s unless a function says otherwise:
//   test.noop        ()                   -> ""
//   test.echo        bytes                -> the same bytes
//   test.add         addr, delta          -> old value (FETCH_ADD on addr)
//   test.call_double x                    -> 2x, computed by Call("test2.double")
//   test.fail        ()                   -> INVALID_ARGUMENT
//   test.spin        ms                   -> reads memory in a loop for ms milliseconds
//   test.sleep       ms                   -> sleeps ms milliseconds without touching memory
//   test.busy        ms                   -> loops ms milliseconds (UINT64_MAX: for ever) touching
//                                          neither memory nor the context: nothing stops it
//   test.park        key bytes            -> parks on key; answered by a wake
//   test.wake        key_len:u64, key, result -> 1 if a request was woken, else 0
//   test.view_sum    addr, len            -> sum of the bytes (View when local, else Read)
//   test.wait_zero   addr, rounds         -> rounds backed off until the word at addr was 0;
//                                          UNAVAILABLE if it was still set after `rounds`
//   test.resumable   addr, after_us, phase -> phase 0: adds 1 at addr, parks resumably (after_us);
//                                          resumed as phase 1: adds 100, answers 1
//   test.resume      ()                   -> 1 if a test.resumable request was resumed, else 0
//   test.add_on_close addr                -> registers test.add(addr, 1) for when the connection
//                                          closes
//   test.crash       mode[, addr]         -> 0: "" at once; 1: a null dereference; 2: abort();
//                                          3: takes the lock word at addr, then dereferences null
//   test.peer        text "slot=N\nFUNCTION\nARGS" or "member=ID\n..." -> what FUNCTION(ARGS)
//                                          answers on that member (Context::CallPeer)
//   test.who         ()                   -> "peer" for another member's call, else "client"
//   test2.double     x                    -> 2x
#ifndef ARDMA_CORE_ACTIVE_TESTDATA_TEST_LIBRARY_H_
#define ARDMA_CORE_ACTIVE_TESTDATA_TEST_LIBRARY_H_

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>

#include "core/active/active_library.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(test);
ARDMA_DECLARE_ACTIVE_LIBRARY(test2);
ARDMA_DECLARE_ACTIVE_LIBRARY(hijack);  // exports dht.put and friends, answering "hijacked"
// What shipped code must not do in an isolated worker (hostile_functions.cc), and a library whose
// constructor makes a socket (hostile_ctor_functions.cc).
ARDMA_DECLARE_ACTIVE_LIBRARY(hostile);
ARDMA_DECLARE_ACTIVE_LIBRARY(hostile_ctor);
// A library whose constructor marks the server process if it maps it (ctor_mark_functions.cc).
ARDMA_DECLARE_ACTIVE_LIBRARY(ctor_mark);

namespace ardma::testing {

inline std::string U64s(std::initializer_list<uint64_t> values) {
  std::string out;
  for (uint64_t v : values) out.append(reinterpret_cast<const char*>(&v), 8);
  return out;
}

inline uint64_t U64At(std::string_view bytes, size_t index) {
  uint64_t v = 0;
  if (bytes.size() >= 8 * (index + 1)) std::memcpy(&v, bytes.data() + 8 * index, 8);
  return v;
}

}  // namespace ardma::testing

#endif  // ARDMA_CORE_ACTIVE_TESTDATA_TEST_LIBRARY_H_
