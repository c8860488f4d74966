#include "core/server/dedup_window.h"

#include "absl/strings/str_cat.h"

namespace ardma {
namespace {

size_t ResultBytes(const absl::StatusOr<std::string>& r) {
  return r.ok() ? r->size() : r.status().message().size();
}

}  // namespace

DedupWindow::Admission DedupWindow::Admit(uint64_t client_id, uint64_t request_id,
                                          std::shared_ptr<Responder> responder) {
  std::optional<absl::StatusOr<std::string>> answer;
  Admission admission;
  {
    absl::MutexLock lock(&mu_);
    auto it = records_.find(Key{client_id, request_id});
    if (it != records_.end()) {
      ++replays_;
      if (it->second.done) {
        answer = it->second.result;
        admission = Admission::kAnswered;
      } else {
        it->second.waiters.push_back(std::move(responder));
        return Admission::kAttached;
      }
    } else if (auto ev = evicted_up_to_.find(client_id);
               ev != evicted_up_to_.end() && request_id <= ev->second) {
      answer = absl::FailedPreconditionError(absl::StrCat(
          "request ", request_id, " is older than the de-duplication window; not run again"));
      admission = Admission::kTooOld;
    } else {
      records_.emplace(Key{client_id, request_id}, Record{});
      return Admission::kRun;
    }
  }
  responder->Respond(std::move(*answer));
  return admission;
}

void DedupWindow::Finish(uint64_t client_id, uint64_t request_id,
                         const absl::StatusOr<std::string>& result) {
  std::vector<std::shared_ptr<Responder>> waiters;
  {
    absl::MutexLock lock(&mu_);
    auto it = records_.find(Key{client_id, request_id});
    if (it == records_.end()) return;
    it->second.done = true;
    it->second.result = result;
    waiters.swap(it->second.waiters);
    result_bytes_ += ResultBytes(result);
    finished_order_.push_back(Key{client_id, request_id});
    EvictLocked();
  }
  for (auto& w : waiters) w->Respond(result);
}

void DedupWindow::EvictLocked() {
  while (!finished_order_.empty() &&
         (records_.size() > limits_.max_entries || result_bytes_ > limits_.max_result_bytes)) {
    Key key = finished_order_.front();
    finished_order_.pop_front();
    auto it = records_.find(key);
    result_bytes_ -= ResultBytes(it->second.result);
    records_.erase(it);
    uint64_t& up_to = evicted_up_to_[key.first];
    if (key.second > up_to) up_to = key.second;
  }
}

uint64_t DedupWindow::replays() const {
  absl::MutexLock lock(&mu_);
  return replays_;
}

size_t DedupWindow::size() const {
  absl::MutexLock lock(&mu_);
  return records_.size();
}

}  // namespace ardma
