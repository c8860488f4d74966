// The RDMA-Async scheme's agent (the RDMA load-monitoring paper): a thread inside ardmad that samples the host every
// interval and publishes the sample in a read-only region (layout: publication.h), which front
// ends READ one-sidedly. Clients cannot write the region; only the agent does, through its
// mapping.
//
//   ARDMA_ASSIGN_OR_RETURN(auto agent, MonitorAgent::Create({.interval = absl::Milliseconds(10)}));
//   server_options.extra_regions.push_back(agent->region());   // region id 1
//   ... Server::Start(server_options) ...
//   agent->Start();
//
// The thread runs at normal priority, like the paper's back-end monitoring thread: under CPU load
// its samples fall behind, which is what the RDMA-Async scheme is measured for.
#ifndef ARDMA_SERVICES_MONITOR_MONITOR_AGENT_H_
#define ARDMA_SERVICES_MONITOR_MONITOR_AGENT_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/memory/region.h"
#include "services/monitor/load_sample.h"
#include "services/monitor/publication.h"

namespace ardma::monitor {

inline constexpr absl::Duration kMinAgentInterval = absl::Milliseconds(1);

struct AgentOptions {
  absl::Duration interval = absl::Milliseconds(10);  // at least kMinAgentInterval
  std::string procfs = "/proc";
};

class MonitorAgent {
 public:
  // Takes and publishes a first sample, so a bad procfs fails here and readers never find the
  // region empty.
  static absl::StatusOr<std::unique_ptr<MonitorAgent>> Create(const AgentOptions& options);
  ~MonitorAgent();  // stops the thread
  MonitorAgent(const MonitorAgent&) = delete;
  MonitorAgent& operator=(const MonitorAgent&) = delete;

  const std::shared_ptr<Region>& region() const { return region_; }
  void Start();
  void Stop();
  uint64_t published() const { return published_.load(std::memory_order_relaxed); }

 private:
  MonitorAgent(const AgentOptions& options, std::shared_ptr<Region> region, uint64_t slot_size);
  void Run();
  void SampleAndPublish();

  AgentOptions options_;
  std::shared_ptr<Region> region_;
  ProcSampler sampler_;
  Publisher publisher_;
  std::atomic<uint64_t> published_{0};
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ardma::monitor

#endif  // ARDMA_SERVICES_MONITOR_MONITOR_AGENT_H_
