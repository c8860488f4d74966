#include "core/server/syncer.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "core/log.h"

namespace ardma {

absl::StatusOr<SyncPolicy> ParseSyncPolicy(std::string_view name) {
  if (name == "none") return SyncPolicy::kNone;
  if (name == "interval") return SyncPolicy::kInterval;
  if (name == "always") return SyncPolicy::kAlways;
  return absl::InvalidArgumentError(
      absl::StrCat("--sync: '", std::string(name), "' is not none, interval or always"));
}

Syncer::Syncer(SyncPolicy policy, absl::Duration interval, RegionTable* regions,
               ServerCounters* counters)
    : policy_(policy), interval_(interval), regions_(regions), counters_(counters) {
  bool any_file = false;
  for (size_t id = 0; id < regions_->size(); ++id) {
    absl::StatusOr<RegionRef> region = regions_->Get(static_cast<RegionId>(id));
    if (region.ok() && (*region)->file_backed()) any_file = true;
  }
  // With `always` too: one-sided writes over UCX never pass through the server, so for them the
  // interval is all there is.
  if (policy_ != SyncPolicy::kNone && any_file && interval_ > absl::ZeroDuration()) {
    thread_ = std::thread([this] { Loop(); });
  }
}

Syncer::~Syncer() { Stop(); }

absl::Status Syncer::Wrote(Region& region, uint64_t addr, uint64_t len) {
  if (!always() || !region.file_backed()) return absl::OkStatus();
  return Sync(region, addr, len);
}

absl::Status Syncer::Sync(Region& region, uint64_t addr, uint64_t len) {
  auto start = std::chrono::steady_clock::now();
  absl::Status synced = region.Sync(addr, len);
  counters_->Add(Stat::kSyncFlushes, 1);
  counters_->Add(Stat::kSyncNs, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::steady_clock::now() - start)
                                              .count());
  if (!synced.ok()) {
    counters_->Add(Stat::kSyncErrors, 1);
    return absl::InternalError(absl::StrCat("written but not synced: ", synced.message()));
  }
  return absl::OkStatus();
}

absl::Status Syncer::RanCode() { return always() ? SyncAll() : absl::OkStatus(); }

absl::Status Syncer::SyncAll() {
  absl::Status result;
  for (size_t id = 0; id < regions_->size(); ++id) {
    absl::StatusOr<RegionRef> region = regions_->Get(static_cast<RegionId>(id));
    if (!region.ok() || !(*region)->file_backed() || (*region)->read_only()) continue;
    if (absl::Status synced = Sync(**region, 0, (*region)->size()); !synced.ok()) {
      result = synced;
    }
  }
  return result;
}

void Syncer::Loop() {
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval_)) {
    mu_.Unlock();
    if (absl::Status s = SyncAll(); !s.ok()) ARDMA_LOG(kError, "%s", s.ToString());
    mu_.Lock();
  }
}

void Syncer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  if (policy_ != SyncPolicy::kNone) {
    if (absl::Status s = SyncAll(); !s.ok()) ARDMA_LOG(kError, "at stop: %s", s.ToString());
  }
}

}  // namespace ardma
