// The load monitor's sample of a host (the RDMA load-monitoring paper): what /proc says about CPU, run queue, memory,
// network, interrupts and pressure at one moment, its encoding (shared by all four schemes), and
// the figures a front end derives from two successive samples.
//
// A sample holds cumulative counters as the kernel keeps them (CPU ticks, interrupts, bytes) and
// instantaneous gauges (procs_running, memory). Rates and utilisation need two samples:
// Figures(previous, current). Every field is documented in docs/monitor.md.
//
// Encoding (little-endian):
//   magic:u32 "AML1"  cpus:u16  fields:u16  flags:u32  reserved:u32
//   sequence:u64  realtime_ns:i64  monotonic_ns:i64  sample_ns:u64  ticks_per_second:u64
//   fields * u64            (Field order; a newer encoder may append fields, a decoder keeps the
//                            ones it knows)
//   cpus * 8 * u64          (CpuTimes per CPU, in CPU order)
//
//   ProcSampler sampler;                       // opens /proc files once
//   ARDMA_ASSIGN_OR_RETURN(LoadSample s, sampler.Sample());
//   std::string bytes = EncodeSample(s);
#ifndef ARDMA_SERVICES_MONITOR_LOAD_SAMPLE_H_
#define ARDMA_SERVICES_MONITOR_LOAD_SAMPLE_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ardma::monitor {

// CPU time by state, in ticks (ticks_per_second of them per second), as in /proc/stat.
struct CpuTimes {
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;

  uint64_t Total() const { return user + nice + system + idle + iowait + irq + softirq + steal; }
  uint64_t Idle() const { return idle + iowait; }
};

// The scalar fields, in encoding order. Counters only grow; gauges are values at the moment.
enum class Field : uint16_t {
  kProcsRunning,      // gauge: tasks runnable now (/proc/stat procs_running; includes the sampler)
  kProcsBlocked,      // gauge: tasks in uninterruptible sleep (I/O)
  kContextSwitches,   // counter
  kForks,             // counter: processes and threads created
  kInterrupts,        // counter: hardware interrupts, all CPUs
  kSoftirqs,          // counter: softirqs, all CPUs
  kLoad1Milli,        // gauge: 1-minute load average x 1000
  kLoad5Milli,        // gauge
  kLoad15Milli,       // gauge
  kThreadsTotal,      // gauge: scheduling entities (/proc/loadavg, after the slash)
  kMemTotal,          // gauge, bytes
  kMemFree,           // gauge, bytes
  kMemAvailable,      // gauge, bytes
  kMemBuffers,        // gauge, bytes
  kMemCached,         // gauge, bytes
  kSwapTotal,         // gauge, bytes
  kSwapFree,          // gauge, bytes
  kNetRxBytes,        // counter, all interfaces but lo
  kNetRxPackets,      // counter
  kNetTxBytes,        // counter
  kNetTxPackets,      // counter
  kPsiCpuSomeUs,      // counter: time some task waited for a CPU (PSI), microseconds
  kPsiIoSomeUs,       // counter
  kPsiIoFullUs,       // counter
  kPsiMemorySomeUs,   // counter
  kPsiMemoryFullUs,   // counter
  kPsiCpuSomeAvg10,   // gauge: share of the last 10 s some task waited for a CPU, x 10000
  kCount,
};
inline constexpr size_t kNumFields = static_cast<size_t>(Field::kCount);

struct FieldInfo {
  const char* name;  // snake_case, also the Prometheus metric suffix
  bool counter;      // false: gauge
  const char* help;
};
const FieldInfo& Info(Field f);

inline constexpr uint32_t kFlagPsi = 1;  // the host has /proc/pressure (PSI fields are real)

struct LoadSample {
  uint64_t sequence = 0;      // grows by at least one per sample of one sampler
  int64_t realtime_ns = 0;    // CLOCK_REALTIME when sampling began
  int64_t monotonic_ns = 0;   // CLOCK_MONOTONIC when sampling began (same-host comparisons)
  uint64_t sample_ns = 0;     // how long sampling took
  uint64_t ticks_per_second = 100;
  uint32_t flags = 0;
  CpuTimes cpu;               // all CPUs
  std::vector<CpuTimes> cpus; // per CPU, by CPU number
  std::array<uint64_t, kNumFields> fields{};

  uint64_t operator[](Field f) const { return fields[static_cast<size_t>(f)]; }
  uint64_t& operator[](Field f) { return fields[static_cast<size_t>(f)]; }
};

std::string EncodeSample(const LoadSample& sample);
// DataLoss for bytes that are not a sample.
absl::StatusOr<LoadSample> DecodeSample(std::string_view bytes);
// The encoded size of a sample of a host with `cpus` CPUs.
size_t EncodedSampleSize(size_t cpus);

// Reads a procfs (normally /proc; a container may mount the host's elsewhere, and tests use a
// directory of files) and makes samples. Files are opened once and re-read with pread, so a sample
// costs a few system calls, not opens. Not thread-safe: one sampler per thread.
class ProcSampler {
 public:
  explicit ProcSampler(std::string procfs = "/proc");
  ~ProcSampler();
  ProcSampler(const ProcSampler&) = delete;
  ProcSampler& operator=(const ProcSampler&) = delete;

  const std::string& procfs() const { return procfs_; }
  // Numbers samples from `next` on (the agent continues a published sequence).
  void set_next_sequence(uint64_t next) { next_sequence_ = next; }
  // FailedPrecondition when a required file (stat, loadavg, meminfo) cannot be read or parsed.
  absl::StatusOr<LoadSample> Sample();

 private:
  struct File;
  absl::StatusOr<std::string_view> ReadFile(File& file);

  std::string procfs_;
  std::vector<File> files_;
  std::string buffer_;
  uint64_t next_sequence_ = 1;
};

// What a front end reads off two successive samples of one host.
struct Figures {
  double seconds = 0;                 // between the samples (monotonic clock)
  double cpu_busy = 0;                // 0..1, all CPUs: share of ticks not idle or iowait
  std::vector<double> cpu_busy_per_cpu;
  double iowait = 0;                  // 0..1 share of ticks in iowait
  uint64_t procs_running = 0;         // of the current sample
  uint64_t procs_blocked = 0;
  double load1 = 0;
  double memory_used = 0;             // 0..1: 1 - available / total
  double net_rx_bytes_per_s = 0, net_tx_bytes_per_s = 0;
  double net_rx_packets_per_s = 0, net_tx_packets_per_s = 0;
  uint64_t interrupts = 0, softirqs = 0, context_switches = 0;  // deltas
  double cpu_pressure = 0;            // 0..1: share of the interval some task waited for a CPU
};
// From one sample alone (no previous one): utilisation is estimated as
// min(1, procs_running / cpus) and rates are 0.
Figures ComputeFigures(const LoadSample* previous, const LoadSample& current);

}  // namespace ardma::monitor

#endif  // ARDMA_SERVICES_MONITOR_LOAD_SAMPLE_H_
