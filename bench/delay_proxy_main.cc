// ardma-delay-proxy: forwards TCP connections to an ardmad (or anything), holding every byte for
// a fixed one-way delay in each direction, to emulate a network's round-trip time on one machine.
#include <csignal>
#include <iostream>

#include "absl/synchronization/notification.h"
#include "bench/delay_proxy.h"
#include "core/cli/daemon_support.h"
#include "core/cli/flag_set.h"
#include "core/host_port.h"

int main(int argc, char** argv) {
  std::string target = ardma::DefaultServerAddress();
  absl::Duration delay = absl::Microseconds(100);
  ardma::FlagSet flags("ardma-delay-proxy",
                       "Usage: ardma-delay-proxy [--target HOST:PORT] [--delay DURATION]\n\n"
                       "Listens on 127.0.0.1 (a free port, printed on stdout) and forwards every "
                       "connection to --target,\nholding the bytes for --delay in each direction "
                       "(so round trips take 2 x delay more).\nStops on SIGINT or SIGTERM.");
  flags.String("target", &target, "HOST:PORT",
               "where to forward ($ARDMA_SERVER, else 127.0.0.1:15712)");
  flags.Duration("delay", &delay, "one-way delay added in each direction");
  std::vector<std::string> args;
  if (std::optional<int> code = flags.ParseForMain(argc, argv, &args)) return *code;
  if (!args.empty()) {
    std::cerr << "ardma-delay-proxy: unexpected argument '" << args[0] << "'\n";
    return 2;
  }
  ardma::StopSignals stop_signals;
  absl::StatusOr<std::unique_ptr<ardma::bench::DelayProxy>> proxy =
      ardma::bench::DelayProxy::Start(target, delay);
  if (!proxy.ok()) {
    std::cerr << "ardma-delay-proxy: " << proxy.status() << "\n";
    return 1;
  }
  std::cout << (*proxy)->address() << std::endl;
  stop_signals.Wait();
  (*proxy)->Stop();
  return 0;
}
