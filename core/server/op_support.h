// What the RequestHandler's op families (ops_*.cc) share: response frames, the steady clock,
// latency recording, and the responder that answers a retry from the de-duplication window.
// Internal to core/server.
#ifndef ARDMA_CORE_SERVER_OP_SUPPORT_H_
#define ARDMA_CORE_SERVER_OP_SUPPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/active/parking_lot.h"
#include "core/clock.h"
#include "core/server/request_handler.h"
#include "core/server/server_counters.h"
#include "core/wire/frame.h"

namespace ardma::ops {

// A successful response to `request` carrying `payload`.
inline std::string OkFrame(const wire::FrameHeader& request, std::string_view payload) {
  std::string out;
  out.reserve(wire::kHeaderSize + payload.size());
  size_t start = wire::BeginFrame(&out);
  out.append(payload.data(), payload.size());
  wire::FrameHeader h = request;
  h.flags = wire::kFlagResponse;
  h.status = 0;
  wire::FinishFrame(h, start, &out);
  return out;
}

inline uint64_t NowNs() { return static_cast<uint64_t>(SteadyNowNs()); }

// Records a request's latency when the handler is done with it, unless dismissed (a request
// answered later records its own).
class LatencyRecorder {
 public:
  LatencyRecorder(LatencyHistogram* histogram, uint64_t start_ns)
      : histogram_(histogram), start_ns_(start_ns) {}
  ~LatencyRecorder() {
    if (histogram_ != nullptr) histogram_->Record(ElapsedNs(start_ns_, NowNs()));
  }
  void Dismiss() { histogram_ = nullptr; }

 private:
  LatencyHistogram* histogram_;
  const uint64_t start_ns_;
};

// Answers a retry (or the original, if it was attached) with whatever the window holds.
class SinkResponder : public Responder {
 public:
  using ReplyFn = std::function<void(absl::StatusOr<std::string>)>;
  SinkResponder(std::shared_ptr<ResponseSink> sink, ReplyFn reply)
      : sink_(std::move(sink)), reply_(std::move(reply)) {}
  void Respond(absl::StatusOr<std::string> result) override { reply_(std::move(result)); }
  bool Alive() const override { return sink_->Open(); }

 private:
  std::shared_ptr<ResponseSink> sink_;
  ReplyFn reply_;
};

}  // namespace ardma::ops

#endif  // ARDMA_CORE_SERVER_OP_SUPPORT_H_
