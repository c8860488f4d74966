// ardma-ccd: a compile farm slave (docs/cc.md). It pulls jobs (slave-driven, FCFS), READs each
// source one-sidedly from the submitter's registered region, runs the compiler on tmpfs, WRITEs
// the object one-sidedly into the submitter's object region, then finishes the job, which wakes
// the submitter. Only compilers on its allow list run, found on its own PATH by base name: never
// a path a job names.
#ifndef ARDMA_APPS_CC_CCD_H_
#define ARDMA_APPS_CC_CCD_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "apps/cc/cc_job.h"
#include "core/client/client.h"

namespace ardma::cc {

// Compiles running at once in this process, at most `limit`: what --slots bounds when one process
// serves several farms (each member of a cluster, each with its own takers).
class CompileSlots {
 public:
  explicit CompileSlots(int limit) : free_(limit) {}
  void Acquire() {
    absl::MutexLock lock(&mu_, absl::Condition(this, &CompileSlots::Available));
    --free_;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    ++free_;
  }

 private:
  bool Available() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return free_ > 0; }
  absl::Mutex mu_;
  int free_ ABSL_GUARDED_BY(mu_);
};

struct SlaveOptions {
  std::string name;  // in `ardma cc status`; default HOST:PID
  int slots = 0;     // jobs at once; 0: this machine's CPUs
  std::set<std::string> allow = {"gcc", "g++", "cc", "c++", "clang", "clang++"};
  std::string tmpdir = "/dev/shm";
  bool verbose = false;
  // Shared by the Slaves of one process that serves several farms; null: `slots` takers bound
  // the compiles alone.
  std::shared_ptr<CompileSlots> compile_slots;
};

// Parses "gcc,g++,clang" into base names; INVALID_ARGUMENT for an entry with a '/'.
absl::StatusOr<std::set<std::string>> ParseAllowList(std::string_view list);

class Slave {
 public:
  // Borrows `client` (shared by every slot; its connection carries the slave's leases).
  Slave(Client* client, SlaveOptions options);

  // Serves until Stop (or until the server refuses the farm for good); returns why it ended.
  absl::Status Run();
  void Stop() { stopping_.store(true); }

  // One job, start to finish (exposed for tests): the result to hand the submitter.
  CompileResult Compile(const CompileJob& job);

 private:
  absl::Status Serve();

  Client* const client_;
  const SlaveOptions options_;
  std::atomic<bool> stopping_{false};
};

}  // namespace ardma::cc

#endif  // ARDMA_APPS_CC_CCD_H_
