#include "core/server/dedup_window.h"

#include "absl/strings/str_cat.h"

namespace ardma {
namespace {

size_t ResultBytes(const absl::StatusOr<std::string>& r) {
  return r.ok() ? r->size() : r.status().message().size();
}

}  // namespace

DedupWindow::Admission DedupWindow::Admit(
    uint64_t client_id, uint64_t request_id,
    absl::FunctionRef<std::shared_ptr<Responder>()> responder) {
  std::optional<absl::StatusOr<std::string>> answer;
  Admission admission;
  {
    absl::MutexLock lock(&mu_);
    if (!clients_.contains(client_id) && clients_.size() >= limits_.max_clients) {
      ForgetIdlestClientLocked();
    }
    ClientWindow& window = clients_[client_id];
    window.last_seen = ++clock_;
    auto it = window.records.find(request_id);
    if (it != window.records.end()) {
      ++replays_;
      if (!it->second.done) {
        it->second.waiters.push_back(responder());
        return Admission::kAttached;
      }
      answer = it->second.result;
      admission = Admission::kAnswered;
    } else if (request_id <= window.evicted_up_to) {
      answer = absl::FailedPreconditionError(absl::StrCat(
          "request ", request_id, " is older than the de-duplication window; not run again"));
      admission = Admission::kTooOld;
    } else {
      window.records.emplace(request_id, Record{});
      ++window.running;
      ++entries_;
      return Admission::kRun;
    }
  }
  responder()->Respond(std::move(*answer));
  return admission;
}

void DedupWindow::Finish(uint64_t client_id, uint64_t request_id,
                         const absl::StatusOr<std::string>& result) {
  std::vector<std::shared_ptr<Responder>> waiters;
  {
    absl::MutexLock lock(&mu_);
    auto client = clients_.find(client_id);
    if (client == clients_.end()) return;
    ClientWindow& window = client->second;
    auto it = window.records.find(request_id);
    if (it == window.records.end() || it->second.done) return;
    it->second.done = true;
    it->second.result = result;
    waiters.swap(it->second.waiters);
    --window.running;
    result_bytes_ += ResultBytes(result);
    window.finished.push_back(request_id);
    while (window.finished.size() > limits_.max_entries_per_client ||
           (result_bytes_ > limits_.max_result_bytes && !window.finished.empty())) {
      EvictOldestLocked(window);
    }
  }
  for (auto& w : waiters) w->Respond(result);
}

void DedupWindow::EvictOldestLocked(ClientWindow& window) {
  uint64_t id = window.finished.front();
  window.finished.pop_front();
  auto it = window.records.find(id);
  result_bytes_ -= ResultBytes(it->second.result);
  window.records.erase(it);
  --entries_;
  if (id > window.evicted_up_to) window.evicted_up_to = id;
}

void DedupWindow::ForgetIdlestClientLocked() {
  auto idlest = clients_.end();
  for (auto it = clients_.begin(); it != clients_.end(); ++it) {
    if (it->second.running > 0) continue;  // its waiters still need the result
    if (idlest == clients_.end() || it->second.last_seen < idlest->second.last_seen) idlest = it;
  }
  if (idlest == clients_.end()) return;
  for (const auto& [id, record] : idlest->second.records)
    result_bytes_ -= ResultBytes(record.result);
  entries_ -= idlest->second.records.size();
  clients_.erase(idlest);
}

uint64_t DedupWindow::replays() const {
  absl::MutexLock lock(&mu_);
  return replays_;
}

size_t DedupWindow::size() const {
  absl::MutexLock lock(&mu_);
  return entries_;
}

}  // namespace ardma
