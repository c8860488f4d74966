// ardma-monitord: the plain-TCP load-monitoring daemon (the RDMA load-monitoring paper's Socket-Sync and Socket-Async
// baselines). Parses flags, starts a SocketDaemon, waits for SIGINT/SIGTERM.
#include <iostream>

#include "core/cli/daemon_support.h"
#include "core/cli/flag_set.h"
#include "services/monitor/monitor_agent.h"
#include "services/monitor/socket_daemon.h"

namespace {

constexpr char kUsage[] =
    "Usage: ardma-monitord [flags]\n"
    "\n"
    "A plain TCP load-monitoring daemon, the baseline the load monitor's RDMA schemes are\n"
    "compared with (the RDMA load-monitoring paper). Each request 'S' samples /proc and answers (Socket-Sync); with\n"
    "--interval, a calculating thread samples every interval and 'A' answers its latest sample\n"
    "(Socket-Async). Front end: ardma-monitor --scheme socket-sync|socket-async.";

int Main(int argc, char** argv) {
  ardma::monitor::DaemonOptions options;
  std::string port_file;
  ardma::FlagSet flags("ardma-monitord", kUsage);
  flags.String("listen", &options.listen, "HOST:PORT", "address to listen on; port 0 picks one");
  flags.Duration("interval", &options.interval,
                 "run the calculating thread, sampling every interval (at least 1ms), for "
                 "Socket-Async; 0 = Socket-Sync only");
  flags.String("procfs", &options.procfs, "PATH", "the procfs to sample");
  flags.String("port-file", &port_file, "PATH", "write the bound HOST:PORT here once listening");
  std::vector<std::string> positional;
  if (std::optional<int> exit_code = flags.ParseForMain(argc, argv, &positional)) {
    return *exit_code;
  }
  if (!positional.empty()) {
    std::cerr << "ardma-monitord: unexpected argument '" << positional[0] << "' (see --help)\n";
    return 2;
  }
  if (options.interval != absl::ZeroDuration() &&
      options.interval < ardma::monitor::kMinAgentInterval) {
    std::cerr << "ardma-monitord: --interval must be 0 or at least 1ms\n";
    return 2;
  }
  ardma::StopSignals stop_signals;

  absl::StatusOr<std::unique_ptr<ardma::monitor::SocketDaemon>> daemon =
      ardma::monitor::SocketDaemon::Start(options);
  if (!daemon.ok()) {
    std::cerr << "ardma-monitord: " << daemon.status().message() << "\n";
    return 1;
  }
  ardma::WritePortFile(port_file, (*daemon)->address());
  stop_signals.Wait();
  (*daemon)->Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
