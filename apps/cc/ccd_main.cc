// ardma-ccd: a compile farm slave (ccd.h).
#include <unistd.h>

#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "apps/cc/ccd.h"
#include "core/cli/client_flags.h"
#include "core/client/client.h"
#include "core/host_port.h"
#include "core/log.h"

namespace {

constexpr char kUsage[] =
    R"(Usage: ardma-ccd [OPTION]...
A compile farm slave: takes compile jobs from the farm's ardmad (first come, first served), reads
each preprocessed source from the submitter's registered region, compiles it here and writes the
object back into the submitter's region, then completes the job. A slave that exits or dies gives
its running jobs back to the queue. Stop it with SIGTERM or SIGINT.)";

}  // namespace

int main(int argc, char** argv) {
  ardma::ClientFlags farm;
  std::string allow = "gcc,g++,cc,c++";
  ardma::cc::SlaveOptions options;  // options.name: HOST:PID unless --name says (after parsing, so
                                    // --help, and the man page made from it, stays reproducible)
  int64_t slots = 0;
  bool verbose = false, wait = false;
  ardma::FlagSet flags("ardma-ccd", kUsage);
  farm.Declare(flags);  // the farm's ardmad and how to authenticate to it
  flags.Int("slots", &slots, "N", "compiles at once (default: this machine's CPUs)");
  flags.String("allow", &allow, "LIST",
               "compilers this slave runs, by name on its PATH");
  flags.String("name", &options.name, "NAME", "this slave in 'ardma cc status' (default HOST:PID)");
  flags.String("tmpdir", &options.tmpdir, "DIR", "where compiles run (default /dev/shm)");
  flags.Bool("wait", &wait,
             "if the farm's ardmad cannot be reached, say so and keep trying until it can "
             "(default: exit 1 at once)");
  flags.Bool("verbose", &verbose, "log every job");
  flags.Short('v', "verbose");
  std::vector<std::string> rest;
  if (std::optional<int> code = flags.ParseForMain(argc, argv, &rest)) return *code;
  if (!rest.empty()) {
    std::cerr << "ardma-ccd: unexpected argument '" << rest[0]
              << "'\nTry 'ardma-ccd --help' for more information.\n";
    return 2;
  }
  if (options.name.empty()) {
    char host[256] = "slave";
    ::gethostname(host, sizeof(host) - 1);
    options.name = absl::StrCat(host, ":", ::getpid());
  }
  // Abseil's lock-order graph costs a lookup on every Mutex::Lock (as in ardmad).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::StatusOr<std::set<std::string>> allowed = ardma::cc::ParseAllowList(allow);
  if (!allowed.ok()) {
    std::cerr << "ardma-ccd: " << allowed.status().message() << "\n";
    return 2;
  }
  if (slots < 0 || slots > 1024 || options.name.empty() || options.name.size() > 39) {
    std::cerr << "ardma-ccd: --slots must be 0 to 1024 and --name 1 to 39 bytes\n";
    return 2;
  }
  options.allow = *allowed;
  options.slots = static_cast<int>(slots);
  options.verbose = verbose;
  absl::StatusOr<ardma::ClientOptions> client_options = farm.ConnectOptions();
  if (!client_options.ok()) {
    std::cerr << "ardma-ccd: " << client_options.status().message() << "\n";
    return 2;
  }
  client_options->connect_attempts = 2;  // as the other tools: a missing server fails fast
  absl::StatusOr<std::unique_ptr<ardma::Client>> client =
      ardma::Client::Connect(farm.server, *client_options);
  if (!client.ok() && wait && absl::IsUnavailable(client.status())) {
    std::cerr << "ardma-ccd: " << farm.server << ": " << client.status().message()
              << "; waiting for it (--wait)\n";
    client_options->connect_attempts = 1000000;  // with backoff: days
    client = ardma::Client::Connect(farm.server, *client_options);
  }
  if (!client.ok()) {
    std::cerr << "ardma-ccd: " << farm.server << ": " << client.status().message() << "\n";
    return 1;
  }
  ardma::cc::Slave slave(client->get(), options);
  ARDMA_LOG(
      kInfo, "ardma-ccd %s serving %s with %d slots (compilers: %s)", options.name, farm.server,
      options.slots > 0 ? options.slots : static_cast<int>(std::thread::hardware_concurrency()),
      absl::StrJoin(options.allow, ","));
  absl::Status ended = slave.Run();
  if (!ended.ok()) {
    std::cerr << "ardma-ccd: " << ended.message() << "\n";
    return 1;
  }
  return 0;
}
