// The request handler's fuzz target (handler_fuzz.cc): one input run, and the seeds.
#ifndef ARDMA_CORE_SERVER_HANDLER_FUZZ_H_
#define ARDMA_CORE_SERVER_HANDLER_FUZZ_H_

#include <string>
#include <string_view>
#include <vector>

namespace ardma {

// Handles `input` as the frames two connections send, then closes them. Aborts on a broken
// invariant.
void RunHandlerFuzzInput(std::string_view input);
// Valid frames of every op and active-code sequences, as the tests send them.
std::vector<std::string> HandlerFuzzSeeds();
// Answers that came over UCX sessions so far (the inputs' reach into the UCX bootstrap), and the
// sessions UCX_CONNECTs opened.
struct HandlerFuzzUcxReach {
  uint64_t sessions = 0;
  uint64_t answers = 0;
};
HandlerFuzzUcxReach HandlerFuzzUcx();

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_HANDLER_FUZZ_H_
