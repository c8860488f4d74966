#include "services/dfs/dfs_mover.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "core/status_macros.h"
#include "core/client/invoke.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/dfs/dfs_format.h"
#include "services/dht/dht_format.h"
#include "services/dht/dht_mover.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(dht);

namespace ardma::dfs {

bool IsFileSystemTable(std::string_view table) {
  std::string_view prefix = table.substr(0, std::min<size_t>(table.size(), 4));
  return prefix == "dfs." || prefix == "dfd." || prefix == "dfo.";
}

absl::StatusOr<std::set<uint32_t>> SlotsWithFileSystemState(Client& server) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> tables, dht::TablesOn(server));
  std::set<uint32_t> held;
  for (const std::string& table : tables) {
    if (!IsFileSystemTable(table)) continue;
    std::string_view fs = std::string_view(table).substr(4);
    if (absl::StartsWith(table, "dfs.")) held.insert(NamespaceSlot(fs));
    if (!absl::StartsWith(table, "dfd.")) continue;
    // Every file whose bytes are here: its inode number is the key.
    uint64_t cursor = 0;
    do {
      std::string args;
      dht::EncodeTarget(dht::Target{.name = table, .unfenced = true}, &args);
      wire::ByteWriter w(&args);
      w.U64(cursor);
      w.U32(4096);
      ARDMA_ASSIGN_OR_RETURN(std::string page, Invoke(server, Mode::kActive,
                                                      active_libraries::dht(), "dht.scan", args));
      ARDMA_ASSIGN_OR_RETURN(dht::Reply reply, dht::DecodeReply(page, dht::ReplyKind::kScan));
      for (const auto& item : reply.items) {
        if (item.first.size() != 8) return absl::DataLossError("dfs: bad content record");
        uint64_t ino;
        std::memcpy(&ino, item.first.data(), 8);
        held.insert(DataSlot(fs, ino));
      }
      cursor = reply.next;
    } while (cursor != 0);
  }
  return held;
}

}  // namespace ardma::dfs
