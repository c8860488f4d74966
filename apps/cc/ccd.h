// ardma-ccd: a compile farm slave (docs/cc.md). It pulls jobs (slave-driven, FCFS), READs each
// source one-sidedly from the submitter's registered region, runs the compiler on tmpfs, WRITEs
// the object one-sidedly into the submitter's object region, then finishes the job, which wakes
// the submitter. Only compilers on its allow list run, found on its own PATH by base name: never
// a path a job names.
#ifndef ARDMA_APPS_CC_CCD_H_
#define ARDMA_APPS_CC_CCD_H_

#include <atomic>
#include <cstdint>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "apps/cc/cc_job.h"
#include "core/client/client.h"

namespace ardma::cc {

struct SlaveOptions {
  std::string name;  // in `ardma cc status`; default HOST:PID
  int slots = 0;     // jobs at once; 0: this machine's CPUs
  std::set<std::string> allow = {"gcc", "g++", "cc", "c++"};
  std::string tmpdir = "/dev/shm";
  bool verbose = false;
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
