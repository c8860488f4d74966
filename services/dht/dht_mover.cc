#include "services/dht/dht_mover.h"

#include "absl/strings/str_cat.h"
#include "core/client/invoke.h"
#include "core/slots.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/dht/dht.h"
#include "services/dht/dht_client.h"

namespace ardma::dht {
namespace {

constexpr uint32_t kPageBytes = 4u << 20;  // keys and values exported per call
constexpr int kMaxRescans = 100;

absl::StatusOr<std::string> Call(Client& server, std::string_view function,
                                 std::string_view args) {
  return Invoke(server, Mode::kActive, active_libraries::dht(), function, args);
}

struct Page {
  uint64_t next = 0, geometry = 0;
  uint64_t removed = 0;
  std::string entries;  // count:u32 (key:bytes32 value:bytes32)*, as dht.import takes them
};

// One call of dht.export or dht.purge.
absl::StatusOr<Page> SweepPage(Client& server, std::string_view function, const std::string& table,
                               const std::string& bitmap, uint64_t cursor, uint64_t geometry) {
  std::string args;
  wire::ByteWriter w(&args);
  w.Str16(table);
  w.Bytes32(bitmap);
  w.U64(cursor);
  w.U64(geometry);
  w.U32(kPageBytes);
  absl::StatusOr<std::string> called = Call(server, function, args);
  if (!called.ok()) return called.status();
  const std::string& result = *called;
  wire::ByteReader r(result);
  Page page;
  if (!r.U64(&page.next) || !r.U64(&page.geometry)) {
    return absl::DataLossError(absl::StrCat(ToAbsl(function), ": bad result"));
  }
  if (function == "dht.purge") {
    if (!r.U64(&page.removed) || !r.AtEnd()) return absl::DataLossError("dht.purge: bad result");
  } else {
    page.entries = std::string(result.substr(16));
  }
  return page;
}

// Runs dht.export or dht.purge over the whole table, from the start again whenever a resize
// interrupts it; `page_done` takes each page.
absl::Status SweepAll(Client& server, std::string_view function, const std::string& table,
                      const std::string& bitmap,
                      const std::function<absl::Status(const Page&)>& page_done) {
  for (int rescan = 0; rescan < kMaxRescans; ++rescan) {
    uint64_t cursor = 0, geometry = 0;
    for (;;) {
      ARDMA_ASSIGN_OR_RETURN(Page page,
                             SweepPage(server, function, table, bitmap, cursor, geometry));
      if (page.next == kRescan) break;
      ARDMA_RETURN_IF_ERROR(page_done(page));
      if (page.next == 0) return absl::OkStatus();
      cursor = page.next;
      geometry = page.geometry;
    }
  }
  return absl::AbortedError(absl::StrCat("table ", table, " kept resizing under the sweep"));
}

}  // namespace

std::string SlotBitmap(const std::vector<uint32_t>& slots) {
  std::string bitmap(slots::kSlots / 8, '\0');
  for (uint32_t s : slots) bitmap[s / 8] = static_cast<char>(bitmap[s / 8] | (1 << (s % 8)));
  return bitmap;
}

absl::StatusOr<std::vector<std::string>> TablesOn(Client& server) {
  ARDMA_ASSIGN_OR_RETURN(std::string result, Call(server, "dht.tables", ""));
  wire::ByteReader r(result);
  uint32_t count;
  if (!r.U32(&count)) return absl::DataLossError("dht.tables: bad result");
  std::vector<std::string> tables(count);
  for (std::string& t : tables) {
    std::string_view name;
    if (!r.Str16(&name)) return absl::DataLossError("dht.tables: bad result");
    t = std::string(name);
  }
  return tables;
}

absl::StatusOr<uint64_t> TableSize(Client& server, const std::string& table) {
  std::string args;
  EncodeTarget(Target{.name = table, .unfenced = true}, &args);
  ARDMA_ASSIGN_OR_RETURN(std::string result, Call(server, "dht.size", args));
  ARDMA_ASSIGN_OR_RETURN(Reply reply, DecodeReply(result, ReplyKind::kCount));
  return reply.count;
}

absl::StatusOr<uint64_t> CopySlots(Client& from, Client& to, const std::string& table,
                                   const std::string& bitmap) {
  uint64_t copied = 0;
  ARDMA_RETURN_IF_ERROR(SweepAll(from, "dht.export", table, bitmap, [&](const Page& page) {
    wire::ByteReader r(page.entries);
    uint32_t count = 0;
    if (!r.U32(&count)) return absl::DataLossError("dht.export: bad result");
    if (count == 0) return absl::OkStatus();
    std::string args;
    wire::ByteWriter(&args).Str16(table);
    args.append(page.entries);
    copied += count;
    return Call(to, "dht.import", args).status();
  }));
  return copied;
}

absl::StatusOr<uint64_t> PurgeSlots(Client& server, const std::string& table,
                                    const std::string& bitmap) {
  uint64_t removed = 0;
  ARDMA_RETURN_IF_ERROR(SweepAll(server, "dht.purge", table, bitmap, [&](const Page& page) {
    removed += page.removed;
    return absl::OkStatus();
  }));
  return removed;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> EntriesOf(
    Client& server, const std::string& table) {
  std::vector<uint32_t> all(slots::kSlots);
  for (uint32_t s = 0; s < slots::kSlots; ++s) all[s] = s;
  std::vector<std::pair<std::string, std::string>> entries;
  ARDMA_RETURN_IF_ERROR(SweepAll(server, "dht.export", table, SlotBitmap(all), [&](const Page& page) {
    wire::ByteReader r(page.entries);
    uint32_t count = 0;
    if (!r.U32(&count)) return absl::DataLossError("dht.export: bad result");
    for (uint32_t i = 0; i < count; ++i) {
      std::string_view key, value;
      if (!r.Bytes32(&key) || !r.Bytes32(&value)) return absl::DataLossError("dht.export: bad entry");
      entries.emplace_back(key, value);
    }
    return absl::OkStatus();
  }));
  return entries;
}

absl::StatusOr<std::vector<std::string>> KeysOf(Client& server, const std::string& table) {
  ARDMA_ASSIGN_OR_RETURN(auto entries, EntriesOf(server, table));
  std::vector<std::string> keys;
  keys.reserve(entries.size());
  for (auto& [key, value] : entries) keys.push_back(std::move(key));
  return keys;
}

}  // namespace ardma::dht
