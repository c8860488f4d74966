// `ardma dht get|put|insert|del|size TABLE [KEY [VALUE]]`: the DHT at a shell, as redis-cli's GET
// and SET, on one server or, with --server etcd://HOST:PORT/NAME, on a cluster (docs/cluster.md).
#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "core/cluster/router.h"
#include "core/status_macros.h"
#include "services/dht/dht_client.h"
#include "tools/ardma_cli.h"

namespace ardma::cli {

absl::StatusOr<std::unique_ptr<Servers>> ConnectServices(const Options& opt) {
  ClientOptions client_options;
  client_options.connect_attempts = 2;
  if (opt.timeout > absl::ZeroDuration()) client_options.timeout = opt.timeout;
  return cluster::ConnectServers(opt.server, client_options);
}

absl::Status RunDhtCommand(const Options& opt, const std::vector<std::string>& args) {
  const std::string cmd = args.size() > 1 ? args[1] : "";
  size_t want = cmd == "put" || cmd == "insert" ? 5 : cmd == "size" ? 3 : 4;
  if ((cmd != "get" && cmd != "put" && cmd != "insert" && cmd != "del" && cmd != "size") ||
      args.size() != want) {
    return Usage(
        "usage: ardma dht get TABLE KEY | put TABLE KEY VALUE | insert TABLE KEY VALUE | "
        "del TABLE KEY | size TABLE");
  }
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Servers> servers, ConnectServices(opt));
  dht::DhtClient dht(servers.get(), opt.mode);
  const std::string& table = args[2];
  if (cmd == "size") {
    ARDMA_ASSIGN_OR_RETURN(uint64_t n, dht.Size(table));
    std::printf("%llu\n", static_cast<unsigned long long>(n));
  } else if (cmd == "get") {
    ARDMA_ASSIGN_OR_RETURN(std::string value, dht.Get(table, args[3]));
    std::printf("%s\n", value.c_str());
  } else if (cmd == "put") {
    ARDMA_ASSIGN_OR_RETURN(bool fresh, dht.Put(table, args[3], args[4]));
    std::printf("%s\n", fresh ? "new" : "replaced");
  } else if (cmd == "insert") {
    ARDMA_ASSIGN_OR_RETURN(std::optional<std::string> there, dht.Insert(table, args[3], args[4]));
    if (there.has_value()) return absl::AlreadyExistsError(absl::StrCat("already: ", *there));
    std::printf("inserted\n");
  } else {
    ARDMA_ASSIGN_OR_RETURN(bool removed, dht.Remove(table, args[3]));
    std::printf("%d\n", removed ? 1 : 0);
  }
  return absl::OkStatus();
}

}  // namespace ardma::cli
