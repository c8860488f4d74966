// The "monitor" active-code library: the RDMA-Sync scheme (the RDMA load-monitoring paper). The front end's request
// samples /proc right where it lands, on the server's I/O thread (with ardmad --nic-cpu/--realtime,
// the stand-in for the NIC's own processor), so no monitoring process runs on the host and the
// sample is as fresh as the round trip.
//
//   monitor.sample  procfs:str16 (empty: /proc)  -> an encoded LoadSample (load_sample.h)
//
// It samples the host it runs on, so it is active mode only: run over a RemoteContext it would
// sample the client's host, and it refuses with FAILED_PRECONDITION instead.
#include <atomic>
#include <memory>

#include "core/active/function_table.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/monitor/load_sample.h"

namespace ardma::monitor {
namespace {

// One sequence for every sampler in the server process, so successive answers grow.
std::atomic<uint64_t> next_sequence{1};

absl::StatusOr<std::string> Sample(Context& ctx, std::string_view args) {
  if (!ctx.IsLocal()) {
    return absl::FailedPreconditionError(
        "monitor.sample samples the host it runs on: call it in active mode");
  }
  wire::ByteReader r(args);
  std::string_view procfs;
  if (!args.empty() && (!r.Str16(&procfs) || !r.AtEnd())) {
    return absl::InvalidArgumentError("monitor.sample: arguments are procfs:str16");
  }
  if (procfs.empty()) procfs = "/proc";
  // Each thread keeps its files open; a different procfs replaces them.
  thread_local std::unique_ptr<ProcSampler> sampler;
  if (!sampler || sampler->procfs() != procfs) {
    sampler = std::make_unique<ProcSampler>(std::string(procfs));
  }
  sampler->set_next_sequence(next_sequence.fetch_add(1, std::memory_order_relaxed));
  ARDMA_ASSIGN_OR_RETURN(LoadSample sample, sampler->Sample());
  return EncodeSample(sample);
}

}  // namespace
}  // namespace ardma::monitor

ARDMA_ACTIVE_LIBRARY(monitor, {"monitor.sample", &ardma::monitor::Sample});
