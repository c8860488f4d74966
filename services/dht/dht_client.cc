#include "services/dht/dht_client.h"

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/client/remote_context.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"

namespace ardma::dht {

absl::StatusOr<DhtClient::Cached> DhtClient::Resolve(std::string_view table, bool create) {
  ARDMA_RETURN_IF_ERROR(CheckName(table));
  {
    absl::MutexLock lock(&mu_);
    auto it = tables_.find(ToAbsl(table));
    if (it != tables_.end()) return it->second;
  }
  Cached cached;
  RemoteContext ctx(client_, {&active_libraries::dht()}, options_);
  absl::StatusOr<uint64_t> header =
      heap::GetRoot(ctx, absl::StrCat(ToAbsl(kRootPrefix), ToAbsl(table)));
  if (header.ok()) {
    cached.header = *header;
    ARDMA_ASSIGN_OR_RETURN(std::string bytes, client_->Read(*header, 24, kHeapRegion, options_));
    std::memcpy(&cached.id, bytes.data() + 8, 8);
    std::memcpy(&cached.geometry, bytes.data() + 16, 8);
  } else if (absl::IsNotFound(header.status())) {
    if (!create) return absl::NotFoundError(absl::StrCat("no table named '", ToAbsl(table), "'"));
    std::string args;
    wire::ByteWriter(&args).Str16(table);
    absl::StatusOr<std::string> opened =
        Invoke(*client_, Mode::kRdma, active_libraries::dht(), "dht.open", args, options_);
    if (!opened.ok()) return opened.status();
    wire::ByteReader r(*opened);
    if (!r.U64(&cached.header) || !r.U64(&cached.id) || !r.U64(&cached.geometry)) {
      return absl::DataLossError("dht.open: bad result");
    }
  } else {
    return header.status();
  }
  absl::MutexLock lock(&mu_);
  tables_.emplace(std::string(table), cached);
  return cached;
}

absl::StatusOr<Reply> DhtClient::Run(std::string_view function, std::string_view table,
                                     std::string_view rest, ReplyKind kind, bool create) {
  bool stale = false;
  absl::StatusOr<Reply> reply = RunOnce(function, table, rest, kind, create, &stale);
  // A stale cached address (the server restarted without its memory file): resolve again, once.
  if (stale) reply = RunOnce(function, table, rest, kind, create, &stale);
  return reply;
}

absl::StatusOr<Reply> DhtClient::RunOnce(std::string_view function, std::string_view table,
                                         std::string_view rest, ReplyKind kind, bool create,
                                         bool* stale) {
  *stale = false;
  Target target{table};
  if (mode_ == Mode::kRdma) {
    ARDMA_ASSIGN_OR_RETURN(Cached cached, Resolve(table, create));
    target.header = cached.header;
    target.id = cached.id;
    target.geometry = cached.geometry;
  } else {
    ARDMA_RETURN_IF_ERROR(CheckName(table));
  }
  std::string args;
  EncodeTarget(target, &args);
  args.append(rest);
  absl::StatusOr<std::string> result =
      Invoke(*client_, mode_, active_libraries::dht(), function, args, options_);
  if (mode_ == Mode::kRdma) {
    bool bad_cache = absl::IsDataLoss(result.status()) ||
                     (absl::IsInvalidArgument(result.status()) &&
                      absl::StrContains(result.status().message(), "no dht table header"));
    absl::MutexLock lock(&mu_);
    auto it = tables_.find(ToAbsl(table));
    if (bad_cache && it != tables_.end()) {
      tables_.erase(it);
      *stale = true;
      return result.status();
    }
    if (result.ok() && result->size() >= 8 && it != tables_.end()) {
      std::memcpy(&it->second.geometry, result->data(), 8);  // keep the geometry current
    }
  }
  if (!result.ok()) return result.status();
  return DecodeReply(*result, kind);
}

absl::StatusOr<bool> DhtClient::Put(std::string_view table, std::string_view key,
                                    std::string_view value) {
  ARDMA_ASSIGN_OR_RETURN(Reply reply, Run("dht.put", table, EncodePutArgs(key, value),
                                          ReplyKind::kFlag, /*create=*/true));
  return reply.flag;
}

absl::StatusOr<std::optional<std::string>> DhtClient::Insert(std::string_view table,
                                                            std::string_view key,
                                                            std::string_view value) {
  ARDMA_ASSIGN_OR_RETURN(Reply reply, Run("dht.insert", table, EncodePutArgs(key, value),
                                          ReplyKind::kFlagAndValue, /*create=*/true));
  if (!reply.flag) return std::nullopt;
  return std::move(reply.value);
}

absl::StatusOr<std::string> DhtClient::Get(std::string_view table, std::string_view key) {
  ARDMA_ASSIGN_OR_RETURN(Reply reply, Run("dht.get", table, EncodeKeyArgs(key),
                                          ReplyKind::kFlagAndValue, /*create=*/false));
  if (!reply.flag) return absl::NotFoundError("no such key");
  return std::move(*reply.value);
}

absl::StatusOr<bool> DhtClient::Contains(std::string_view table, std::string_view key) {
  ARDMA_ASSIGN_OR_RETURN(Reply reply, Run("dht.contains", table, EncodeKeyArgs(key),
                                          ReplyKind::kFlag, /*create=*/false));
  return reply.flag;
}

absl::StatusOr<bool> DhtClient::Remove(std::string_view table, std::string_view key) {
  ARDMA_ASSIGN_OR_RETURN(Reply reply, Run("dht.remove", table, EncodeKeyArgs(key), ReplyKind::kFlag,
                                          /*create=*/false));
  return reply.flag;
}

absl::StatusOr<uint64_t> DhtClient::Size(std::string_view table) {
  ARDMA_ASSIGN_OR_RETURN(Reply reply,
                         Run("dht.size", table, "", ReplyKind::kCount, /*create=*/false));
  return reply.count;
}

}  // namespace ardma::dht
