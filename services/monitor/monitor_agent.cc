#include "services/monitor/monitor_agent.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/status_macros.h"

namespace ardma::monitor {
namespace {

// Room for every CPU that may come online (a sample's size grows with the online CPUs).
size_t PossibleCpus(size_t online) {
  long configured = sysconf(_SC_NPROCESSORS_CONF);
  return std::max(online, configured > 0 ? static_cast<size_t>(configured) : online);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MonitorAgent>> MonitorAgent::Create(const AgentOptions& options) {
  if (options.interval < kMinAgentInterval) {
    return absl::InvalidArgumentError(absl::StrCat("monitor interval ",
                                                   absl::FormatDuration(options.interval),
                                                   " is below ",
                                                   absl::FormatDuration(kMinAgentInterval)));
  }
  ProcSampler probe(options.procfs);
  ARDMA_ASSIGN_OR_RETURN(LoadSample first, probe.Sample());
  uint64_t slot_size = SlotSizeFor(EncodedSampleSize(PossibleCpus(first.cpus.size())));
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Region> region,
                         Region::Create({.size = PublicationBytes(slot_size), .read_only = true}));
  auto agent = std::unique_ptr<MonitorAgent>(
      new MonitorAgent(options, std::shared_ptr<Region>(std::move(region)), slot_size));
  agent->SampleAndPublish();
  return agent;
}

MonitorAgent::MonitorAgent(const AgentOptions& options, std::shared_ptr<Region> region,
                           uint64_t slot_size)
    : options_(options),
      region_(std::move(region)),
      sampler_(options.procfs),
      publisher_(region_->data(), slot_size, absl::ToInt64Nanoseconds(options.interval)) {}

MonitorAgent::~MonitorAgent() { Stop(); }

void MonitorAgent::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void MonitorAgent::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void MonitorAgent::SampleAndPublish() {
  absl::StatusOr<LoadSample> sample = sampler_.Sample();
  if (!sample.ok()) {
    ARDMA_LOG(kWarning, "load monitor: %s", sample.status().ToString());
    return;
  }
  absl::Status published = publisher_.Publish(sample->sequence, EncodeSample(*sample));
  if (!published.ok()) {
    ARDMA_LOG(kWarning, "load monitor: %s", published.ToString());
    return;
  }
  published_.fetch_add(1, std::memory_order_relaxed);
}

void MonitorAgent::Run() {
  pthread_setname_np(pthread_self(), "ardma-monitor");
  absl::Time next = absl::Now();
  for (;;) {
    next += options_.interval;
    absl::Time now = absl::Now();
    if (next < now) next = now;  // fell behind (the host is busy): do not try to catch up
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithDeadline(absl::Condition(&stopping_), next)) return;
    }
    SampleAndPublish();
  }
}

}  // namespace ardma::monitor
