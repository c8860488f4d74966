// Syncer: when writes to file-backed memory (--memory-file, registered files) reach the device —
// ardmad --sync, after Redis's appendfsync:
//   none      the kernel writes dirty pages back when it chooses (about 30 s): a killed server
//             loses nothing (the pages are in the page cache), an OS crash or power cut loses what
//             was not yet written back.
//   interval  (default) every --sync-interval (1 s) the file-backed regions are synced: an OS
//             crash loses at most that much.
//   always    each WRITE, CAS and FETCH_ADD syncs the pages it touched, and each EXECUTE the
//             file-backed static regions, before the answer is sent: an acknowledged write is on
//             the device. One-sided writes over UCX do not pass through the server, so for them
//             `always` is `interval`: the interval thread runs under `always` too.
// Syncing costs what the device does: docs/BENCHMARKS.md measures each policy.
// Thread-safe.
#ifndef ARDMA_CORE_SERVER_SYNCER_H_
#define ARDMA_CORE_SERVER_SYNCER_H_

#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/memory/region.h"
#include "core/server/server_counters.h"

namespace ardma {

enum class SyncPolicy { kNone, kInterval, kAlways };
absl::StatusOr<SyncPolicy> ParseSyncPolicy(std::string_view name);  // "none", "interval", "always"

class Syncer {
 public:
  // Borrows `regions` and `counters` for its lifetime.
  Syncer(SyncPolicy policy, absl::Duration interval, RegionTable* regions,
         ServerCounters* counters);
  ~Syncer();  // Stop()
  Syncer(const Syncer&) = delete;
  Syncer& operator=(const Syncer&) = delete;

  bool always() const { return policy_ == SyncPolicy::kAlways; }
  // With `always`: syncs [addr, addr + len) of `region` now.
  absl::Status Wrote(Region& region, uint64_t addr, uint64_t len);
  // With `always`: syncs every file-backed static region (after active code ran).
  absl::Status RanCode();
  // Stops the interval thread; unless the policy is none, syncs everything one last time.
  void Stop();

 private:
  absl::Status SyncAll();
  absl::Status Sync(Region& region, uint64_t addr, uint64_t len);  // timed and counted
  void Loop();

  const SyncPolicy policy_;
  const absl::Duration interval_;
  RegionTable* const regions_;
  ServerCounters* const counters_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_SYNCER_H_
