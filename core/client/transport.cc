#include "core/client/transport.h"

namespace ardma {

void JoinUnlessSelf(std::thread& thread) {
  if (!thread.joinable()) return;
  if (thread.get_id() == std::this_thread::get_id()) {
    thread.detach();
  } else {
    thread.join();
  }
}

absl::StatusOr<std::string> Transport::RoundTripOne(const OutgoingRequest& request,
                                                    uint64_t request_id, uint64_t client_id,
                                                    absl::Time deadline) {
  ResponsePayload result;
  LazyDeadline until(deadline);
  absl::Status sent = RoundTrip({&request, 1}, {&request_id, 1}, client_id, until, {&result, 1});
  if (!sent.ok()) return sent;
  return result;
}

void AppendFrame(const OutgoingRequest& request, uint64_t request_id, uint64_t client_id,
                 std::string* out) {
  size_t start = wire::BeginFrame(out);
  if (const auto* reads = std::get_if<OutgoingRequest::Reads>(&request.data)) {
    wire::EncodeReadRequest({reads->data(), reads->size()}, out);
  } else if (const auto* writes = std::get_if<OutgoingRequest::Writes>(&request.data)) {
    wire::EncodeWriteRequest({writes->data(), writes->size()}, out);
  } else if (const auto* cas = std::get_if<wire::CasRequest>(&request.data)) {
    wire::EncodeCasRequest(*cas, out);
  } else if (const auto* add = std::get_if<wire::FetchAddRequest>(&request.data)) {
    wire::EncodeFetchAddRequest(*add, out);
  } else if (const auto* execute = std::get_if<wire::ExecuteRequest>(&request.data)) {
    // (Reserved whole: the arguments of a large call are copied once, into pages touched once.)
    out->reserve(out->size() + 64 + execute->function.size() + execute->args.size());
    wire::EncodeExecuteRequest(*execute, out);
  } else {
    out->append(request.payload);
  }
  wire::FinishFrame(
      {.op = request.op, .flags = request.flags, .request_id = request_id, .client_id = client_id},
      start, out);
}

}  // namespace ardma
