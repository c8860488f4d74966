#include "services/dht/dht_client.h"

#include <algorithm>
#include <cstring>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "core/client/remote_context.h"
#include "core/memory/heap.h"
#include "core/slots.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/dht/dht.h"

namespace ardma::dht {

absl::StatusOr<CachedTable> OpenTable(Client& client, std::string_view table, bool create,
                                      const CallOptions& options) {
  std::string args;
  wire::ByteWriter w(&args);
  w.Str16(table);
  w.U8(create ? 1 : 0);
  absl::StatusOr<std::string> opened =
      Invoke(client, Mode::kActive, active_libraries::dht(), "dht.open", args, options);
  if (!opened.ok()) return opened.status();
  CachedTable cached;
  wire::ByteReader r(*opened);
  if (!r.U64(&cached.header) || !r.U64(&cached.id) || !r.U64(&cached.geometry) ||
      !r.U64(&cached.fence)) {
    return absl::DataLossError("dht.open: bad result");
  }
  return cached;
}

Target CachedTarget(std::string_view table, const CachedTable& cached, const std::string_view* key,
                    std::optional<uint32_t> slot) {
  Target target{table};
  target.header = cached.header;
  target.id = cached.id;
  target.geometry = cached.geometry;
  if (cached.fence != 0 && key != nullptr) {
    target.slot = slot.has_value() ? *slot : slots::SlotOf(table, *key);
    target.fence = slots::FenceEntry(cached.fence, target.slot);
  }
  return target;
}

absl::StatusOr<DhtClient::Cached> DhtClient::ResolveTable(Client& client, std::string_view table,
                                                          bool create) {
  if (mode_ == Mode::kActive) return OpenTable(client, table, create, options_);
  Cached cached;
  RemoteContext ctx(&client, {&active_libraries::dht()}, options_);
  absl::StatusOr<uint64_t> header =
      heap::GetRoot(ctx, absl::StrCat(ToAbsl(kRootPrefix), ToAbsl(table)));
  ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> fence, heap::FindRoot(ctx, slots::kFenceRoot));
  cached.fence = fence.value_or(0);
  if (header.ok()) {
    cached.header = *header;
    ARDMA_ASSIGN_OR_RETURN(std::string bytes, client.Read(*header, 24, kHeapRegion, options_));
    std::memcpy(&cached.id, bytes.data() + 8, 8);
    std::memcpy(&cached.geometry, bytes.data() + 16, 8);
    return cached;
  }
  if (!absl::IsNotFound(header.status())) return header.status();
  if (!create) return absl::NotFoundError(absl::StrCat("no table named '", ToAbsl(table), "'"));
  std::string args;
  wire::ByteWriter(&args).Str16(table);
  absl::StatusOr<std::string> opened =
      Invoke(client, Mode::kRdma, active_libraries::dht(), "dht.open", args, options_);
  if (!opened.ok()) return opened.status();
  wire::ByteReader r(*opened);
  if (!r.U64(&cached.header) || !r.U64(&cached.id) || !r.U64(&cached.geometry)) {
    return absl::DataLossError("dht.open: bad result");
  }
  return cached;
}

absl::StatusOr<Reply> DhtClient::RunFor(std::string_view key, std::string_view function,
                                        std::string_view table, const std::string_view* value,
                                        ReplyKind kind, bool create) {
  ARDMA_RETURN_IF_ERROR(CheckName(table));
  // (The slot routes the call over a cluster, and fences it on a cluster member: a lone server
  // that is neither needs none.)
  const bool routed = servers_->RoutesBySlot();
  const Keyed keyed{key, routed ? slots::SlotOf(table, key) : 0, routed, value};
  if (options_.stale_read && (function == "dht.get" || function == "dht.contains")) {
    if (mode_ != Mode::kActive) {
      return absl::InvalidArgumentError(
          "reads from replicas are made in active mode: a replica answers for slots it does not "
          "own only to a call that says it accepts a stale answer");
    }
    // A replica's answer; if it is not one (any more), the owner's.
    ARDMA_ASSIGN_OR_RETURN(Client * replica, servers_->ForStaleRead(keyed.slot));
    absl::StatusOr<Reply> reply = Run(*replica, function, table, &keyed, "", kind, create);
    if (absl::IsNotFound(reply.status())) return AbsentHere(*replica, table, reply.status());
    if (!reply.ok() || !reply->redirect.has_value()) return reply;
  }
  return RouteToSlot<Reply>(
      *servers_, keyed.slot,
      options_.timeout > absl::ZeroDuration() ? options_.timeout : absl::Seconds(30),
      SlotSubject{"table", table},
      [&](Client& client) -> absl::StatusOr<Reply> {
        absl::StatusOr<Reply> reply = Run(client, function, table, &keyed, "", kind, create);
        if (absl::IsNotFound(reply.status())) return AbsentHere(client, table, reply.status());
        return reply;
      },
      [](const Reply& reply) -> const std::optional<slots::Redirect>& { return reply.redirect; });
}

absl::StatusOr<Reply> DhtClient::AbsentHere(Client& client, std::string_view table,
                                            absl::Status not_found) {
  // A cluster's table lives on every server that holds one of its keys: that this key's server
  // has none means the key is absent, unless no server has the table.
  ARDMA_ASSIGN_OR_RETURN(std::vector<Client*> all, servers_->All());
  for (Client* other : all) {
    if (other == &client) continue;
    absl::StatusOr<Reply> size =
        Run(*other, "dht.size", table, nullptr, "", ReplyKind::kCount, /*create=*/false);
    if (size.ok()) return Reply{.geometry = 0, .flag = false};
    if (!absl::IsNotFound(size.status())) return size.status();
  }
  return not_found;
}

absl::StatusOr<Reply> DhtClient::Run(Client& client, std::string_view function,
                                     std::string_view table, const Keyed* keyed,
                                     std::string_view rest, ReplyKind kind, bool create) {
  ARDMA_RETURN_IF_ERROR(CheckName(table));
  const bool read = function == "dht.get" || function == "dht.contains";
  CallOptions call = options_;
  call.idempotent = read;  // reads run again
  // Active mode's unkeyed calls (size, scan) go by name: they read the header's words themselves.
  // A write of a replicated slot names its table by name, as its replicas apply it.
  const bool cache = mode_ == Mode::kRdma ||
                     (keyed != nullptr && (read || !servers_->Replicated(keyed->slot)));
  auto attempt = [&](std::optional<Cached> cached) -> absl::StatusOr<Reply> {
    Target target{table};
    if (cache) {
      if (!cached.has_value()) {
        ARDMA_ASSIGN_OR_RETURN(cached, ResolveTable(client, table, create));
        tables_.Store(ServerScopedName(client, table), *cached);
      }
      // This client's own write replaces the key's entry: read it from its bucket next time.
      if (mode_ == Mode::kRdma && keyed != nullptr && !read) {
        entries_.Forget(&client, cached->header, keyed->key);
      }
      target = CachedTarget(table, *cached, keyed != nullptr ? &keyed->key : nullptr,
                            keyed != nullptr && keyed->slot_known
                                ? std::optional<uint32_t>(keyed->slot)
                                : std::nullopt);
    }
    absl::StatusOr<Reply> reply;
    if (mode_ == Mode::kRdma && keyed != nullptr && read) {
      reply = ReadHere(client, target, keyed->key, kind, call);
    } else {
      std::string args;
      EncodeTarget(target, &args);
      if (keyed == nullptr) {
        args.append(rest);
      } else {
        args.append(keyed->value != nullptr ? EncodePutArgs(keyed->key, *keyed->value)
                                            : EncodeKeyArgs(keyed->key));
      }
      ARDMA_ASSIGN_OR_RETURN(std::string result,
                             Invoke(client, mode_, active_libraries::dht(), function, args, call));
      reply = DecodeReply(result, kind);
    }
    if (reply.ok() && cache && !reply->redirect.has_value() &&
        reply->geometry != cached->geometry) {
      tables_.Update(ServerScopedName(client, table),
                     [&](Cached& c) { c.geometry = reply->geometry; });  // keep current
    }
    return reply;
  };
  if (!cache) return attempt(std::nullopt);
  return tables_.Run<Reply>(ServerScopedName(client, table), attempt);
}

absl::StatusOr<Reply> DhtClient::ReadHere(Client& client, const Target& target,
                                          std::string_view key, ReplyKind kind,
                                          const CallOptions& call) {
  // What dht.get and dht.contains do (dht::ReadKey), on this thread, and their answer as
  // DecodeReply would give it.
  std::string value;
  std::string* wanted = kind == ReplyKind::kFlagAndValue ? &value : nullptr;
  Reply reply;
  auto redirected = [&](const absl::Status& status) -> absl::StatusOr<Reply> {
    reply.redirect = slots::RedirectOf(status);
    if (!reply.redirect.has_value()) return status;
    reply.geometry = kRedirectGeometry;
    return reply;
  };
  absl::StatusOr<bool> remembered = ReadRemembered(client, target, key, wanted, call);
  if (!remembered.ok()) return redirected(remembered.status());
  if (*remembered) {
    reply.geometry = target.geometry;
    reply.flag = true;
    if (wanted != nullptr) reply.value = std::move(value);
    return reply;
  }
  RemoteContext ctx(&client, {&active_libraries::dht()}, call);
  EntryRef ref;
  absl::StatusOr<Found> found = ReadKey(ctx, target, key, wanted, &ref);
  if (!found.ok()) return redirected(found.status());
  if (found->present && ref.addr != 0) {
    entries_.Store(&client, target.header, key, ref);
  }
  reply.geometry = found->table.geometry.word;
  reply.flag = found->present;
  if (found->present && wanted != nullptr) reply.value = std::move(value);
  return reply;
}

absl::StatusOr<bool> DhtClient::ReadRemembered(Client& client, const Target& target,
                                               std::string_view key, std::string* value,
                                               const CallOptions& call) {
  std::optional<EntryRef> ref = entries_.Find(&client, target.header, key);
  if (!ref) return false;
  RemoteContext ctx(&client, {&active_libraries::dht()}, call);
  ARDMA_ASSIGN_OR_RETURN(bool hit, ReadCached(ctx, target, key, *ref, value));
  if (!hit) entries_.Forget(&client, target.header, key);
  return hit;
}

bool DhtClient::QuickRead(std::string_view table, std::string_view key, std::string* value) {
  if (mode_ != Mode::kRdma || servers_->RoutesBySlot()) return false;
  absl::StatusOr<Client*> client = servers_->ForSlot(0);
  if (!client.ok()) return false;
  std::optional<Cached> cached = tables_.Find(ServerScopedName(**client, table));
  if (!cached.has_value() || cached->fence != 0) return false;
  Target target{.name = table, .header = cached->header, .id = cached->id,
                .geometry = cached->geometry};
  CallOptions call = options_;
  call.idempotent = true;
  absl::StatusOr<bool> hit = ReadRemembered(**client, target, key, value, call);
  return hit.ok() && *hit;  // else the general path, which meets a failure again and handles it
}

namespace {
uint64_t EntryKey(const Client* server, uint64_t header, std::string_view key) {
  return absl::HashOf(server, header, ToAbsl(key));
}
}  // namespace

std::optional<EntryRef> DhtClient::EntryCache::Find(const Client* server, uint64_t header,
                                                    std::string_view key) {
  uint64_t k = EntryKey(server, header, key);
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(k);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void DhtClient::EntryCache::Store(const Client* server, uint64_t header, std::string_view key,
                                  const EntryRef& ref) {
  uint64_t k = EntryKey(server, header, key);
  absl::MutexLock lock(&mu_);
  if (entries_.size() >= kMaxCachedEntries && !entries_.contains(k)) {
    entries_.erase(entries_.begin());  // full: make room (any entry will do)
  }
  entries_.insert_or_assign(k, ref);
}

void DhtClient::EntryCache::Forget(const Client* server, uint64_t header, std::string_view key) {
  uint64_t k = EntryKey(server, header, key);
  absl::MutexLock lock(&mu_);
  entries_.erase(k);
}

absl::StatusOr<bool> DhtClient::Put(std::string_view table, std::string_view key,
                                    std::string_view value) {
  ARDMA_ASSIGN_OR_RETURN(Reply reply, RunFor(key, "dht.put", table, &value,
                                          ReplyKind::kFlag, /*create=*/true));
  return reply.flag;
}

absl::StatusOr<std::optional<std::string>> DhtClient::Insert(std::string_view table,
                                                             std::string_view key,
                                                             std::string_view value) {
  ARDMA_ASSIGN_OR_RETURN(Reply reply, RunFor(key, "dht.insert", table, &value,
                                          ReplyKind::kFlagAndValue, /*create=*/true));
  if (!reply.flag) return std::nullopt;
  return std::move(reply.value);
}

absl::StatusOr<std::string> DhtClient::Get(std::string_view table, std::string_view key) {
  if (std::string value; QuickRead(table, key, &value)) return value;
  ARDMA_ASSIGN_OR_RETURN(Reply reply, RunFor(key, "dht.get", table, nullptr,
                                          ReplyKind::kFlagAndValue, /*create=*/false));
  if (!reply.flag) return absl::NotFoundError("no such key");
  return std::move(*reply.value);
}

absl::StatusOr<bool> DhtClient::Contains(std::string_view table, std::string_view key) {
  if (QuickRead(table, key, nullptr)) return true;
  ARDMA_ASSIGN_OR_RETURN(Reply reply, RunFor(key, "dht.contains", table, nullptr,
                                          ReplyKind::kFlag, /*create=*/false));
  return reply.flag;
}

absl::StatusOr<bool> DhtClient::Remove(std::string_view table, std::string_view key) {
  ARDMA_ASSIGN_OR_RETURN(Reply reply, RunFor(key, "dht.remove", table, nullptr, ReplyKind::kFlag,
                                          /*create=*/false));
  return reply.flag;
}

absl::StatusOr<uint64_t> DhtClient::Size(std::string_view table) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<Client*> all, servers_->All());
  uint64_t total = 0;
  bool found = false;  // NotFound only if no server has the table
  for (Client* client : all) {
    absl::StatusOr<Reply> reply =
        Run(*client, "dht.size", table, nullptr, "", ReplyKind::kCount, /*create=*/false);
    if (absl::IsNotFound(reply.status()) && all.size() > 1) continue;
    ARDMA_RETURN_IF_ERROR(reply.status());
    total += reply->count;
    found = true;
  }
  if (!found) return absl::NotFoundError(absl::StrCat("no table named '", ToAbsl(table), "'"));
  return total;
}

absl::StatusOr<DhtClient::Page> DhtClient::Scan(std::string_view table, uint64_t cursor,
                                                uint32_t count) {
  ARDMA_RETURN_IF_ERROR(CheckName(table));
  constexpr int kServerShift = 48;
  ARDMA_ASSIGN_OR_RETURN(std::vector<Client*> all, servers_->All());
  size_t server = cursor >> kServerShift;
  uint64_t buckets = cursor & ((1ull << kServerShift) - 1);
  if (server >= all.size()) return absl::InvalidArgumentError("dht scan: no such cursor");
  Page page;
  bool seen = cursor != 0;  // a table was found (on some server) in an earlier step
  for (; server < all.size(); ++server, buckets = 0) {
    std::string rest;
    wire::ByteWriter w(&rest);
    w.U64(buckets);
    w.U32(count);
    absl::StatusOr<Reply> reply = Run(*all[server], "dht.scan", table, nullptr, rest,
                                      ReplyKind::kScan, /*create=*/false);
    if (absl::IsNotFound(reply.status())) continue;  // no such table on this server
    if (!reply.ok()) return reply.status();
    seen = true;
    page.items = std::move(reply->items);
    if (reply->next != 0) {
      page.next = static_cast<uint64_t>(server) << kServerShift | reply->next;
      return page;
    }
    if (server + 1 < all.size()) {  // the next server's first step, in the next call
      page.next = static_cast<uint64_t>(server + 1) << kServerShift;
      return page;
    }
  }
  if (!seen) return absl::NotFoundError(absl::StrCat("no table named '", ToAbsl(table), "'"));
  return page;
}

}  // namespace ardma::dht
