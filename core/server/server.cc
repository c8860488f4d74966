#include "core/server/server.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <cstring>
#include <deque>
#include <filesystem>
#include <list>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/active/local_context.h"
#include "core/active/native_loader.h"
#include "core/host_port.h"
#include "core/log.h"
#include "core/memory/heap.h"
#include "core/net/listen_socket.h"
#include "core/server/session.h"
#include "core/server/thread_placement.h"
#include "core/server/tls_context.h"
#include "core/status_macros.h"

namespace ardma {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using local = asio::local::stream_protocol;
using server_detail::Session;
using server_detail::SessionBase;

constexpr std::chrono::seconds kTlsHandshakeTimeout{10};

// Whether a bound numeric address is a loopback one (127.0.0.0/8, ::1, ::ffff:127.x.y.z).
bool IsLoopback(std::string_view host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.rfind("::ffff:", 0) == 0) host.remove_prefix(7);
  return host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace

// Members are destroyed in reverse order: the handler (whose parked requests and de-dup waiters
// may own sessions, and so sockets) goes first, while the io_contexts still exist; the regions and
// the registry last, after everything that runs code against them.
int DefaultIoThreads() {
  unsigned n = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(n, 1u, 8u));
}

struct Server::Impl {
  ServerOptions options;
  RegionTable regions;
  CodeRegistry registry;
  std::unique_ptr<OwnerTable>
      owners;  // (outlives the handler, which ends owners as sessions close)

  std::vector<std::unique_ptr<asio::io_context>> ios;
  // The acceptors and the expiry timer run on a thread of their own, so a function that never
  // ends on an I/O thread stops neither new connections nor the parked requests' deadlines.
  std::unique_ptr<asio::io_context> control;
  // (before the guards, the acceptors and the timer, which must go first)
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
  std::vector<std::thread> threads;
  // Per I/O thread: since when it has been running one function (RequestHandler::SetIoBusyStamp).
  std::unique_ptr<std::atomic<int64_t>[]> busy;
  std::thread control_thread;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::unique_ptr<local::acceptor> unix_acceptor;  // with --unix-socket
  std::unique_ptr<asio::ssl::context> tls;         // with --tls-cert: the TCP listener's TLS
  std::unique_ptr<asio::steady_timer> expiry;
  absl::Time expiry_armed = absl::InfiniteFuture();  // when it fires (control thread only)
  std::unique_ptr<RequestHandler> handler;
  std::unique_ptr<UcxServer> ucx;  // after the handler: stopped and destroyed before it
  size_t next_io = 0;
  HostPort bound;

  absl::Mutex mu;
  std::list<std::weak_ptr<SessionBase>> sessions ABSL_GUARDED_BY(mu);
  bool stopped ABSL_GUARDED_BY(mu) = false;
  absl::Notification done;

  // A failed accept (most often out of file descriptors: the connection stays queued) is retried
  // after a pause that grows to 1 s while the failures go on, and logged once per 10 s with the
  // number of failures: never a spin, never a flood of log lines.
  uint64_t accept_failures = 0;  // (touched on the acceptors' executor only)
  uint64_t accept_failures_logged = 0;
  int64_t accept_logged_ns = 0;
  absl::Duration accept_pause = absl::Milliseconds(10);
  template <typename Acceptor>
  void AcceptFailed(Acceptor* acceptor, const boost::system::error_code& ec) {
    ++accept_failures;
    int64_t now = absl::GetCurrentTimeNanos();
    if (now - accept_logged_ns >= 10'000'000'000) {
      ARDMA_LOG(kWarning, "accept: %s (%u failures in the last 10 s; retrying every %s)",
                ec.message(), accept_failures - accept_failures_logged,
                absl::FormatDuration(accept_pause));
      accept_logged_ns = now;
      accept_failures_logged = accept_failures;
    }
    // On the acceptor's own executor, where every accept completes: no other thread touches this.
    auto timer = std::make_shared<asio::steady_timer>(acceptor->get_executor(),
                                                      absl::ToChronoNanoseconds(accept_pause));
    accept_pause = std::min(accept_pause * 2, absl::Seconds(1));
    timer->async_wait([this, acceptor, timer](boost::system::error_code wait_ec) {
      if (wait_ec || !acceptor->is_open()) return;
      Accept(acceptor);
    });
  }

  // The I/O thread for a new connection: the next in turn that is not stuck in a long function.
  asio::io_context& PickIo() {
    for (size_t k = 0; k < ios.size(); ++k) {
      size_t i = (next_io + k) % ios.size();
      if (!handler->IoThreadStuck(busy[i])) {
        next_io = (i + 1) % ios.size();
        return *ios[i];
      }
    }
    asio::io_context& io = *ios[next_io];  // all stuck: still in turn
    next_io = (next_io + 1) % ios.size();
    return io;
  }

  // Accepts connections forever (on the control thread), handing each to an I/O thread.
  template <typename Acceptor>
  void Accept(Acceptor* acceptor) {
    using Socket = typename Acceptor::protocol_type::socket;
    acceptor->async_accept([this, acceptor](boost::system::error_code ec, Socket accepted) {
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
        AcceptFailed(acceptor, ec);
        return;
      }
      asio::io_context& io = PickIo();
      Socket socket(io);
      boost::system::error_code moved;
      auto protocol = accepted.local_endpoint(moved).protocol();
      if (!moved) socket.assign(protocol, accepted.release(moved), moved);
      if (moved) {
        ARDMA_LOG(kWarning, "accept: cannot hand the connection over: %s", moved.message());
        Accept(acceptor);
        return;
      }
      accept_pause = absl::Milliseconds(10);  // accepting again: the next failure starts over
      if constexpr (std::is_same_v<Socket, tcp::socket>) {
        boost::system::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
      }
      handler->counters().Add(Stat::kConnectionsAccepted, 1);
      if constexpr (std::is_same_v<Socket, tcp::socket>) {
        if (tls != nullptr) {
          HandshakeThenServe(std::move(socket), io);
          Accept(acceptor);
          return;
        }
      }
      auto session = std::make_shared<Session<Socket>>(std::move(socket), io, *handler);
      if constexpr (std::is_same_v<Socket, local::socket>) {
        // The client process: its memfds may be registered (REGISTER).
        ucred cred{};
        socklen_t len = sizeof(cred);
        if (::getsockopt(session->socket().native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) ==
            0) {
          session->auth().peer_pid = cred.pid;
        }
      }
      Serve(session);
      Accept(acceptor);
    });
  }

  template <typename Socket>
  void Serve(const std::shared_ptr<Session<Socket>>& session) {
    {
      absl::MutexLock lock(&mu);
      sessions.remove_if([](const std::weak_ptr<SessionBase>& w) { return w.expired(); });
      sessions.push_back(session);
    }
    session->Start();
  }

  // The TLS handshake (at most kTlsHandshakeTimeout), then a session over the TLS stream. With
  // mutual TLS, the client certificate's common name authenticates the connection.
  void HandshakeThenServe(tcp::socket socket, asio::io_context& io) {
    using TlsSocket = asio::ssl::stream<tcp::socket>;
    auto stream = std::make_shared<TlsSocket>(std::move(socket), *tls);
    auto timer = std::make_shared<asio::steady_timer>(io, kTlsHandshakeTimeout);
    timer->async_wait([stream](boost::system::error_code ec) {
      if (ec) return;  // the handshake finished first
      boost::system::error_code ignored;
      stream->lowest_layer().close(ignored);
    });
    stream->async_handshake(
        asio::ssl::stream_base::server, [this, stream, timer, &io](boost::system::error_code ec) {
          timer->cancel();
          if (ec) {
            handler->counters().Add(Stat::kAuthRefused, 1);
            ARDMA_LOG(kWarning, "TLS handshake failed: %s", ec.message());
            return;
          }
          auto session = std::make_shared<Session<TlsSocket>>(std::move(*stream), io, *handler);
          if (!options.tls_ca.empty()) {
            std::string name = PeerCommonName(session->socket().native_handle());
            handler->AuthenticateCertificate(*session, name);
          }
          Serve(session);
        });
  }

  // Start's steps, in order.
  absl::Status StartUcx() {
    if (options.ucx != ServerOptions::Ucx::kOff) {
      absl::StatusOr<std::unique_ptr<UcxServer>> created = UcxServer::Create(options.io_threads);
      if (created.ok()) {
        ucx = *std::move(created);
      } else if (options.ucx == ServerOptions::Ucx::kOn) {
        return created.status();
      } else {
        ARDMA_LOG(kWarning, "UCX is off: %s", std::string(created.status().message()));
      }
    }
    return absl::OkStatus();
  }

  // The heap (region 0): in a memfd for isolated workers, in UCX memory for one-sided atomics,
  // or a file (--memory-file) or anonymous memory.
  struct HeapSetup {
    bool isolate = false;  // isolated workers map the heap through `fd`
    int fd = -1;
    uint64_t size = 0;
    bool reopened = false;  // a memory file with a heap in it already
  };
  // Whether isolated workers run any connection's code (isolation.h).
  bool Isolating() const {
    return options.isolate == ServerOptions::Isolation::kAll ||
           (options.isolate == ServerOptions::Isolation::kUntrusted &&
            options.handler.auth != nullptr);
  }

  absl::StatusOr<HeapSetup> MakeHeap() {
    HeapSetup setup;
    std::unique_ptr<Region> heap;
    const bool isolate = Isolating();
    int heap_fd = -1;  // for isolated workers
    if (isolate && options.memory_file.empty()) {
      heap_fd = ::memfd_create("ardma-heap", MFD_CLOEXEC);
      if (heap_fd < 0 || ::ftruncate(heap_fd, static_cast<off_t>(options.memory_size)) != 0) {
        return absl::ResourceExhaustedError(
            absl::StrCat("a heap of ", options.memory_size, " bytes: ", std::strerror(errno)));
      }
      // Only ardmad's user may reopen it (/proc/self/fd/N): not isolated workers that run as
      // another, to write a heap they were given read-only.
      ::fchmod(heap_fd, 0600);
      ARDMA_ASSIGN_OR_RETURN(heap, Region::MapFile(heap_fd, options.memory_size, false));
    }
    if (heap == nullptr && ucx != nullptr && options.memory_file.empty()) {
      // Memory the transports can map, so clients' one-sided atomics need no server thread.
      absl::StatusOr<std::unique_ptr<Region>> shared = ucx->AllocateRegion(options.memory_size);
      if (shared.ok()) {
        heap = *std::move(shared);
      } else {
        ARDMA_LOG(kWarning, "heap not in UCX memory (%s): one-sided atomics go through the server",
                  std::string(shared.status().message()));
      }
    }
    if (heap == nullptr) {
      ARDMA_ASSIGN_OR_RETURN(
          heap, Region::Create({.size = options.memory_size, .file = options.memory_file}));
    }
    if (isolate && heap_fd < 0) {
      heap_fd = ::open(options.memory_file.c_str(), O_RDWR | O_CLOEXEC);
      if (heap_fd < 0) {
        return absl::InternalError(
            absl::StrCat("reopening ", options.memory_file, ": ", std::strerror(errno)));
      }
    }
    setup.reopened = heap->reopened() && !options.memory_file.empty();  // (a memfd is new)
    setup.size = heap->size();
    setup.fd = heap_fd;
    setup.isolate = isolate;
    regions.Add(std::move(heap));
    for (const std::shared_ptr<Region>& region : options.extra_regions) regions.Add(region);
    return setup;
  }

  // Formats the heap unless it is a reopened one to keep; opens the lock owners' table in it.
  absl::Status OpenHeap(const HeapSetup& setup) {
    {
      Execution ex;
      ex.regions = &regions;
      LocalContext ctx(&ex);
      absl::StatusOr<bool> formatted = heap::FormatIfNeeded(
          ctx, setup.size, /*keep_existing=*/setup.reopened && !options.format);
      if (!formatted.ok()) {
        return absl::Status(
            formatted.status().code(),
            absl::StrCat("memory file ", options.memory_file, ": ", formatted.status().message()));
      }
      if (setup.reopened && *formatted) {
        ARDMA_LOG(kWarning, "formatted memory file %s (%u bytes): what it held is gone",
                  options.memory_file, setup.size);
      }
      if (setup.reopened && !*formatted) {
        ARDMA_LOG(kInfo, "reopened memory file %s (%u bytes), data kept", options.memory_file,
                  setup.size);
      }
      ARDMA_ASSIGN_OR_RETURN(owners, OwnerTable::Open(ctx, **regions.Get(kHeapRegion),
                                                      OwnerTable::SlotsFor(setup.size)));
    }

    return absl::OkStatus();
  }

  absl::Status SetUpCode() {
    registry.SetLimits(options.code_limits);
    std::optional<sandbox::Policy> trial_sandbox;  // new code that may run isolated: confined
    if (Isolating()) {
      trial_sandbox = sandbox::Policy{.user = options.isolate_user,
                                      .address_space = uint64_t{4} << 30,
                                      .cpu_seconds = 20};
    }
    // An isolating server keeps shipped native code out of its own process: it maps a library
    // only to run one of its functions here (an admin's call), and with --isolate all never
    // once serving (what it preloads from its own disk is the operator's, and runs here).
    auto native = std::make_unique<NativeLoader>(
        /*trial=*/true, trial_sandbox,
        Isolating() ? NativeLoader::InProcess::kOnFirstRun : NativeLoader::InProcess::kAtLoad);
    NativeLoader* loader = native.get();
    registry.SetLoader(wire::CodeKind::kNative, std::move(native));
    if (std::unique_ptr<CodeLoader> jvm = NewJvmLoader(options.jvm)) {
      registry.SetLoader(wire::CodeKind::kJvm, std::move(jvm));
    }
    for (const ActiveLibrary* service : options.built_in_services) {
      registry.ReserveNames(service->table(), service->hash());
    }
    if (!options.preload_dir.empty()) {
      ARDMA_RETURN_IF_ERROR(registry.LoadDirectory(options.preload_dir));
    }
    if (options.isolate == ServerOptions::Isolation::kAll) {
      loader->SetInProcess(NativeLoader::InProcess::kNever);
    }
    return absl::OkStatus();
  }

  // The request handler, its isolated workers and the UCX side.
  absl::Status StartHandler(const HeapSetup& heap) {
    options.handler.built_in_services = options.built_in_services;
    handler = std::make_unique<RequestHandler>(options.handler, &regions, &registry);
    handler->SetOwners(owners.get());
    if (heap.isolate) {
      registry.KeepLoadedCode();
      absl::StatusOr<std::unique_ptr<IsolatedPool>> pool =
          IsolatedPool::Start({.workers = std::max(1, options.handler.workers),
                               .heap_fd = heap.fd,
                               .heap_size = heap.size,
                               .jvm = options.jvm,
                               .user = options.isolate_user,
                               .cpu_seconds = options.isolate_cpu_seconds,
                               .spin = options.isolate_spin},
                              &registry, owners.get());
      ::close(heap.fd);  // the pool has its own
      if (!pool.ok()) return pool.status();
      handler->SetIsolation(*std::move(pool),
                            /*all=*/options.isolate == ServerOptions::Isolation::kAll);
    }
    if (ucx != nullptr) {
      absl::Status started = ucx->Start(regions, handler.get());
      if (!started.ok()) {
        if (options.ucx == ServerOptions::Ucx::kOn) return started;
        ARDMA_LOG(kWarning, "UCX is off: %s", std::string(started.message()));
        ucx.reset();
      } else {
        handler->SetUcxConnect(
            [ucx = ucx.get()](std::string_view payload, const std::shared_ptr<ResponseSink>& sink) {
              return ucx->Connect(payload, sink);
            });
        handler->SetRegionKeys(ucx.get());
        // A closing connection's UCX session closes at once (no thread looks on a period).
        handler->SetConnectionClosedListener(
            [ucx = ucx.get()](const ResponseSink* sink) { ucx->ConnectionClosed(sink); });
      }
    }

    return absl::OkStatus();
  }

  // Binds the listeners (through core/net) and hands them to Asio.
  absl::Status Listen() {
    for (int i = 0; i < options.io_threads; ++i) {
      ios.push_back(std::make_unique<asio::io_context>(1));
      guards.push_back(asio::make_work_guard(*ios.back()));
    }
    // The sockets are bound by core/net (one place for every listener) and handed to Asio.
    ARDMA_ASSIGN_OR_RETURN(tls, MakeTlsContext(options));
    ARDMA_ASSIGN_OR_RETURN(ListeningSocket tcp_socket, ListenSocket(options.listen));
    ARDMA_ASSIGN_OR_RETURN(bound, ParseHostPort(tcp_socket.address));
    bool mutual_tls = !options.tls_ca.empty();
    if (options.handler.auth == nullptr && !mutual_tls && !options.insecure &&
        !IsLoopback(bound.host)) {
      ::close(tcp_socket.fd);
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing to listen on ", tcp_socket.address,
          " without authentication: anyone who can reach it could run code as this server's user; "
          "give --auth-file FILE (or --tls-ca for mutual TLS), listen on 127.0.0.1, or pass "
          "--insecure (docs/SECURITY.md)"));
    }
    busy = std::make_unique<std::atomic<int64_t>[]>(ios.size());
    control = std::make_unique<asio::io_context>(1);
    guards.push_back(asio::make_work_guard(*control));
    {
      asio::io_context& io0 = *control;
      boost::system::error_code ec;
      acceptor = std::make_unique<tcp::acceptor>(io0);
      tcp protocol = bound.host.find(':') != std::string::npos ? tcp::v6() : tcp::v4();
      acceptor->assign(protocol, tcp_socket.fd, ec);
      if (!ec && !options.unix_socket.empty()) {
        absl::StatusOr<ListeningSocket> unix_socket =
            ListenUnixSocket(options.unix_socket, options.unix_socket_mode);
        if (!unix_socket.ok()) return unix_socket.status();
        unix_acceptor = std::make_unique<local::acceptor>(io0);
        unix_acceptor->assign(local(), unix_socket->fd, ec);
      }
      if (ec) return absl::UnavailableError(absl::StrCat("listen: ", ec.message()));
    }
    return absl::OkStatus();
  }

  // The accept loops, the expiry timer and the threads that run them.
  void Run() {
    expiry = std::make_unique<asio::steady_timer>(*control);
    Accept(acceptor.get());
    if (unix_acceptor != nullptr) Accept(unix_acceptor.get());
    handler->SetParkedListener([this](absl::Time when) {
      asio::post(*control, [this, when] { ArmExpiry(when); });
    });
    // Each I/O thread names and places itself before it runs; Start returns once all have.
    absl::BlockingCounter placed(static_cast<int>(ios.size()));
    for (size_t i = 0; i < ios.size(); ++i) {
      int cpu = options.io_cpus.empty() ? -1 : options.io_cpus[i % options.io_cpus.size()];
      threads.emplace_back(
          [io = ios[i].get(), busy = &busy[i], i, cpu, realtime = options.realtime, &placed] {
            RequestHandler::SetIoBusyStamp(busy);
            // Checked by CheckPlacement before any thread started, so these succeed.
            ::pthread_setname_np(::pthread_self(), absl::StrCat("ardma-io-", i).c_str());
            if (cpu >= 0) PinToCpu(cpu).IgnoreError();
            if (realtime) MakeRealtime().IgnoreError();
            placed.DecrementCount();
            io->run();
          });
    }
    placed.Wait();
    control_thread = std::thread([control = control.get()] {
      ::pthread_setname_np(::pthread_self(), "ardma-accept");
      control->run();
    });
  }

  void LogListening(uint64_t heap_size) {
    ARDMA_LOG(
        kInfo, "ardmad listening on %s%s%s, heap %u bytes%s, %d I/O threads, %d workers, %s%s",
        tls != nullptr ? "tls://" : "", bound.ToString(),
        options.unix_socket.empty() ? "" : absl::StrCat(" and unix:", options.unix_socket),
        heap_size, options.memory_file.empty() ? "" : absl::StrCat(" in ", options.memory_file),
        options.io_threads, options.handler.workers, ucx != nullptr ? "UCX on (ucx://)" : "UCX off",
        options.handler.auth != nullptr ? ", authentication required"
        : !options.tls_ca.empty()       ? ", client certificates required"
                                        : "");
  }

  // The parking lot's timer, armed for its next event only (on the control thread): an idle server
  // has no timer running.
  void ArmExpiry(absl::Time when) {
    if (when >= expiry_armed) return;  // already due by then
    expiry_armed = when;
    absl::Duration wait = std::max(when - absl::Now(), absl::ZeroDuration());
    expiry->expires_after(absl::ToChronoNanoseconds(wait));  // (cancels a later wait)
    expiry->async_wait([this](boost::system::error_code ec) {
      if (ec) return;  // re-armed sooner, or stopping
      expiry_armed = absl::InfiniteFuture();
      handler->ExpireParked();
      if (absl::Time next = handler->NextParkedEvent(); next != absl::InfiniteFuture()) {
        ArmExpiry(next);
      }
    });
  }
};

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (options.io_threads < 1) return absl::InvalidArgumentError("--io_threads must be at least 1");
  ARDMA_RETURN_IF_ERROR(ParseHostPort(options.listen).status());  // before the heap is made
  ARDMA_RETURN_IF_ERROR(impl->StartUcx());
  ARDMA_ASSIGN_OR_RETURN(Impl::HeapSetup heap, impl->MakeHeap());
  ARDMA_RETURN_IF_ERROR(impl->OpenHeap(heap));
  ARDMA_RETURN_IF_ERROR(CheckPlacement(options.io_cpus, options.realtime));
  ARDMA_RETURN_IF_ERROR(impl->SetUpCode());
  ARDMA_RETURN_IF_ERROR(impl->StartHandler(heap));
  ARDMA_RETURN_IF_ERROR(impl->Listen());
  impl->Run();
  impl->LogListening(heap.size);
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

uint16_t Server::port() const { return impl_->bound.port; }
std::string Server::address() const { return impl_->bound.ToString(); }
const std::string& Server::unix_socket() const { return impl_->options.unix_socket; }
RegionTable& Server::regions() { return impl_->regions; }
CodeRegistry& Server::registry() { return impl_->registry; }
RequestHandler& Server::handler() { return *impl_->handler; }
UcxServer* Server::ucx() { return impl_->ucx.get(); }

absl::Status Server::RunLocally(absl::FunctionRef<absl::Status(Context&)> fn) {
  Execution ex;
  ex.regions = &impl_->regions;
  LocalContext ctx(&ex);
  return fn(ctx);
}

absl::StatusOr<uint64_t> Server::StableId() {
  std::random_device random;
  uint64_t fresh = (uint64_t{random()} << 32 | random()) | 1;  // never 0
  uint64_t id = 0;
  ARDMA_RETURN_IF_ERROR(RunLocally([&](Context& ctx) -> absl::Status {
    ARDMA_ASSIGN_OR_RETURN(id, heap::GetOrCreateRoot(ctx, "ardma.server-id", fresh));
    return absl::OkStatus();
  }));
  return id;
}

void Server::Stop() {
  std::list<std::weak_ptr<SessionBase>> sessions;
  {
    absl::MutexLock lock(&impl_->mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
    sessions = impl_->sessions;
  }
  asio::post(*impl_->control, [impl = impl_.get()] {
    boost::system::error_code ignored;
    impl->acceptor->close(ignored);
    if (impl->unix_acceptor != nullptr) impl->unix_acceptor->close(ignored);
    impl->expiry->cancel();
  });
  if (impl_->ucx != nullptr) impl_->ucx->Stop();  // unmaps registered regions' keys too
  impl_->handler->SetRegionKeys(nullptr);
  impl_->handler->Stop();
  for (auto& weak : sessions) {
    if (auto session = weak.lock()) session->Shutdown();
  }
  impl_->guards.clear();
  // Let the close handlers run, then stop whatever is left (sessions blocked in reads).
  for (auto& io : impl_->ios) {
    asio::post(*io, [io = io.get()] { io->stop(); });
  }
  asio::post(*impl_->control, [control = impl_->control.get()] { control->stop(); });
  for (auto& t : impl_->threads) t.join();
  impl_->control_thread.join();
  if (!impl_->options.unix_socket.empty()) {
    std::error_code ignored;
    std::filesystem::remove(impl_->options.unix_socket, ignored);
  }
  impl_->done.Notify();
  ARDMA_LOG(kInfo, "ardmad stopped");
}

void Server::Wait() { impl_->done.WaitForNotification(); }

}  // namespace ardma
