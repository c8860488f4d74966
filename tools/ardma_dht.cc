// `ardma dht get|put|insert|del|size|scan|export|import TABLE [KEY [VALUE] | FILE]`: the DHT at
// a shell, as redis-cli's GET, SET and --scan, on one server or, with --server
// etcd://HOST:PORT/NAME, on a cluster (docs/cluster.md).
//
// An export file: "ARDMADX1", then per key klen:u32 vlen:u32 key value (little-endian).
#include <cstdio>
#include <cstring>
#include <fstream>
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

namespace {

constexpr char kExportMagic[] = "ARDMADX1";

// Every key of `table`, a page at a time (DhtClient::Scan): `each(key, value)` for each.
template <typename Each>
absl::Status ScanAll(dht::DhtClient& dht, const std::string& table, Each each) {
  uint64_t cursor = 0;
  do {
    ARDMA_ASSIGN_OR_RETURN(dht::DhtClient::Page page, dht.Scan(table, cursor, 1000));
    for (const auto& [key, value] : page.items) ARDMA_RETURN_IF_ERROR(each(key, value));
    cursor = page.next;
  } while (cursor != 0);
  return absl::OkStatus();
}

absl::Status Export(dht::DhtClient& dht, const std::string& table, const std::string& path) {
  std::ofstream file;
  if (path != "-") file.open(path, std::ios::binary | std::ios::trunc);
  std::ostream& out = path == "-" ? std::cout : file;
  if (!out) return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  out.write(kExportMagic, 8);
  uint64_t keys = 0;
  ARDMA_RETURN_IF_ERROR(ScanAll(dht, table, [&](const std::string& k, const std::string& v) {
    uint32_t lengths[2] = {static_cast<uint32_t>(k.size()), static_cast<uint32_t>(v.size())};
    out.write(reinterpret_cast<const char*>(lengths), sizeof lengths);
    out << k << v;
    ++keys;
    return absl::OkStatus();
  }));
  out.flush();
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  std::cerr << "exported " << keys << " keys\n";
  return absl::OkStatus();
}

absl::Status Import(dht::DhtClient& dht, const std::string& table, const std::string& path) {
  std::ifstream file;
  if (path != "-") file.open(path, std::ios::binary);
  std::istream& in = path == "-" ? std::cin : file;
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, kExportMagic, 8) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an `ardma dht export` file"));
  }
  uint64_t keys = 0;
  uint32_t lengths[2];
  while (in.read(reinterpret_cast<char*>(lengths), sizeof lengths)) {
    if (lengths[0] > dht::kMaxKeyBytes || lengths[1] > dht::kMaxValueBytes) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": damaged after ", keys, " keys"));
    }
    std::string key(lengths[0], '\0'), value(lengths[1], '\0');
    if (!in.read(key.data(), lengths[0]) || !in.read(value.data(), lengths[1])) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": cut short after ", keys, " keys"));
    }
    ARDMA_RETURN_IF_ERROR(dht.Put(table, key, value).status());
    ++keys;
  }
  if (in.gcount() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cut short after ", keys, " keys"));
  }
  std::cerr << "imported " << keys << " keys\n";
  return absl::OkStatus();
}

}  // namespace

absl::Status RunDhtCommand(const Options& opt, const std::vector<std::string>& args) {
  const std::string cmd = args.size() > 1 ? args[1] : "";
  size_t want = cmd == "put" || cmd == "insert" ? 5 : cmd == "size" || cmd == "scan" ? 3 : 4;
  if ((cmd != "get" && cmd != "put" && cmd != "insert" && cmd != "del" && cmd != "size" &&
       cmd != "scan" && cmd != "export" && cmd != "import") ||
      args.size() != want) {
    return Usage(
        "usage: ardma dht get TABLE KEY | put TABLE KEY VALUE | insert TABLE KEY VALUE | "
        "del TABLE KEY | size TABLE | scan TABLE | export TABLE FILE | import TABLE FILE");
  }
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Servers> servers, ConnectServices(opt));
  CallOptions call;
  call.stale_read = opt.read_from_replica;
  dht::DhtClient dht(servers.get(), opt.mode, call);
  const std::string& table = args[2];
  if (cmd == "scan") {  // the keys, one a line (as redis-cli --scan)
    return ScanAll(dht, table, [](const std::string& key, const std::string&) {
      std::printf("%s\n", key.c_str());
      return absl::OkStatus();
    });
  }
  if (cmd == "export") return Export(dht, table, args[3]);
  if (cmd == "import") return Import(dht, table, args[3]);
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
