#include "services/monitor/load_sample.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/wire/byte_io.h"

namespace ardma::monitor {
namespace {

constexpr uint32_t kMagic = 0x314c4d41;  // "AML1"
constexpr size_t kHeaderBytes = 4 + 2 + 2 + 4 + 4 + 8 * 5;
constexpr size_t kCpuWords = 8;

constexpr FieldInfo kFieldInfo[] = {
    {"procs_running", false, "Tasks runnable now (/proc/stat procs_running)"},
    {"procs_blocked", false, "Tasks blocked on I/O (/proc/stat procs_blocked)"},
    {"context_switches", true, "Context switches (/proc/stat ctxt)"},
    {"forks", true, "Processes and threads created (/proc/stat processes)"},
    {"interrupts", true, "Hardware interrupts, all CPUs (/proc/stat intr)"},
    {"softirqs", true, "Softirqs, all CPUs (/proc/stat softirq)"},
    {"load1_milli", false, "1-minute load average x 1000"},
    {"load5_milli", false, "5-minute load average x 1000"},
    {"load15_milli", false, "15-minute load average x 1000"},
    {"threads_total", false, "Scheduling entities (/proc/loadavg)"},
    {"mem_total_bytes", false, "MemTotal"},
    {"mem_free_bytes", false, "MemFree"},
    {"mem_available_bytes", false, "MemAvailable"},
    {"mem_buffers_bytes", false, "Buffers"},
    {"mem_cached_bytes", false, "Cached"},
    {"swap_total_bytes", false, "SwapTotal"},
    {"swap_free_bytes", false, "SwapFree"},
    {"net_rx_bytes", true, "Bytes received, all interfaces but lo"},
    {"net_rx_packets", true, "Packets received, all interfaces but lo"},
    {"net_tx_bytes", true, "Bytes sent, all interfaces but lo"},
    {"net_tx_packets", true, "Packets sent, all interfaces but lo"},
    {"psi_cpu_some_us", true, "Time some task waited for a CPU (PSI), microseconds"},
    {"psi_io_some_us", true, "Time some task waited for I/O (PSI), microseconds"},
    {"psi_io_full_us", true, "Time all tasks waited for I/O (PSI), microseconds"},
    {"psi_memory_some_us", true, "Time some task waited for memory (PSI), microseconds"},
    {"psi_memory_full_us", true, "Time all tasks waited for memory (PSI), microseconds"},
    {"psi_cpu_some_avg10", false, "Share of the last 10 s some task waited for a CPU, x 10000"},
};
static_assert(std::size(kFieldInfo) == kNumFields);

int64_t ClockNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// The whole of `token` as a decimal number.
template <typename T>
bool ParseNumber(std::string_view token, T* out) {
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), *out);
  return ec == std::errc() && end == token.data() + token.size() && !token.empty();
}

// Splits `text` at the first '\n'; returns the line without it.
std::string_view NextLine(std::string_view& text) {
  size_t end = text.find('\n');
  std::string_view line = text.substr(0, end);
  text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  return line;
}

// The next whitespace-separated token of `line`, consumed.
std::string_view NextToken(std::string_view& line) {
  size_t begin = line.find_first_not_of(" \t");
  if (begin == std::string_view::npos) {
    line = {};
    return {};
  }
  line.remove_prefix(begin);
  size_t end = line.find_first_of(" \t");
  std::string_view token = line.substr(0, end);
  line.remove_prefix(end == std::string_view::npos ? line.size() : end);
  return token;
}

uint64_t NextNumber(std::string_view& line) {
  uint64_t v = 0;
  if (!ParseNumber(NextToken(line), &v)) return 0;
  return v;
}

// "12.34" -> 12340 (x 1000), exact for the two decimals the kernel prints.
uint64_t ParseMilli(std::string_view token) {
  size_t dot = token.find('.');
  uint64_t whole = 0, frac = 0;
  if (!ParseNumber(token.substr(0, dot), &whole)) return 0;
  if (dot != std::string_view::npos) {
    std::string_view digits = token.substr(dot + 1, 3);
    if (!ParseNumber(digits, &frac)) return 0;
    for (size_t i = digits.size(); i < 3; ++i) frac *= 10;
  }
  return whole * 1000 + frac;
}

CpuTimes ParseCpuTimes(std::string_view rest) {
  CpuTimes t;
  for (uint64_t* f : {&t.user, &t.nice, &t.system, &t.idle, &t.iowait, &t.irq, &t.softirq,
                      &t.steal}) {
    *f = NextNumber(rest);
  }
  return t;
}

absl::Status ParseStat(std::string_view text, LoadSample& s) {
  bool saw_cpu = false;
  while (!text.empty()) {
    std::string_view line = NextLine(text);
    std::string_view key = NextToken(line);
    if (key == "cpu") {
      s.cpu = ParseCpuTimes(line);
      saw_cpu = true;
    } else if (key.starts_with("cpu")) {
      size_t index;
      if (!ParseNumber(key.substr(3), &index) || index > 65535) continue;
      if (s.cpus.size() <= index) s.cpus.resize(index + 1);
      s.cpus[index] = ParseCpuTimes(line);
    } else if (key == "intr") {
      s[Field::kInterrupts] = NextNumber(line);
    } else if (key == "ctxt") {
      s[Field::kContextSwitches] = NextNumber(line);
    } else if (key == "processes") {
      s[Field::kForks] = NextNumber(line);
    } else if (key == "procs_running") {
      s[Field::kProcsRunning] = NextNumber(line);
    } else if (key == "procs_blocked") {
      s[Field::kProcsBlocked] = NextNumber(line);
    } else if (key == "softirq") {
      s[Field::kSoftirqs] = NextNumber(line);
    }
  }
  if (!saw_cpu) return absl::InvalidArgumentError("no 'cpu' line");
  return absl::OkStatus();
}

absl::Status ParseLoadavg(std::string_view text, LoadSample& s) {
  std::string_view line = NextLine(text);
  std::string_view l1 = NextToken(line), l5 = NextToken(line), l15 = NextToken(line);
  std::string_view threads = NextToken(line);
  size_t slash = threads.find('/');
  if (l15.empty() || slash == std::string_view::npos) {
    return absl::InvalidArgumentError("unexpected format");
  }
  s[Field::kLoad1Milli] = ParseMilli(l1);
  s[Field::kLoad5Milli] = ParseMilli(l5);
  s[Field::kLoad15Milli] = ParseMilli(l15);
  uint64_t total = 0;
  (void)ParseNumber(threads.substr(slash + 1), &total);
  s[Field::kThreadsTotal] = total;
  return absl::OkStatus();
}

absl::Status ParseMeminfo(std::string_view text, LoadSample& s) {
  struct Key {
    std::string_view name;
    Field field;
  };
  static constexpr Key kKeys[] = {
      {"MemTotal:", Field::kMemTotal},       {"MemFree:", Field::kMemFree},
      {"MemAvailable:", Field::kMemAvailable}, {"Buffers:", Field::kMemBuffers},
      {"Cached:", Field::kMemCached},        {"SwapTotal:", Field::kSwapTotal},
      {"SwapFree:", Field::kSwapFree},
  };
  size_t found = 0;
  while (!text.empty() && found < std::size(kKeys)) {
    std::string_view line = NextLine(text);
    std::string_view name = NextToken(line);
    for (const Key& k : kKeys) {
      if (name != k.name) continue;
      s[k.field] = NextNumber(line) * 1024;  // the kernel prints kB
      ++found;
      break;
    }
  }
  if (s[Field::kMemTotal] == 0) return absl::InvalidArgumentError("no MemTotal");
  return absl::OkStatus();
}

void ParseNetDev(std::string_view text, LoadSample& s) {
  NextLine(text);  // two header lines
  NextLine(text);
  while (!text.empty()) {
    std::string_view line = NextLine(text);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view name = line.substr(0, colon);
    name.remove_prefix(std::min(name.size(), name.find_first_not_of(' ')));
    if (name == "lo") continue;
    line.remove_prefix(colon + 1);
    uint64_t v[10];
    for (uint64_t& x : v) x = NextNumber(line);
    s[Field::kNetRxBytes] += v[0];
    s[Field::kNetRxPackets] += v[1];
    s[Field::kNetTxBytes] += v[8];
    s[Field::kNetTxPackets] += v[9];
  }
}

// "some avg10=0.00 avg60=2.25 avg300=3.04 total=780095530" / "full ..."
void ParsePressure(std::string_view text, Field some_total, Field full_total, Field some_avg10,
                   LoadSample& s) {
  while (!text.empty()) {
    std::string_view line = NextLine(text);
    std::string_view kind = NextToken(line);
    bool some = kind == "some";
    if (!some && kind != "full") continue;
    for (std::string_view token = NextToken(line); !token.empty(); token = NextToken(line)) {
      if (token.starts_with("total=")) {
        uint64_t v = 0;
        (void)ParseNumber(token.substr(6), &v);
        if (some) s[some_total] = v;
        if (!some && full_total != Field::kCount) s[full_total] = v;
      } else if (some && some_avg10 != Field::kCount && token.starts_with("avg10=")) {
        s[some_avg10] = ParseMilli(token.substr(6)) / 10;  // percent x 100
      }
    }
  }
}

}  // namespace

const FieldInfo& Info(Field f) { return kFieldInfo[static_cast<size_t>(f)]; }

size_t EncodedSampleSize(size_t cpus) {
  return kHeaderBytes + 8 * (kNumFields + kCpuWords * (cpus + 1));  // + the all-CPU line
}

std::string EncodeSample(const LoadSample& s) {
  std::string out;
  out.reserve(EncodedSampleSize(s.cpus.size()));
  wire::ByteWriter w(&out);
  w.U32(kMagic);
  w.U16(static_cast<uint16_t>(s.cpus.size()));
  w.U16(static_cast<uint16_t>(kNumFields));
  w.U32(s.flags);
  w.U32(0);
  w.U64(s.sequence);
  w.U64(static_cast<uint64_t>(s.realtime_ns));
  w.U64(static_cast<uint64_t>(s.monotonic_ns));
  w.U64(s.sample_ns);
  w.U64(s.ticks_per_second);
  for (uint64_t v : s.fields) w.U64(v);
  auto put_cpu = [&](const CpuTimes& t) {
    for (uint64_t v : {t.user, t.nice, t.system, t.idle, t.iowait, t.irq, t.softirq, t.steal}) {
      w.U64(v);
    }
  };
  for (const CpuTimes& t : s.cpus) put_cpu(t);
  // The all-CPU line last: a decoder that knows fewer fields still finds it from the end.
  put_cpu(s.cpu);
  return out;
}

absl::StatusOr<LoadSample> DecodeSample(std::string_view bytes) {
  wire::ByteReader r(bytes);
  uint32_t magic = 0, reserved = 0;
  uint16_t cpus = 0, fields = 0;
  LoadSample s;
  uint64_t realtime = 0, monotonic = 0;
  if (!r.U32(&magic) || magic != kMagic) return absl::DataLossError("not a load sample");
  if (!r.U16(&cpus) || !r.U16(&fields) || !r.U32(&s.flags) || !r.U32(&reserved) ||
      !r.U64(&s.sequence) || !r.U64(&realtime) || !r.U64(&monotonic) || !r.U64(&s.sample_ns) ||
      !r.U64(&s.ticks_per_second)) {
    return absl::DataLossError("load sample: truncated header");
  }
  if (r.remaining() != 8 * (size_t{fields} + kCpuWords * (size_t{cpus} + 1))) {
    return absl::DataLossError("load sample: size does not match its CPU and field counts");
  }
  s.realtime_ns = static_cast<int64_t>(realtime);
  s.monotonic_ns = static_cast<int64_t>(monotonic);
  for (uint16_t i = 0; i < fields; ++i) {
    uint64_t v = 0;
    r.U64(&v);
    if (i < kNumFields) s.fields[i] = v;
  }
  auto get_cpu = [&](CpuTimes& t) {
    for (uint64_t* f : {&t.user, &t.nice, &t.system, &t.idle, &t.iowait, &t.irq, &t.softirq,
                        &t.steal}) {
      r.U64(f);
    }
  };
  s.cpus.resize(cpus);
  for (CpuTimes& t : s.cpus) get_cpu(t);
  get_cpu(s.cpu);
  return s;
}

struct ProcSampler::File {
  std::string path;
  bool required = false;
  int fd = -1;
};

ProcSampler::ProcSampler(std::string procfs) : procfs_(std::move(procfs)) {
  for (const char* name : {"stat", "loadavg", "meminfo", "net/dev", "pressure/cpu", "pressure/io",
                           "pressure/memory"}) {
    File f;
    f.path = absl::StrCat(procfs_, "/", name);
    f.required = std::string_view(name) == "stat" || std::string_view(name) == "loadavg" ||
                 std::string_view(name) == "meminfo";
    files_.push_back(std::move(f));
  }
  buffer_.resize(64 << 10);
}

ProcSampler::~ProcSampler() {
  for (File& f : files_) {
    if (f.fd >= 0) close(f.fd);
  }
}

absl::StatusOr<std::string_view> ProcSampler::ReadFile(File& file) {
  if (file.fd < 0) {
    file.fd = open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (file.fd < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot open ", file.path, ": ", std::strerror(errno)));
    }
  }
  size_t used = 0;
  for (;;) {
    if (used == buffer_.size()) buffer_.resize(buffer_.size() * 2);
    ssize_t n = pread(file.fd, buffer_.data() + used, buffer_.size() - used,
                      static_cast<off_t>(used));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(file.fd);
      file.fd = -1;
      return absl::FailedPreconditionError(
          absl::StrCat("cannot read ", file.path, ": ", std::strerror(err)));
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  return std::string_view(buffer_.data(), used);
}

absl::StatusOr<LoadSample> ProcSampler::Sample() {
  LoadSample s;
  s.realtime_ns = ClockNs(CLOCK_REALTIME);
  s.monotonic_ns = ClockNs(CLOCK_MONOTONIC);
  static const long kTicks = sysconf(_SC_CLK_TCK);
  s.ticks_per_second = kTicks > 0 ? static_cast<uint64_t>(kTicks) : 100;
  for (size_t i = 0; i < files_.size(); ++i) {
    File& f = files_[i];
    absl::StatusOr<std::string_view> text = ReadFile(f);
    if (!text.ok()) {
      if (f.required) return text.status();
      continue;
    }
    absl::Status parsed;
    switch (i) {
      case 0:
        parsed = ParseStat(*text, s);
        break;
      case 1:
        parsed = ParseLoadavg(*text, s);
        break;
      case 2:
        parsed = ParseMeminfo(*text, s);
        break;
      case 3:
        ParseNetDev(*text, s);
        break;
      case 4:
        ParsePressure(*text, Field::kPsiCpuSomeUs, Field::kCount, Field::kPsiCpuSomeAvg10, s);
        s.flags |= kFlagPsi;
        break;
      case 5:
        ParsePressure(*text, Field::kPsiIoSomeUs, Field::kPsiIoFullUs, Field::kCount, s);
        break;
      case 6:
        ParsePressure(*text, Field::kPsiMemorySomeUs, Field::kPsiMemoryFullUs, Field::kCount, s);
        break;
    }
    if (!parsed.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(f.path, ": ", parsed.message()));
    }
  }
  s.sequence = next_sequence_++;
  s.sample_ns = static_cast<uint64_t>(ClockNs(CLOCK_MONOTONIC) - s.monotonic_ns);
  return s;
}

namespace {

double Busy(const CpuTimes* before, const CpuTimes& after, double* iowait) {
  CpuTimes b = before ? *before : CpuTimes{};
  uint64_t total = after.Total() - std::min(after.Total(), b.Total());
  uint64_t idle = after.Idle() - std::min(after.Idle(), b.Idle());
  if (iowait) {
    *iowait = total ? static_cast<double>(after.iowait - std::min(after.iowait, b.iowait)) / total
                    : 0;
  }
  if (total == 0) return 0;
  return 1.0 - static_cast<double>(std::min(idle, total)) / static_cast<double>(total);
}

}  // namespace

Figures ComputeFigures(const LoadSample* previous, const LoadSample& current) {
  Figures f;
  f.procs_running = current[Field::kProcsRunning];
  f.procs_blocked = current[Field::kProcsBlocked];
  f.load1 = current[Field::kLoad1Milli] / 1000.0;
  uint64_t mem_total = current[Field::kMemTotal];
  f.memory_used =
      mem_total ? 1.0 - static_cast<double>(std::min(current[Field::kMemAvailable], mem_total)) /
                            static_cast<double>(mem_total)
                : 0;
  size_t cpus = std::max<size_t>(1, current.cpus.size());
  if (previous == nullptr || previous->monotonic_ns >= current.monotonic_ns) {
    f.cpu_busy = std::min(1.0, static_cast<double>(f.procs_running) / static_cast<double>(cpus));
    f.cpu_busy_per_cpu.assign(current.cpus.size(), f.cpu_busy);
    return f;
  }
  f.seconds = (current.monotonic_ns - previous->monotonic_ns) / 1e9;
  f.cpu_busy = Busy(&previous->cpu, current.cpu, &f.iowait);
  for (size_t i = 0; i < current.cpus.size(); ++i) {
    const CpuTimes* before = i < previous->cpus.size() ? &previous->cpus[i] : nullptr;
    f.cpu_busy_per_cpu.push_back(Busy(before, current.cpus[i], nullptr));
  }
  auto delta = [&](Field field) {
    return current[field] - std::min(current[field], (*previous)[field]);
  };
  auto rate = [&](Field field) { return static_cast<double>(delta(field)) / f.seconds; };
  f.net_rx_bytes_per_s = rate(Field::kNetRxBytes);
  f.net_tx_bytes_per_s = rate(Field::kNetTxBytes);
  f.net_rx_packets_per_s = rate(Field::kNetRxPackets);
  f.net_tx_packets_per_s = rate(Field::kNetTxPackets);
  f.interrupts = delta(Field::kInterrupts);
  f.softirqs = delta(Field::kSoftirqs);
  f.context_switches = delta(Field::kContextSwitches);
  f.cpu_pressure = std::min(1.0, static_cast<double>(delta(Field::kPsiCpuSomeUs)) /
                                     (f.seconds * 1e6));
  return f;
}

}  // namespace ardma::monitor
