#include "bench/bench_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "core/active/local_context.h"
#include "core/active/native_loader.h"
#include "core/memory/heap.h"
#include "core/net/socket_connect.h"

namespace ardma::bench {

const std::string& BenchRegisterDir() {
  static const std::string dir = [] {
    std::string d = "/dev/shm/ardma_bench." + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    std::atexit([] { std::filesystem::remove_all(BenchRegisterDir()); });
    return d;
  }();
  return dir;
}

Server& SharedServer() {
  static Server* server = [] {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as ardmad does
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.memory_size = 256 << 20;
    options.handler.workers = 2;
    options.unix_socket = "/tmp/ardma_core_bench." + std::to_string(::getpid()) + ".sock";
    options.handler.registration.dir = BenchRegisterDir();
    // region_bench registers and deregisters in a loop, tens of thousands a second: with the
    // default quarantine the deregistered regions would fill --register-max within milliseconds.
    // No benchmark touches a region after deregistering it.
    options.handler.registration.quarantine = absl::ZeroDuration();
    // ARDMA_BENCH_IO_THREADS: ardmad's --io-threads for this run (default: ardmad's default).
    if (const char* io = std::getenv("ARDMA_BENCH_IO_THREADS")) options.io_threads = std::atoi(io);
    // ARDMA_BENCH_MEMORY_FILE: ardmad's --memory-file (the durable heap; the file is made anew).
    if (const char* file = std::getenv("ARDMA_BENCH_MEMORY_FILE")) {
      std::filesystem::remove(file);
      options.memory_file = file;
    }
    // ARDMA_BENCH_DMA_COST_NS: ardmad's --dma-cost-ns (a modelled cost per active-code access).
    if (const char* cost = std::getenv("ARDMA_BENCH_DMA_COST_NS")) {
      options.handler.access_cost = absl::Nanoseconds(std::atoll(cost));
    }
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(options);
    if (!s.ok()) {
      std::fprintf(stderr, "cannot start ardmad: %s\n", s.status().ToString().c_str());
      std::abort();
    }
    // The server lives until exit; stop it then, which also removes its socket file.
    static std::unique_ptr<Server> owner = std::move(*s);
    std::atexit([] { owner->Stop(); });
    return owner.get();
  }();
  return *server;
}

bool BenchOverUcx() {
  const char* over = std::getenv("ARDMA_BENCH_TRANSPORT");
  return over != nullptr && std::string(over) == "ucx";
}

std::unique_ptr<Client> NewClient(benchmark::State& state, Transport transport,
                                  const ClientOptions& options) {
  // ARDMA_BENCH_TRANSPORT=ucx runs a suite's TCP clients over UCX instead (same code, same names).
  if (transport == Transport::kTcp && BenchOverUcx()) transport = Transport::kUcx;
  std::string address;
  switch (transport) {
    case Transport::kTcp:
      address = SharedServer().address();
      break;
    case Transport::kUnix:
      address = "unix:" + SharedServer().unix_socket();
      break;
    case Transport::kUcx:
      address = "ucx://" + SharedServer().address();
      break;
  }
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(address, options);
  if (!c.ok()) {
    state.SkipWithError(c.status().ToString().c_str());
    return nullptr;
  }
  return std::move(*c);
}

// Sets round_trips/op and bytes/op from the client's counters since `rt0`/`bytes0`.
void ReportCounters(benchmark::State& state, Client& client, uint64_t rt0, uint64_t bytes0) {
  double n = static_cast<double>(state.iterations());
  uint64_t bytes = client.counters().bytes_sent + client.counters().bytes_received;
  // kAvgThreads: with ->Threads(n), show the per-connection figure, not the sum over threads.
  state.counters["round_trips/op"] =
      benchmark::Counter(static_cast<double>(client.counters().round_trips - rt0) / n,
                         benchmark::Counter::kAvgThreads);
  state.counters["bytes/op"] =
      benchmark::Counter(static_cast<double>(bytes - bytes0) / n, benchmark::Counter::kAvgThreads);
}

// --- The floor: a blocking TCP echo of exactly `size` bytes each way. ---

namespace {

class EchoServer {
 public:
  EchoServer() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listen_fd_, 128);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    std::thread([this] { AcceptLoop(); }).detach();
  }
  uint16_t port() const { return port_; }

 private:
  void AcceptLoop() {
    for (;;) {
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      std::thread([fd] {
        char buf[1 << 16];
        for (;;) {
          ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
          if (n <= 0) break;
          if (::send(fd, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
        }
        ::close(fd);
      }).detach();
    }
  }
  int listen_fd_;
  uint16_t port_;
};

}  // namespace

static EchoServer& SharedEcho() {
  static EchoServer* echo = new EchoServer();
  return *echo;
}

void RunRawTcpPingPong(benchmark::State& state, size_t size) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(SharedEcho().port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    state.SkipWithError("connect failed");
    return;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::string out(size, 'x'), in(size, '\0');
  for (auto _ : state) {
    if (::send(fd, out.data(), size, MSG_NOSIGNAL) != static_cast<ssize_t>(size) ||
        !RecvExactly(fd, in.data(), size).ok()) {
      state.SkipWithError("echo failed");
      break;
    }
  }
  ::close(fd);
  state.counters["round_trips/op"] = benchmark::Counter(1, benchmark::Counter::kAvgThreads);
  state.counters["bytes/op"] =
      benchmark::Counter(static_cast<double>(2 * size), benchmark::Counter::kAvgThreads);
}

constexpr uint64_t kClientId = 0x5eed;

class HandlerHarness::Sink : public ResponseSink {
 public:
  void Send(std::string frame) override {
    last = std::move(frame);
    answered.fetch_add(1, std::memory_order_release);
  }
  bool Open() const override { return true; }
  std::string last;
  std::atomic<uint64_t> answered{0};
};

HandlerHarness::HandlerHarness(uint64_t heap_bytes) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as ardmad does
  regions_.Add(*Region::Create({.size = heap_bytes}));
  Execution ex{.regions = &regions_};
  LocalContext ctx(&ex);
  if (absl::Status s = heap::FormatIfNeeded(ctx, heap_bytes, false).status(); !s.ok()) {
    std::fprintf(stderr, "cannot format the heap: %s\n", s.ToString().c_str());
    std::abort();
  }
  registry_.SetLoader(CodeKind::kNative, std::make_unique<NativeLoader>());
  handler_ = std::make_unique<RequestHandler>(HandlerOptions{}, &regions_, &registry_);
  sink_ = std::make_shared<Sink>();
  (void)handler_->Greeting(*sink_);
  sink_->answered.store(0);
}

HandlerHarness::~HandlerHarness() { handler_->Stop(); }

bool HandlerHarness::Load(benchmark::State& state, const ActiveLibrary& library) {
  if (registry_.Load(CodeKind::kNative, "", library.code()).ok()) return true;
  state.SkipWithError("cannot load the library");
  return false;
}

void HandlerHarness::Handle(wire::Op op, std::string_view payload, bool idempotent) {
  header_.op = op;
  header_.client_id = idempotent ? 0 : kClientId;
  ++header_.request_id;
  handler_->Handle(header_, payload, sink_);
  // A call run on a worker answers from there: wait for it, so `last` is this request's answer.
  while (sink_->answered.load(std::memory_order_acquire) < header_.request_id) {
    std::this_thread::yield();
  }
}

uint16_t HandlerHarness::last_status() const {
  if (sink_->last.size() < wire::kHeaderSize) return 0xffff;
  uint16_t status;
  std::memcpy(&status, sink_->last.data() + 8, 2);
  return status;
}

std::string_view HandlerHarness::last_payload() const {
  if (sink_->last.size() < wire::kHeaderSize) return {};
  return std::string_view(sink_->last).substr(wire::kHeaderSize);
}

}  // namespace ardma::bench
