#include "core/client/keep_alive.h"

#include <algorithm>
#include <utility>

namespace ardma {

namespace {

// Request ids of keep-alive PINGs: a range the Client's own ids never reach, and apart from
// UcxConnection's region look-ups (bit 63).
constexpr uint64_t kKeepAliveIds = uint64_t{1} << 62;

}  // namespace

KeepAlive::KeepAlive(std::weak_ptr<Transport> transport, absl::Duration every)
    : transport_(std::move(transport)), every_(std::max(every, absl::Milliseconds(1))) {
  thread_ = std::thread([this] { Run(); });
}

KeepAlive::~KeepAlive() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void KeepAlive::Run() {
  for (uint64_t n = 0;; ++n) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), every_)) return;
    }
    std::shared_ptr<Transport> transport = transport_.lock();
    if (transport == nullptr || transport->broken()) return;
    transport->KeepAlive(kKeepAliveIds | n);
  }
}

}  // namespace ardma
