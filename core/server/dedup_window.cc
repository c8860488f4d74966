#include "core/server/dedup_window.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ardma {
namespace {

size_t ResultBytes(const absl::StatusOr<std::string>& r) {
  return r.ok() ? r->size() : r.status().message().size();
}

size_t ShareOf(size_t total, size_t shards) {
  return std::max<size_t>(1, (total + shards - 1) / shards);
}

}  // namespace

DedupWindow::DedupWindow(DedupLimits limits)
    : limits_(limits),
      num_shards_(std::max<size_t>(1, limits.shards)),
      max_clients_(ShareOf(limits.max_clients, num_shards_)),
      shards_(std::make_unique<Shard[]>(num_shards_)) {}

// (No shared write for an empty result, which most are.)
void DedupWindow::AddResultBytes(size_t n) {
  if (n != 0) result_bytes_.fetch_add(n, std::memory_order_relaxed);
}
void DedupWindow::SubtractResultBytes(size_t n) {
  if (n != 0) result_bytes_.fetch_sub(n, std::memory_order_relaxed);
}

DedupWindow::Shard& DedupWindow::ShardOf(uint64_t client_id) const {
  // (Client ids are random, but a caller may number them: mix before taking the remainder.)
  return shards_[(client_id * 0x9E3779B97F4A7C15ull >> 32) % num_shards_];
}

DedupWindow::Admission DedupWindow::Admit(
    uint64_t client_id, uint64_t request_id,
    absl::FunctionRef<std::shared_ptr<Responder>()> responder) {
  std::optional<absl::StatusOr<std::string>> answer;
  Admission admission;
  {
    Shard& shard = ShardOf(client_id);
    Locked lock(&shard.mu);
    auto client = shard.clients.find(client_id);
    if (client == shard.clients.end()) {
      if (shard.clients.size() >= max_clients_) ForgetIdlestClientLocked(shard);
      client = shard.clients.try_emplace(client_id).first;
    }
    ClientWindow& window = client->second;
    window.last_seen = ++shard.clock;
    // (One probe: most requests are new, and are recorded as running.)
    auto [it, inserted] = window.records.try_emplace(request_id);
    if (inserted && request_id > window.evicted_up_to) {
      ++window.running;
      ++shard.entries;
      return Admission::kRun;
    }
    if (inserted) {
      window.records.erase(it);
      answer = absl::FailedPreconditionError(absl::StrCat(
          "request ", request_id, " is older than the de-duplication window; not run again"));
      admission = Admission::kTooOld;
    } else {
      ++shard.replays;
      if (!it->second.done) {
        it->second.waiters.push_back(responder());
        return Admission::kAttached;
      }
      answer = it->second.result;
      admission = Admission::kAnswered;
    }
  }
  responder()->Respond(std::move(*answer));
  return admission;
}

void DedupWindow::Finish(uint64_t client_id, uint64_t request_id,
                         const absl::StatusOr<std::string>& result) {
  std::vector<std::shared_ptr<Responder>> waiters;
  {
    Shard& shard = ShardOf(client_id);
    Locked lock(&shard.mu);
    auto client = shard.clients.find(client_id);
    if (client == shard.clients.end()) return;
    ClientWindow& window = client->second;
    auto it = window.records.find(request_id);
    if (it == window.records.end() || it->second.done) return;
    it->second.done = true;
    it->second.result = result;
    waiters.swap(it->second.waiters);
    --window.running;
    AddResultBytes(ResultBytes(result));
    window.finished.push_back(request_id);
    while (window.finished.size() > limits_.max_entries_per_client ||
           (result_bytes_.load(std::memory_order_relaxed) > limits_.max_result_bytes &&
            !window.finished.empty())) {
      EvictOldestLocked(shard, window);
    }
  }
  for (auto& w : waiters) w->Respond(result);
}

void DedupWindow::EvictOldestLocked(Shard& shard, ClientWindow& window) {
  uint64_t id = window.finished.front();
  window.finished.pop_front();
  auto it = window.records.find(id);
  SubtractResultBytes(ResultBytes(it->second.result));
  window.records.erase(it);
  --shard.entries;
  if (id > window.evicted_up_to) window.evicted_up_to = id;
}

void DedupWindow::ForgetIdlestClientLocked(Shard& shard) {
  auto idlest = shard.clients.end();
  for (auto it = shard.clients.begin(); it != shard.clients.end(); ++it) {
    if (it->second.running > 0) continue;  // its waiters still need the result
    if (idlest == shard.clients.end() || it->second.last_seen < idlest->second.last_seen) {
      idlest = it;
    }
  }
  if (idlest == shard.clients.end()) return;
  for (const auto& [id, record] : idlest->second.records) {
    SubtractResultBytes(ResultBytes(record.result));
  }
  shard.entries -= idlest->second.records.size();
  shard.clients.erase(idlest);
}

uint64_t DedupWindow::replays() const {
  uint64_t n = 0;
  for (size_t i = 0; i < num_shards_; ++i) {
    Locked lock(&shards_[i].mu);
    n += shards_[i].replays;
  }
  return n;
}

size_t DedupWindow::size() const {
  size_t n = 0;
  for (size_t i = 0; i < num_shards_; ++i) {
    Locked lock(&shards_[i].mu);
    n += shards_[i].entries;
  }
  return n;
}

}  // namespace ardma
