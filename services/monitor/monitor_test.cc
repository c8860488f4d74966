// The load monitor: samples (parsed, encoded, compared with /proc), the four schemes, torn-read
// detection, the balancer, the Prometheus export and the CLIs.
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/client/invoke.h"
#include "core/net/socket_connect.h"
#include "core/security/auth.h"
#include "core/status_macros.h"
#include "core/testing/run_command.h"
#include "core/testing/server_process.h"
#include "core/testing/test_server.h"
#include "core/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/monitor/load_sample.h"
#include "services/monitor/monitor_agent.h"
#include "services/monitor/monitor_client.h"
#include "services/monitor/monitor_view.h"
#include "services/monitor/publication.h"
#include "services/monitor/socket_daemon.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(monitor);

namespace ardma::monitor {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A procfs made of plain files, for scripted hosts.
class FakeProc {
 public:
  FakeProc() {
    char tmpl[] = "/tmp/ardma-fakeproc-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::filesystem::create_directories(dir_ + "/net");
    std::filesystem::create_directories(dir_ + "/pressure");
    SetCpu(1000, 9000, 1);
    Put("loadavg", "0.52 1.25 2.00 3/456 7890\n");
    Put("meminfo",
        "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    250 kB\n"
        "Buffers:          10 kB\nCached:           20 kB\nSwapCached:        0 kB\n"
        "SwapTotal:        64 kB\nSwapFree:         32 kB\n");
    Put("net/dev",
        "Inter-|   Receive                                                |  Transmit\n"
        " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs "
        "drop fifo colls carrier compressed\n"
        "    lo: 999999 9999 0 0 0 0 0 0 999999 9999 0 0 0 0 0 0\n"
        "  eth0: 1000 10 0 0 0 0 0 0 2000 20 0 0 0 0 0 0\n"
        "  eth1: 500 5 0 0 0 0 0 0 700 7 0 0 0 0 0 0\n");
    Put("pressure/cpu",
        "some avg10=1.50 avg60=2.25 avg300=3.04 total=780095530\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
    Put("pressure/io",
        "some avg10=0.00 avg60=0.04 avg300=0.02 total=14682724\n"
        "full avg10=0.00 avg60=0.04 avg300=0.02 total=12386740\n");
    Put("pressure/memory",
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=11\nfull avg10=0.00 avg60=0.00 "
        "avg300=0.00 total=7\n");
  }
  ~FakeProc() { std::filesystem::remove_all(dir_); }
  const std::string& dir() const { return dir_; }

  void Put(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }
  // Two CPUs; `busy` user ticks and `idle` idle ticks on each.
  void SetCpu(uint64_t busy, uint64_t idle, uint64_t running) {
    Put("stat", absl::StrCat("cpu  ", 2 * busy, " 0 0 ", 2 * idle, " 0 0 0 0 0 0\n",  //
                             "cpu0 ", busy, " 0 0 ", idle, " 0 0 0 0 0 0\n",          //
                             "cpu1 ", busy, " 0 0 ", idle, " 0 0 0 0 0 0\n",          //
                             "intr 12345 1 2 3\nctxt 777\nbtime 1\nprocesses 4242\n",
                             "procs_running ", running, "\nprocs_blocked 2\nsoftirq 555 1 2\n"));
  }

 private:
  std::string dir_;
};

TEST(LoadSampleTest, ParsesEveryFieldOfAProcfs) {
  FakeProc proc;
  ProcSampler sampler(proc.dir());
  absl::StatusOr<LoadSample> s = sampler.Sample();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->sequence, 1u);
  ASSERT_EQ(s->cpus.size(), 2u);
  EXPECT_EQ(s->cpu.user, 2000u);
  EXPECT_EQ(s->cpu.idle, 18000u);
  EXPECT_EQ(s->cpus[1].user, 1000u);
  EXPECT_EQ((*s)[Field::kProcsRunning], 1u);
  EXPECT_EQ((*s)[Field::kProcsBlocked], 2u);
  EXPECT_EQ((*s)[Field::kInterrupts], 12345u);
  EXPECT_EQ((*s)[Field::kSoftirqs], 555u);
  EXPECT_EQ((*s)[Field::kContextSwitches], 777u);
  EXPECT_EQ((*s)[Field::kForks], 4242u);
  EXPECT_EQ((*s)[Field::kLoad1Milli], 520u);
  EXPECT_EQ((*s)[Field::kLoad5Milli], 1250u);
  EXPECT_EQ((*s)[Field::kLoad15Milli], 2000u);
  EXPECT_EQ((*s)[Field::kThreadsTotal], 456u);
  EXPECT_EQ((*s)[Field::kMemTotal], 1000u * 1024);
  EXPECT_EQ((*s)[Field::kMemAvailable], 250u * 1024);
  EXPECT_EQ((*s)[Field::kMemCached], 20u * 1024);
  EXPECT_EQ((*s)[Field::kSwapFree], 32u * 1024);
  EXPECT_EQ((*s)[Field::kNetRxBytes], 1500u);  // lo left out
  EXPECT_EQ((*s)[Field::kNetTxPackets], 27u);
  EXPECT_EQ((*s)[Field::kPsiCpuSomeUs], 780095530u);
  EXPECT_EQ((*s)[Field::kPsiCpuSomeAvg10], 150u);
  EXPECT_EQ((*s)[Field::kPsiIoFullUs], 12386740u);
  EXPECT_EQ((*s)[Field::kPsiMemoryFullUs], 7u);
  EXPECT_TRUE(s->flags & kFlagPsi);
  EXPECT_EQ(sampler.Sample()->sequence, 2u);

  Figures f = ComputeFigures(nullptr, *s);
  EXPECT_DOUBLE_EQ(f.cpu_busy, 0.5);  // one sample: procs_running / cpus
  EXPECT_DOUBLE_EQ(f.memory_used, 0.75);
}

TEST(LoadSampleTest, OptionalFilesMayBeMissingRequiredOnesMayNot) {
  FakeProc proc;
  std::filesystem::remove_all(proc.dir() + "/pressure");
  std::filesystem::remove(proc.dir() + "/net/dev");
  ProcSampler sampler(proc.dir());
  absl::StatusOr<LoadSample> s = sampler.Sample();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->flags & kFlagPsi);
  EXPECT_EQ((*s)[Field::kNetRxBytes], 0u);

  std::filesystem::remove(proc.dir() + "/meminfo");
  ProcSampler broken(proc.dir());
  EXPECT_TRUE(absl::IsFailedPrecondition(broken.Sample().status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(ProcSampler("/nonexistent").Sample().status()));
  proc.Put("stat", "garbage\n");
  EXPECT_TRUE(absl::IsFailedPrecondition(ProcSampler(proc.dir()).Sample().status()));
}

TEST(LoadSampleTest, EncodingRoundTripsAndRejectsGarbage) {
  ProcSampler sampler;
  absl::StatusOr<LoadSample> s = sampler.Sample();
  ASSERT_TRUE(s.ok()) << s.status();
  std::string bytes = EncodeSample(*s);
  EXPECT_EQ(bytes.size(), EncodedSampleSize(s->cpus.size()));
  absl::StatusOr<LoadSample> back = DecodeSample(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->sequence, s->sequence);
  EXPECT_EQ(back->monotonic_ns, s->monotonic_ns);
  EXPECT_EQ(back->fields, s->fields);
  ASSERT_EQ(back->cpus.size(), s->cpus.size());
  EXPECT_EQ(back->cpus.back().idle, s->cpus.back().idle);
  EXPECT_EQ(back->cpu.system, s->cpu.system);
  EXPECT_TRUE(absl::IsDataLoss(DecodeSample(bytes.substr(0, bytes.size() - 1)).status()));
  EXPECT_TRUE(absl::IsDataLoss(DecodeSample("hello").status()));
  EXPECT_TRUE(absl::IsDataLoss(DecodeSample("").status()));
}

// Tolerance: counters are bracketed by direct reads of /proc just before and just after the
// sample; MemTotal is exact; the load average equals a direct read when the reads bracketing it
// agree (it changes every 5 s).
TEST(LoadSampleTest, AgreesWithProcReadDirectlyAtTheSameMoment) {
  ProcSampler sampler;
  auto direct = [] {
    ProcSampler fresh;  // its own files
    return *fresh.Sample();
  };
  for (int i = 0; i < 20; ++i) {
    LoadSample before = direct();
    LoadSample s = *sampler.Sample();
    LoadSample after = direct();
    ASSERT_EQ(s.cpus.size(), before.cpus.size());
    EXPECT_EQ(s.cpus.size(), static_cast<size_t>(sysconf(_SC_NPROCESSORS_CONF)));
    EXPECT_GE(s.cpu.Total(), before.cpu.Total());
    EXPECT_LE(s.cpu.Total(), after.cpu.Total());
    EXPECT_GE(s.cpu.idle, before.cpu.idle);
    EXPECT_LE(s.cpu.idle, after.cpu.idle);
    for (Field f :
         {Field::kContextSwitches, Field::kInterrupts, Field::kForks, Field::kNetRxBytes}) {
      EXPECT_GE(s[f], before[f]) << Info(f).name;
      EXPECT_LE(s[f], after[f]) << Info(f).name;
    }
    EXPECT_EQ(s[Field::kMemTotal], before[Field::kMemTotal]);
    if (before[Field::kLoad1Milli] == after[Field::kLoad1Milli]) {
      EXPECT_EQ(s[Field::kLoad1Milli], before[Field::kLoad1Milli]);
    }
    // procs_running counts the sampling thread itself.
    EXPECT_GE(s[Field::kProcsRunning], 1u);
    EXPECT_LE(s[Field::kProcsRunning], s[Field::kThreadsTotal]);
    EXPECT_GE(s.monotonic_ns, before.monotonic_ns);
    EXPECT_LE(s.monotonic_ns, after.monotonic_ns);
  }
  std::string meminfo = Slurp("/proc/meminfo");
  uint64_t kb = 0;
  ASSERT_EQ(std::sscanf(meminfo.c_str(), "MemTotal: %lu kB", &kb), 1);
  EXPECT_EQ(sampler.Sample()->fields[static_cast<size_t>(Field::kMemTotal)], kb * 1024);
}

TEST(LoadSampleTest, FiguresFromTwoSamples) {
  FakeProc proc;
  ProcSampler sampler(proc.dir());
  LoadSample a = *sampler.Sample();
  proc.SetCpu(1000 + 75, 9000 + 25, 3);  // 75% busy since
  proc.Put("net/dev", Slurp(proc.dir() + "/net/dev"));
  LoadSample b = *sampler.Sample();
  b.monotonic_ns = a.monotonic_ns + 500000000;  // half a second later
  b[Field::kNetRxBytes] = a[Field::kNetRxBytes] + 1000;
  b[Field::kInterrupts] = a[Field::kInterrupts] + 40;
  Figures f = ComputeFigures(&a, b);
  EXPECT_DOUBLE_EQ(f.seconds, 0.5);
  EXPECT_DOUBLE_EQ(f.cpu_busy, 0.75);
  ASSERT_EQ(f.cpu_busy_per_cpu.size(), 2u);
  EXPECT_DOUBLE_EQ(f.cpu_busy_per_cpu[1], 0.75);
  EXPECT_EQ(f.procs_running, 3u);
  EXPECT_DOUBLE_EQ(f.net_rx_bytes_per_s, 2000);
  EXPECT_EQ(f.interrupts, 40u);
}

// --- Publication (RDMA-Async) ---

std::string Publication(uint64_t slot_size, std::initializer_list<std::pair<uint64_t, char>> s) {
  std::string region(PublicationBytes(slot_size), '\0');
  Publisher publisher(region.data(), slot_size, 1000);
  for (auto [sequence, fill] : s) {
    EXPECT_TRUE(publisher.Publish(sequence, std::string(slot_size - kSlotHeaderBytes, fill)).ok());
  }
  return region;
}

TEST(PublicationTest, ReaderTakesTheNewestWholeSlot) {
  const uint64_t slot = SlotSizeFor(1000);
  EXPECT_EQ(slot % 64, 0u);
  EXPECT_TRUE(absl::IsUnavailable(ParsePublication(Publication(slot, {})).status()));
  absl::StatusOr<Published> p = ParsePublication(Publication(slot, {{1, 'a'}}));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->sequence, 1u);
  p = ParsePublication(Publication(slot, {{1, 'a'}, {2, 'b'}, {3, 'c'}}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->sequence, 3u);
  EXPECT_EQ(p->payload, std::string(slot - kSlotHeaderBytes, 'c'));
  EXPECT_TRUE(absl::IsDataLoss(ParsePublication("not a publication at all").status()));
  std::string region = Publication(slot, {{1, 'a'}});
  EXPECT_TRUE(absl::IsDataLoss(ParsePublication(region.substr(0, region.size() - 64)).status()));
  std::string too_big(slot, 'x');
  std::string mem(PublicationBytes(slot), '\0');
  EXPECT_TRUE(absl::IsInvalidArgument(Publisher(mem.data(), slot, 1).Publish(1, too_big)));
}

// A copy made while the writer rewrites a slot mixes the old and the new bytes: every such mix is
// refused, and the reader falls back to the other slot's whole sample.
TEST(PublicationTest, ATornSlotIsNeverReturned) {
  const uint64_t slot = SlotSizeFor(256);
  std::string old_state = Publication(slot, {{1, 'a'}, {2, 'b'}});
  std::string new_state = Publication(slot, {{1, 'a'}, {2, 'b'}, {3, 'c'}});  // slot 1 rewritten
  for (size_t split = 0; split <= old_state.size(); split += 8) {
    for (bool new_first : {false, true}) {
      // Bytes before `split` from one state, after it from the other: a copy overlapping a write.
      std::string mixed = new_first ? new_state.substr(0, split) + old_state.substr(split)
                                    : old_state.substr(0, split) + new_state.substr(split);
      absl::StatusOr<Published> p = ParsePublication(mixed);
      ASSERT_TRUE(p.ok()) << split;  // slot 0 (sequence 2) is whole in both states
      std::set<char> bytes(p->payload.begin(), p->payload.end());
      ASSERT_EQ(bytes.size(), 1u) << "torn payload returned at split " << split;
      EXPECT_TRUE(p->sequence == 2 || p->sequence == 3);
      EXPECT_EQ(*bytes.begin(), p->sequence == 2 ? 'b' : 'c');
    }
  }
}

// The same through a real server: a writer rewrites the region as fast as it can while a client
// READs it; every sample the reader accepts is uniform (one publication, not a mix).
TEST(PublicationTest, ConcurrentReadsThroughTheServerNeverReturnATornSample) {
  const uint64_t slot = SlotSizeFor(16 << 10);
  std::shared_ptr<Region> region =
      *Region::Create({.size = PublicationBytes(slot), .read_only = true});
  Publisher publisher(region->data(), slot, 0);
  ASSERT_TRUE(publisher.Publish(1, std::string(slot - kSlotHeaderBytes, 1)).ok());
  ServerOptions options = testing::TestServerOptions();
  options.extra_regions.push_back(region);
  auto server = testing::TestServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = (*server)->NewClient();
  ASSERT_TRUE(client.ok());
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (uint64_t seq = 2; !stop.load(); ++seq) {
      (void)publisher.Publish(seq, std::string(slot - kSlotHeaderBytes, static_cast<char>(seq)));
    }
  });
  absl::Cleanup join = [&] {
    stop = true;
    writer.join();
  };
  int accepted = 0, torn = 0;
  for (int i = 0; i < 2000; ++i) {
    absl::StatusOr<std::string> bytes =
        (*client)->Read(0, static_cast<uint32_t>(PublicationBytes(slot)), 1);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    absl::StatusOr<Published> p = ParsePublication(*bytes);
    if (!p.ok()) {
      ASSERT_TRUE(absl::IsUnavailable(p.status())) << p.status();
      ++torn;
      continue;
    }
    ++accepted;
    std::set<char> distinct(p->payload.begin(), p->payload.end());
    ASSERT_EQ(distinct.size(), 1u) << "torn sample returned";
    ASSERT_EQ(*distinct.begin(), static_cast<char>(p->sequence));
  }
  EXPECT_GT(accepted, 0);
  std::printf("accepted %d, both slots torn %d\n", accepted, torn);
  // The region is read-only to clients.
  EXPECT_TRUE(absl::IsPermissionDenied((*client)->Write(0, "x", 1)));
}

// --- Authentication (docs/SECURITY.md): a front end needs only read:1 for rdma-async, and exec
// (with the library preloaded) for rdma-sync. ---

TEST(MonitorAuthTest, FrontEndsNeedOnlyTheirSchemesPermission) {
  absl::StatusOr<std::unique_ptr<MonitorAgent>> agent =
      MonitorAgent::Create({.interval = absl::Milliseconds(2)});
  ASSERT_TRUE(agent.ok()) << agent.status();
  ServerOptions options = testing::TestServerOptions();
  options.extra_regions.push_back((*agent)->region());
  options.handler.auth = std::make_shared<const security::AuthTable>(*security::AuthTable::Parse(
      "watcher watcher-secret-0123456789 read:1\nsampler sampler-secret-01234567 exec\n", "t"));
  std::string dir = testing::TempPath("preload");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/monitor.so", std::ios::binary) << active_libraries::monitor().code();
  options.preload_dir = dir;
  absl::StatusOr<std::unique_ptr<testing::TestServer>> server = testing::TestServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  (*agent)->Start();
  absl::Cleanup stop = [&] {
    (*agent)->Stop();
    unsetenv("ARDMA_AUTH_FILE");
  };
  auto poll_as = [&](const std::string& line, Scheme scheme) -> absl::Status {
    std::string creds = testing::TempPath("creds");
    std::ofstream(creds) << line << "\n";
    ::chmod(creds.c_str(), 0600);
    setenv("ARDMA_AUTH_FILE", creds.c_str(), 1);
    PollerOptions o;
    o.scheme = scheme;
    o.address = testing::ClientAddress((*server)->address());
    ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Poller> poller, Poller::Connect(o));
    return poller->Poll().status();
  };
  EXPECT_TRUE(poll_as("watcher watcher-secret-0123456789", Scheme::kRdmaAsync).ok());
  EXPECT_EQ(poll_as("watcher watcher-secret-0123456789", Scheme::kRdmaSync).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(poll_as("sampler sampler-secret-01234567", Scheme::kRdmaSync).ok());
  EXPECT_EQ(poll_as("sampler sampler-secret-01234567", Scheme::kRdmaAsync).code(),
            absl::StatusCode::kPermissionDenied);
}

// --- The four schemes ---

class SchemesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<MonitorAgent>> agent =
        MonitorAgent::Create({.interval = absl::Milliseconds(2)});
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = *std::move(agent);
    ServerOptions options = testing::TestServerOptions();
    options.extra_regions.push_back(agent_->region());
    auto server = testing::TestServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    agent_->Start();
    auto daemon = SocketDaemon::Start({.listen = "127.0.0.1:0", .interval = absl::Milliseconds(2)});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
  }

  PollerOptions OptionsFor(Scheme scheme) {
    PollerOptions o;
    o.scheme = scheme;
    o.address = IsRdma(scheme) ? testing::ClientAddress(server_->address()) : daemon_->address();
    return o;
  }

  std::unique_ptr<MonitorAgent> agent_;
  std::unique_ptr<testing::TestServer> server_;
  std::unique_ptr<SocketDaemon> daemon_;
};

TEST_F(SchemesTest, AllFourReturnTheSameFieldsWithGrowingSequences) {
  std::vector<LoadSample> firsts;
  for (Scheme scheme : kAllSchemes) {
    SCOPED_TRACE(SchemeName(scheme));
    absl::StatusOr<std::unique_ptr<Poller>> poller = Poller::Connect(OptionsFor(scheme));
    ASSERT_TRUE(poller.ok()) << poller.status();
    absl::StatusOr<LoadSample> a = (*poller)->Poll();
    ASSERT_TRUE(a.ok()) << a.status();
    // The async schemes publish every 2 ms (later on a busy host): poll until a new sample.
    absl::StatusOr<LoadSample> b;
    testing::WaitUntil(
        [&] {
          b = (*poller)->Poll();
          return !b.ok() || b->sequence > a->sequence;
        },
        absl::Seconds(5), absl::Milliseconds(5));
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_GT(b->sequence, a->sequence);
    EXPECT_GT(b->monotonic_ns, a->monotonic_ns);
    EXPECT_GE(b->cpu.Total(), a->cpu.Total());
    firsts.push_back(*a);
  }
  for (const LoadSample& s : firsts) {
    EXPECT_EQ(s.cpus.size(), firsts[0].cpus.size());
    EXPECT_EQ(s.flags, firsts[0].flags);
    EXPECT_EQ(s.ticks_per_second, firsts[0].ticks_per_second);
    EXPECT_EQ(s[Field::kMemTotal], firsts[0][Field::kMemTotal]);
    EXPECT_GT(s[Field::kMemTotal], 0u);
    EXPECT_GT(s.cpu.Total(), 0u);
    EXPECT_GE(s[Field::kProcsRunning], 1u);
  }
  EXPECT_GT(agent_->published(), 1u);
}

TEST_F(SchemesTest, RdmaSyncIsOneRoundTripAndRefusesRdmaMode) {
  auto client = server_->NewClient();
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(EnsureLoaded(**client, active_libraries::monitor()).ok());
  uint64_t before = (*client)->counters().round_trips;
  absl::StatusOr<std::string> bytes =
      Invoke(**client, Mode::kActive, active_libraries::monitor(), "monitor.sample", "");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ((*client)->counters().round_trips - before, 1u);
  EXPECT_TRUE(DecodeSample(*bytes).ok());
  // Run on the client, it would sample the wrong host.
  EXPECT_TRUE(absl::IsFailedPrecondition(
      Invoke(**client, Mode::kRdma, active_libraries::monitor(), "monitor.sample", "").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      Invoke(**client, Mode::kActive, active_libraries::monitor(), "monitor.sample", "\x05")
          .status()));
}

TEST_F(SchemesTest, RdmaAsyncIsOneReadPerPoll) {
  auto client = server_->NewClient();
  ASSERT_TRUE(client.ok());
  absl::StatusOr<std::unique_ptr<Poller>> poller = Poller::Connect(OptionsFor(Scheme::kRdmaAsync));
  ASSERT_TRUE(poller.ok());
  ASSERT_TRUE((*poller)->Poll().ok());  // the first poll also reads the header
  absl::StatusOr<uint64_t> reads = testing::StatValue(**client, "requests.read");
  ASSERT_TRUE(reads.ok()) << reads.status();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE((*poller)->Poll().ok());
  absl::StatusOr<uint64_t> after = testing::StatValue(**client, "requests.read");
  // Over TCP each poll is one READ the server answers; over UCX it is a one-sided read the
  // server never sees (the RDMA load-monitoring paper's point: the monitored host's CPU is not
  // involved).
  uint64_t expected = testing::TestTransport() == "tcp" ? 10u + (*poller)->torn_reads() : 0u;
  EXPECT_EQ(*after - *reads, expected);
}

TEST_F(SchemesTest, SchemesTheBackEndDoesNotOfferAreClearErrors) {
  // An ardmad without the agent has no region 1.
  auto plain = testing::TestServer::Start();
  ASSERT_TRUE(plain.ok());
  PollerOptions o = OptionsFor(Scheme::kRdmaAsync);
  o.address = testing::ClientAddress((*plain)->address());
  absl::StatusOr<std::unique_ptr<Poller>> poller = Poller::Connect(o);
  ASSERT_TRUE(poller.ok());
  absl::Status st = (*poller)->Poll().status();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("--monitor-interval"));

  // A daemon without a calculating thread cannot answer Socket-Async.
  auto sync_only = SocketDaemon::Start({.listen = "127.0.0.1:0"});
  ASSERT_TRUE(sync_only.ok());
  o = OptionsFor(Scheme::kSocketAsync);
  o.address = (*sync_only)->address();
  poller = Poller::Connect(o);
  ASSERT_TRUE(poller.ok());
  st = (*poller)->Poll().status();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  o.scheme = Scheme::kSocketSync;
  EXPECT_TRUE((*Poller::Connect(o))->Poll().ok());

  // Nobody listening.
  std::string gone = (*sync_only)->address();
  (*sync_only)->Stop();
  o.address = gone;
  EXPECT_TRUE(absl::IsUnavailable(Poller::Connect(o).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseScheme("rdma").status()));
}

TEST_F(SchemesTest, AStoppedDaemonFailsThePollAndARestartedOneIsReconnected) {
  auto daemon = SocketDaemon::Start({.listen = "127.0.0.1:0"});
  ASSERT_TRUE(daemon.ok());
  std::string address = (*daemon)->address();
  PollerOptions o = OptionsFor(Scheme::kSocketSync);
  o.address = address;
  auto poller = Poller::Connect(o);
  ASSERT_TRUE(poller.ok());
  ASSERT_TRUE((*poller)->Poll().ok());
  (*daemon)->Stop();
  EXPECT_TRUE(absl::IsUnavailable((*poller)->Poll().status()));
  daemon = SocketDaemon::Start({.listen = address});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_TRUE((*poller)->Poll().ok());
}

TEST_F(SchemesTest, RealCpuLoadShowsInTheSamples) {
  absl::StatusOr<std::unique_ptr<Poller>> poller = Poller::Connect(OptionsFor(Scheme::kRdmaSync));
  ASSERT_TRUE(poller.ok());
  int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  std::atomic<bool> stop{false};
  std::vector<std::thread> hogs;
  for (int i = 0; i < cpus + 1; ++i) {
    hogs.emplace_back([&] {
      volatile uint64_t x = 0;
      while (!stop.load(std::memory_order_relaxed)) x = x + 1;
    });
  }
  absl::SleepFor(absl::Milliseconds(50));  // under test: the spinners show in the run queue
  LoadSample a = *(*poller)->Poll();
  uint64_t max_running = 0;
  for (int i = 0; i < 30; ++i) {
    absl::SleepFor(absl::Milliseconds(10));  // under test: samples over 300 ms
    max_running = std::max(max_running, (*(*poller)->Poll())[Field::kProcsRunning]);
  }
  LoadSample b = *(*poller)->Poll();
  stop = true;
  for (std::thread& t : hogs) t.join();
  Figures f = ComputeFigures(&a, b);
  // More runnable hogs than CPUs: the CPUs are (nearly) all busy and the run queue is long.
  EXPECT_GT(f.cpu_busy, 0.8);
  EXPECT_GE(max_running, static_cast<uint64_t>(cpus));
}

// --- The balancer ---

TEST(BalancerTest, WeightedLoadFollowsTheWeights) {
  Figures f;
  f.cpu_busy = 0.5;
  f.memory_used = 0.25;
  f.net_rx_bytes_per_s = 0.5e9;
  f.net_tx_bytes_per_s = 0.75e9;
  LoadWeights w;
  EXPECT_DOUBLE_EQ(WeightedLoad(f, 100, w), 0.4 * 0.5 + 0.2 * 0.25 + 0.2 * 1.0 + 0.2 * 0.1);
  f.cpu_busy = 3;  // clamped
  EXPECT_DOUBLE_EQ(WeightedLoad(f, 5000, {.cpu = 1, .memory = 0, .network = 0, .connections = 1}),
                   2.0);
}

// Three back ends, each with its own (scripted) procfs, polled by RDMA-Sync through one server:
// the test makes one busy, then another, and the balancer follows.
TEST(BalancerTest, PicksTheLeastLoadedBackEndAsTheTestMovesTheLoad) {
  auto server = testing::TestServer::Start();
  ASSERT_TRUE(server.ok());
  FakeProc procs[3];
  std::vector<std::unique_ptr<Poller>> pollers;
  for (FakeProc& p : procs) {
    PollerOptions o{
        .address = (*server)->address(), .scheme = Scheme::kRdmaSync, .procfs = p.dir()};
    pollers.push_back(*Poller::Connect(o));
  }
  Balancer balancer(3);
  EXPECT_TRUE(absl::IsFailedPrecondition(balancer.LeastLoaded().status()));
  uint64_t ticks[3] = {1000, 1000, 1000}, idle[3] = {9000, 9000, 9000};
  auto advance = [&](size_t i, uint64_t busy, uint64_t idle_ticks, uint64_t running) {
    ticks[i] += busy;
    idle[i] += idle_ticks;
    procs[i].SetCpu(ticks[i], idle[i], running);
  };
  auto poll_all = [&] {
    for (size_t i = 0; i < 3; ++i) {
      absl::StatusOr<LoadSample> s = pollers[i]->Poll();
      ASSERT_TRUE(s.ok()) << s.status();
      balancer.Update(i, *s);
    }
  };
  poll_all();
  // Back end 1 busy (90%), the others at 20% and 40%.
  advance(0, 20, 80, 1);
  advance(1, 90, 10, 6);
  advance(2, 40, 60, 2);
  poll_all();
  EXPECT_EQ(*balancer.LeastLoaded(), 0u);
  std::multiset<size_t> picks;
  for (int i = 0; i < 300; ++i) picks.insert(*balancer.PowerOfTwo());
  EXPECT_EQ(picks.count(1), 0u);              // the busiest loses every pair it is in
  EXPECT_GT(picks.count(0), picks.count(2));  // 0 wins both its pairs, 2 only {1, 2}
  EXPECT_GT(picks.count(2), 0u);

  // Now back end 0 gets busy and 1 idles.
  advance(0, 95, 5, 8);
  advance(1, 5, 95, 1);
  advance(2, 40, 60, 2);
  poll_all();
  EXPECT_EQ(*balancer.LeastLoaded(), 1u);

  // Connections count too: piling them on 1 moves the pick to 2.
  balancer.SetConnections(1, 1000);
  EXPECT_EQ(*balancer.LeastLoaded(), 2u);
  // A back end that is down is never picked.
  balancer.MarkDown(2);
  EXPECT_EQ(*balancer.LeastLoaded(), 1u);
  EXPECT_FALSE(balancer.Load(2).has_value());
  for (int i = 0; i < 50; ++i) EXPECT_NE(*balancer.PowerOfTwo(), 2u);
}

// --- Views and CLIs ---

TEST(ViewTest, PrometheusTextAndItsHttpEndpoint) {
  FakeProc proc;
  ProcSampler sampler(proc.dir());
  BackendState b;
  b.address = "10.0.0.2:15712";
  b.scheme = Scheme::kRdmaAsync;
  b.sample = *sampler.Sample();
  b.figures = ComputeFigures(nullptr, *b.sample);
  b.load = 0.25;
  b.latency = absl::Microseconds(30);
  BackendState down;
  down.address = "10.0.0.3:15712";
  down.error = "connect: refused";
  std::vector<BackendState> backends = {b, down};
  std::string text = PrometheusText(backends);
  const std::string labels = "{backend=\"10.0.0.2:15712\",scheme=\"rdma-async\"}";
  EXPECT_THAT(text, HasSubstr("# TYPE ardma_monitor_up gauge\n"));
  EXPECT_THAT(text, HasSubstr("ardma_monitor_up" + labels + " 1\n"));
  EXPECT_THAT(text,
              HasSubstr("ardma_monitor_up{backend=\"10.0.0.3:15712\",scheme=\"rdma-sync\"} 0"));
  EXPECT_THAT(text, HasSubstr("# TYPE ardma_monitor_interrupts_total counter\n"));
  EXPECT_THAT(text, HasSubstr("ardma_monitor_interrupts_total" + labels + " 12345\n"));
  EXPECT_THAT(text, HasSubstr("ardma_monitor_procs_running" + labels + " 1\n"));
  EXPECT_THAT(text, HasSubstr("ardma_monitor_mem_total_bytes" + labels + " 1024000\n"));
  EXPECT_THAT(text, HasSubstr("ardma_monitor_cpu_ticks_total{backend=\"10.0.0.2:15712\",scheme="
                              "\"rdma-async\",cpu=\"1\",mode=\"user\"} 1000\n"));
  EXPECT_THAT(text, HasSubstr("ardma_monitor_weighted_load" + labels + " 0.25\n"));
  // Every sample line is "name{labels} value" under a TYPE line of its family.
  std::istringstream lines(text);
  std::string line, family;
  while (std::getline(lines, line)) {
    if (absl::StartsWith(line, "# TYPE ")) {
      family = line.substr(7, line.find(' ', 7) - 7);
    } else if (!absl::StartsWith(line, "#")) {
      EXPECT_TRUE(absl::StartsWith(line, family + "{")) << line;
    }
  }

  auto server = MetricsServer::Start("127.0.0.1:0", [&] { return text; });
  ASSERT_TRUE(server.ok()) << server.status();
  int fd = *ConnectSocket((*server)->address(), absl::Seconds(5));
  ASSERT_TRUE(SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) response.append(buf, n);
  ::close(fd);
  EXPECT_TRUE(absl::StartsWith(response, "HTTP/1.1 200 OK\r\n")) << response;
  EXPECT_THAT(response, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_TRUE(absl::EndsWith(response, text));
}

TEST_F(SchemesTest, MonitorCliPrintsLinesAndFailsClearly) {
  std::string out, err;
  std::string cli = absl::StrCat(testing::BinDir(), "/ardma-monitor");
  int rc = testing::RunCommandSplit(
      absl::StrCat(cli, " --backends ", server_->address(), ",", server_->address(),
                   " --scheme rdma-async --interval 5ms --count 3 --lines"),
      &out, &err);
  EXPECT_EQ(rc, 0) << out << err;
  EXPECT_THAT(out, HasSubstr("rdma-async seq="));
  EXPECT_THAT(out, HasSubstr("pick " + server_->address()));
  size_t lines = 0;
  for (size_t at = out.find("rdma-async seq="); at != std::string::npos;
       at = out.find("rdma-async seq=", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 6u) << out;  // 3 polls of each of the 2 back ends

  rc = testing::RunCommandSplit(absl::StrCat(cli, " --backends ", daemon_->address(),
                                             " --scheme socket-sync --interval 5ms --count 2"),
                                &out, &err);
  EXPECT_EQ(rc, 0) << err;
  EXPECT_THAT(out, HasSubstr("socket-sync seq="));
  // --count N: exactly N records per back end, also when not on a terminal and without --lines.
  size_t records = 0;
  for (size_t at = out.find("socket-sync seq="); at != std::string::npos;
       at = out.find("socket-sync seq=", at + 1)) {
    ++records;
  }
  EXPECT_EQ(records, 2u) << out;

  rc = testing::RunCommandSplit(
      absl::StrCat(cli, " --backends 127.0.0.1:1 --count 1 --interval 5ms"), &out, &err);
  EXPECT_EQ(rc, 1);
  EXPECT_THAT(err, HasSubstr("ardma-monitor: "));  // the failed poll, on stderr
  EXPECT_THAT(err, HasSubstr("127.0.0.1:1 rdma-sync error: "));
  EXPECT_THAT(out, Not(HasSubstr("error")));
  EXPECT_EQ(
      testing::RunCommandSplit(absl::StrCat(cli, " --backends a:1 --scheme bogus"), &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("unknown scheme 'bogus'"));
  EXPECT_EQ(testing::RunCommandSplit(cli, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("--backends is required"));

  std::string ardmad = absl::StrCat(testing::BinDir(), "/ardmad");
  EXPECT_EQ(testing::RunCommandSplit(
                absl::StrCat(ardmad, " --listen 127.0.0.1:0 --monitor-interval 500us"), &out, &err),
            2);
  EXPECT_THAT(err, HasSubstr("below 1ms"));
  EXPECT_EQ(testing::RunCommandSplit(absl::StrCat(ardmad,
                                                  " --listen 127.0.0.1:0 --monitor-interval 10ms "
                                                  "--monitor-procfs /nonexistent"),
                                     &out, &err),
            2);
  EXPECT_THAT(err, HasSubstr("/nonexistent/stat"));
  std::string monitord = absl::StrCat(testing::BinDir(), "/ardma-monitord");
  EXPECT_EQ(testing::RunCommandSplit(absl::StrCat(monitord, " --interval 100us"), &out, &err), 2);
}

}  // namespace
}  // namespace ardma::monitor
