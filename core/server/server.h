// Server: ardmad as a library. Owns the heap region, the code registry, the request handler and
// the Asio machinery: one io_context per I/O thread, a session coroutine per connection, and the
// acceptor. Tests start one on 127.0.0.1:0 and read back port().
//
//   ServerOptions options;
//   options.listen = "127.0.0.1:0";
//   ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Server> server, Server::Start(options));
//   ... connect to server->address() ...
//   server->Stop();
//
// Start returns once the server accepts connections. Stop is graceful and idempotent: it stops
// accepting, cancels running functions, answers queued jobs, closes connections and joins all
// threads. Any thread may call Stop and Wait; the destructor calls Stop.
#ifndef ARDMA_CORE_SERVER_SERVER_H_
#define ARDMA_CORE_SERVER_SERVER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "core/active/active_library.h"
#include "core/active/code_registry.h"
#include "core/active/jvm/jvm_loader.h"
#include "core/active/sandbox.h"
#include "core/context/context.h"
#include "core/memory/region.h"
#include "core/server/request_handler.h"
#include "core/server/ucx_server.h"

namespace ardma {

// One I/O thread per hardware thread, at least 1 and at most 8.
int DefaultIoThreads();

struct ServerOptions {
  std::string listen = "127.0.0.1:15712";  // HOST:PORT; port 0 picks a free port
  std::string unix_socket;  // also listen on this Unix-domain socket (clients: "unix:PATH")
  uint32_t unix_socket_mode = 0600;  // who may connect to it: by default the server's user only
  // Protected mode (docs/SECURITY.md): without authentication (handler.auth) the server listens
  // on loopback addresses only, unless this is set.
  bool insecure = false;
  // Format an existing memory file whose header is not a heap's (--format); without it the start
  // fails rather than erase what the file holds.
  bool format = false;
  // TLS on the TCP listener (PEM files; docs/SECURITY.md): with tls_cert and tls_key every TCP
  // client must speak TLS (clients use tls://HOST:PORT). With tls_ca too, every client must present
  // a certificate that CA signed (mutual TLS); its common name then authenticates the connection
  // as that auth-file name (or, without an auth file, with every permission).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  uint64_t memory_size = 1ull << 30;  // heap bytes; 0 with an existing memory file: its size
  std::string memory_file;            // empty: anonymous memory (lost at exit)
  // Which EXECUTEs run in worker processes over a shared mapping of the heap (isolation.h; one
  // process per handler worker thread): none; those of connections without the admin permission
  // (so only with an auth file); or all. Only in the ardmad program. With workers the heap is a
  // memfd (or the memory file), never UCX-allocated memory, so one-sided atomics go through the
  // server.
  enum class Isolation { kNone, kUntrusted, kAll };
  Isolation isolate = Isolation::kNone;
  // The user isolated workers and trial loads of new native code run as (sandbox.h; the server
  // must be root to switch); none: the server's own. Workers and trial loads are confined by the
  // sandbox whenever isolation is on.
  std::optional<sandbox::User> isolate_user;
  uint64_t isolate_cpu_seconds = 3600;  // RLIMIT_CPU of each isolated worker
  absl::Duration isolate_spin;          // IsolationOptions::spin
  int io_threads = DefaultIoThreads();  // one per hardware thread, 1 to 8
  std::string preload_dir;              // *.so files in it are loaded at start
  // The services this server comes with: the names they export are theirs (CodeRegistry::
  // ReserveNames); ardmad lists the project's services. Must outlive the server.
  std::vector<const ActiveLibrary*> built_in_services;
  CodeLimits code_limits;  // --max-libraries, --max-code
  // Standing in for a NIC's own processor (the RDMA load-monitoring paper): I/O thread i is pinned to
  // io_cpus[i % size] (empty: not pinned), and with `realtime` runs under SCHED_FIFO, so load on
  // the other CPUs does not delay one-sided operations. I/O threads are named "ardma-io-N".
  std::vector<int> io_cpus;
  bool realtime = false;
  // More regions, ids 1, 2, ... in this order (region 0 is the heap). Clients may access them
  // like the heap; a read_only one only with READ.
  std::vector<std::shared_ptr<Region>> extra_regions;
  // Java active code: the JVM starts on the first jvm LOAD, with these options.
  JvmOptions jvm;
  HandlerOptions handler;
  // The UCX transport (ucx_server.h; clients use ucx://HOST:PORT). kAuto starts it when it can
  // and serves TCP alone (with a warning) when it cannot; kOn fails the start instead. Without a
  // memory file the heap then lives in memory UCX allocates (shared memory: one-sided atomics);
  // with one, the file's mapping is registered (one-sided reads and writes where a transport can
  // register it; atomics through the server).
  enum class Ucx { kOff, kAuto, kOn };
  Ucx ucx = Ucx::kAuto;
};

class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const;
  std::string address() const;             // "host:port" actually bound
  const std::string& unix_socket() const;  // empty if none; removed again by Stop
  void Stop();
  void Wait();  // until Stop has completed

  RegionTable& regions();
  CodeRegistry& registry();
  RequestHandler& handler();
  // Null when the server runs without UCX.
  UcxServer* ucx();
  // An id kept in the heap (a named root, random when first asked for), so the same after a
  // restart with the same memory file: the cluster knows the server by it.
  absl::StatusOr<uint64_t> StableId();
  // Runs `fn` with a Context on the server's own memory (as active code has), for what the server
  // keeps in its heap itself (the cluster's slot fence).
  absl::Status RunLocally(absl::FunctionRef<absl::Status(Context&)> fn);

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_SERVER_H_
