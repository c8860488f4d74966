// ardma-ccd: a compile farm slave (ccd.h).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "apps/cc/ccd.h"
#include "core/cli/client_flags.h"
#include "core/client/client.h"
#include "core/cluster/admin.h"
#include "core/cluster/etcd_client.h"
#include "core/cluster/member.h"
#include "core/host_port.h"
#include "core/log.h"

namespace {

constexpr char kUsage[] =
    R"(Usage: ardma-ccd [OPTION]...
A compile farm slave: takes compile jobs from the farm's ardmad (first come, first served), reads
each preprocessed source from the submitter's registered region, compiles it here and writes the
object back into the submitter's region, then completes the job. A slave that exits or dies gives
its running jobs back to the queue. Stop it with SIGTERM or SIGINT.
With --server etcd://HOST:PORT/NAME it serves the farm of every member of that cluster (each
member's own submitters' jobs), following members as they join and leave, with --slots compiles at
once in all.)";

// What a slave of a cluster keeps for one member: its client and the Slave taking its jobs.
struct Served {
  std::string address;
  std::unique_ptr<ardma::Client> client;
  std::unique_ptr<ardma::cc::Slave> slave;
  std::shared_ptr<std::atomic<bool>> ended = std::make_shared<std::atomic<bool>>(false);
  std::thread thread;
};

// The address a slave reaches member `m` at: by `transport` ("ucx": one-sided transfers) if the
// member offers it, else tcp, else tls; empty if it has none of them.
std::string FarmAddress(const ardma::cluster::MemberInfo& m, const std::string& transport) {
  for (const std::string& t : {transport, std::string("tcp"), std::string("tls")}) {
    if (auto it = m.addresses.find(t); it != m.addresses.end()) return it->second;
  }
  return "";
}

// --server etcd://...: serves the farm of every member of the cluster (each member's ardmad has a
// queue of its own submitters' jobs), with --slots takers on each and --slots compiles at once in
// all; reads the members again every second: one that joins is served from then on, one that
// leaves is let go (its jobs in hand finish first). Runs until killed, as a slave of one server.
int ServeCluster(const std::string& address, const std::string& transport,
                 const ardma::ClientOptions& client_options, ardma::cc::SlaveOptions options) {
  absl::StatusOr<ardma::cluster::ClusterAddress> where =
      ardma::cluster::ParseClusterAddress(address);
  if (!where.ok()) {
    std::cerr << "ardma-ccd: " << where.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<ardma::cluster::EtcdClient>> etcd =
      ardma::cluster::EtcdClient::Connect(where->endpoints);
  if (!etcd.ok()) {
    std::cerr << "ardma-ccd: " << address << ": " << etcd.status().message() << "\n";
    return 1;
  }
  const int slots = options.slots > 0
                        ? options.slots
                        : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options.compile_slots = std::make_shared<ardma::cc::CompileSlots>(slots);
  std::map<std::string, Served> served;  // by member id
  std::vector<Served> leaving;           // let go; destroyed once their Run has ended
  for (bool first = true;; first = false) {
    absl::StatusOr<std::vector<ardma::cluster::MemberInfo>> members =
        ardma::cluster::ListMembers(**etcd, where->name);
    if (!members.ok() && first) {
      std::cerr << "ardma-ccd: " << address << ": " << members.status().message() << "\n";
      return 1;
    }
    if (!members.ok()) {
      ARDMA_LOG(kWarning, "reading the members of %s: %s (serving those known)", address,
                members.status().ToString());
    } else {
      std::map<std::string, std::string> now;
      for (const ardma::cluster::MemberInfo& m : *members) now[m.id] = FarmAddress(m, transport);
      for (auto it = served.begin(); it != served.end();) {
        auto is = now.find(it->first);
        if (is != now.end() && is->second == it->second.address) {
          ++it;
          continue;
        }
        ARDMA_LOG(kInfo, "member %s (%s) left: no longer taking its jobs", it->first,
                  it->second.address);
        it->second.slave->Stop();
        leaving.push_back(std::move(it->second));
        it = served.erase(it);
      }
      for (const auto& [id, member_address] : now) {
        if (served.contains(id) || member_address.empty()) continue;
        absl::StatusOr<std::unique_ptr<ardma::Client>> client =
            ardma::Client::Connect(member_address, client_options);
        if (!client.ok()) {
          ARDMA_LOG(kWarning, "member %s (%s): %s (trying again)", id, member_address,
                    client.status().ToString());
          continue;
        }
        Served& s = served[id];
        s.address = member_address;
        s.client = *std::move(client);
        s.slave = std::make_unique<ardma::cc::Slave>(s.client.get(), options);
        s.thread = std::thread([slave = s.slave.get(), ended = s.ended, id = id] {
          absl::Status status = slave->Run();
          if (!status.ok()) ARDMA_LOG(kWarning, "member %s: %s", id, status.ToString());
          ended->store(true);
        });
        ARDMA_LOG(kInfo, "serving the farm of member %s (%s) with %d slots", id, member_address,
                  slots);
      }
    }
    std::erase_if(leaving, [](Served& s) {
      if (!s.ended->load()) return false;
      s.thread.join();
      return true;
    });
    absl::SleepFor(absl::Seconds(1));
  }
}

}  // namespace

int main(int argc, char** argv) {
  ardma::ClientFlags farm;
  std::string allow = "gcc,g++,cc,c++,clang,clang++";
  ardma::cc::SlaveOptions options;  // options.name: HOST:PID unless --name says (after parsing, so
                                    // --help, and the man page made from it, stays reproducible)
  int64_t slots = 0;
  bool verbose = false, wait = false;
  std::string transport = "tcp";
  ardma::FlagSet flags("ardma-ccd", kUsage);
  farm.Declare(flags);  // the farm's ardmad and how to authenticate to it
  flags.Int("slots", &slots, "N", "compiles at once (default: this machine's CPUs)");
  flags.String("allow", &allow, "LIST", "compilers this slave runs, by name on its PATH");
  flags.String("name", &options.name, "NAME", "this slave in 'ardma cc status' (default HOST:PID)");
  flags.String("tmpdir", &options.tmpdir, "DIR", "where compiles run (default /dev/shm)");
  flags.String("transport", &transport, "NAME",
               "with --server etcd://...: reach the members over NAME when they offer it (ucx: "
               "one-sided transfers; default tcp)");
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
  if (ardma::cluster::IsClusterAddress(farm.server)) {
    return ServeCluster(farm.server, transport, *client_options, options);
  }
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
