// DhtClient: what an application embeds to use named hash tables (byte-string keys to byte-string
// values) in an ardmad's memory.
//
//   ARDMA_ASSIGN_OR_RETURN(auto client, ardma::Client::Connect("127.0.0.1:15712"));
//   ardma::dht::DhtClient dht(client.get(), ardma::Mode::kActive);
//   ARDMA_RETURN_IF_ERROR(dht.Put("sessions", "alice", "token-1"));
//   ARDMA_ASSIGN_OR_RETURN(std::string token, dht.Get("sessions", "alice"));  // "token-1"
//   ARDMA_ASSIGN_OR_RETURN(bool gone, dht.Remove("sessions", "alice"));        // true
//
// Mode::kActive: every call is one EXECUTE (one round trip); the "dht" library is shipped on first
// use, and the first keyed call on a table resolves it (one dht.open per server and table), so the
// server looks no name up afterwards. Mode::kRdma: the same functions run here over one-sided
// operations; a GET costs 2 round trips (read the key's bucket neighbourhood, then its entry)
// once the table's geometry is cached, and 1 (the entry alone, where it was found) once the key
// has been found; torn, recycled or retired entries are detected by their checksum and lengths,
// never returned. Clients in both modes may use one table at once (dht_format.h has the
// protocol).
//
// Errors: InvalidArgument (bad table name, key over kMaxKeyBytes, value over kMaxValueBytes),
// NotFound (Get of a missing key; any read of a table never written), ResourceExhausted (server
// memory full: the table stays usable), and the Client's transport errors.
//
// Over a cluster (a cluster::Cluster as the Servers), each key's calls go to the server its slot's
// owner (the slot of the table name and the key); Size adds up every server's count. A table
// exists if any server holds it: a key whose server has never seen the table is simply absent.
// While slots move between servers (docs/cluster.md) a call that reaches a server no longer (or
// not yet) serving its key's slot is answered with a redirect, in both modes; the client then
// refreshes its map or waits out the move, and tries again: the application never sees it.
//
// Reads from replicas: with CallOptions::stale_read (`ardma dht get --read-from-replica`), Get and
// Contains go to a live replica of the key's owner where the map names one (else the owner), which
// answers from its copy: every write acknowledged before the read began is there, but one being
// acknowledged meanwhile may not be yet. Active mode only.
//
// Borrows the Client (or Servers) for its lifetime. Thread-safe.
#ifndef ARDMA_SERVICES_DHT_DHT_CLIENT_H_
#define ARDMA_SERVICES_DHT_DHT_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/active/active_library.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/client/servers.h"
#include "services/dht/dht.h"
#include "services/dht/dht_format.h"
#include "services/root_cache.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(dht);

namespace ardma::dht {

// A table as a client caches it, to name it in calls (dht_format.h's targets 1 and 2): its header,
// id and geometry on one server, and that server's slot fence (0: none).
struct CachedTable {
  uint64_t header = 0, id = 0, geometry = 0;
  uint64_t fence = 0;  // the server's slot fence (core/slots.h); 0: not a cluster member
};
// Resolves `table` on `client`'s server with one dht.open (active mode: it needs no permission but
// exec), creating it if `create`; NotFound if it does not exist and not `create`.
absl::StatusOr<CachedTable> OpenTable(Client& client, std::string_view table, bool create,
                                      const CallOptions& options = {});
// The target naming `table` as cached, for a call on `key` (null: a call on no key, which names no
// fence) whose slot is `slot`, or computed here if needed (on a cluster member) and not given.
Target CachedTarget(std::string_view table, const CachedTable& cached, const std::string_view* key,
                    std::optional<uint32_t> slot = std::nullopt);

class DhtClient {
 public:
  DhtClient(Client* client, Mode mode, CallOptions options = {})
      : one_(std::make_unique<OneServer>(client)), servers_(one_.get()), mode_(mode),
        options_(options) {}
  DhtClient(Servers* servers, Mode mode, CallOptions options = {})
      : servers_(servers), mode_(mode), options_(options) {}

  // Inserts or replaces. Returns true if the key was new. Creates the table.
  absl::StatusOr<bool> Put(std::string_view table, std::string_view key, std::string_view value);
  // Inserts only if the key is absent: nullopt if it inserted, else the value already there (left
  // unchanged). Creates the table. Two clients racing to insert one key: exactly one inserts.
  absl::StatusOr<std::optional<std::string>> Insert(std::string_view table, std::string_view key,
                                                    std::string_view value);
  // The value; NotFound if the key is absent.
  absl::StatusOr<std::string> Get(std::string_view table, std::string_view key);
  absl::StatusOr<bool> Contains(std::string_view table, std::string_view key);
  // Returns true if the key was there.
  absl::StatusOr<bool> Remove(std::string_view table, std::string_view key);
  // Keys in the table.
  absl::StatusOr<uint64_t> Size(std::string_view table);
  // One step of going through the table, as Redis' SCAN: about `count` keys, with their values,
  // from `cursor` (0 to start); `next` is 0 once the whole table has been gone through. Every key
  // present from the first step to the last comes at least once, also while the table grows (a
  // key may come twice); one put or removed meanwhile may or may not (dht.h, Scan). Over a
  // cluster the servers come one after another (the cursor's top 16 bits say which), so a key
  // whose slot moves to a server already gone through during the scan can be missed.
  struct Page {
    uint64_t next = 0;
    std::vector<std::pair<std::string, std::string>> items;
  };
  absl::StatusOr<Page> Scan(std::string_view table, uint64_t cursor, uint32_t count = 100);

  Mode mode() const { return mode_; }

 private:
  using Cached = CachedTable;
  // A keyed call's key, the key's slot and (put, insert) the value.
  struct Keyed {
    std::string_view key;
    uint32_t slot = 0;
    bool slot_known = true;  // else computed where it is needed (slots::SlotOf)
    const std::string_view* value = nullptr;
  };
  // Runs `function` on `client` with args = target + the key's arguments (`keyed`), or + `rest`.
  // In RDMA mode, and for a keyed call in active mode, the target is the table as cached for that
  // server (resolved once per server and name, and created when `create`), with the fence entry
  // of the key's slot (if there is a key, and the server a fence): the server then looks no name
  // up. In RDMA mode a get or contains runs as ReadHere.
  absl::StatusOr<Reply> Run(Client& client, std::string_view function, std::string_view table,
                            const Keyed* keyed, std::string_view rest, ReplyKind kind,
                            bool create);
  // RDMA mode's get and contains: the function's algorithm (dht::ReadKey) on this thread, with no
  // arguments to encode and no answer to decode.
  absl::StatusOr<Reply> ReadHere(Client& client, const Target& target, std::string_view key,
                                 ReplyKind kind, const CallOptions& call);
  // The key's value (into *value, if given) from the entry where `client` last found it, in one
  // READ: true if that entry still holds it; false (the cache forgets it) if not, or if none is
  // remembered. A slot not served there fails with its redirect status.
  absl::StatusOr<bool> ReadRemembered(Client& client, const Target& target, std::string_view key,
                                      std::string* value, const CallOptions& call);
  // Get's and Contains' short way in RDMA mode on a lone server that is no cluster member (no
  // routing, no fence): ReadRemembered on the cached table, without a Reply. False: take the
  // general way (RunFor).
  bool QuickRead(std::string_view table, std::string_view key, std::string* value);
  // The same on the server that holds `key` (with `value`, if given), following redirects (a
  // slot that moved, or is moving) for up to the call's timeout from the first one.
  absl::StatusOr<Reply> RunFor(std::string_view key, std::string_view function,
                               std::string_view table, const std::string_view* value,
                               ReplyKind kind, bool create);
  // `not_found` came from `client`'s server: the key is absent there, unless no server of the
  // cluster has the table.
  absl::StatusOr<Reply> AbsentHere(Client& client, std::string_view table, absl::Status not_found);
  // The table's header, id and geometry on `client`'s server, through the heap's roots (RDMA mode:
  // one-sided), or in one dht.open (active mode, which may lack the read permission).
  absl::StatusOr<Cached> ResolveTable(Client& client, std::string_view table, bool create);

  // RDMA mode: where keys' entries were last found, by server, table (header) and key, so that a
  // GET reads the entry in one READ (dht::ReadCached) and falls back to the neighbourhood only
  // once the entry has been replaced. Keyed by a hash of the three alone: ReadCached checks the
  // key it reads, so two keys with one hash cost a fall-back, never a wrong answer. At most
  // kMaxCachedEntries; a full cache drops an entry.
  class EntryCache {
   public:
    std::optional<EntryRef> Find(const Client* server, uint64_t header, std::string_view key);
    void Store(const Client* server, uint64_t header, std::string_view key, const EntryRef& ref);
    void Forget(const Client* server, uint64_t header, std::string_view key);

   private:
    absl::Mutex mu_;
    absl::flat_hash_map<uint64_t, EntryRef> entries_ ABSL_GUARDED_BY(mu_);
  };
  static constexpr size_t kMaxCachedEntries = 1 << 16;

  std::unique_ptr<OneServer> one_;  // when given one Client
  Servers* const servers_;
  const Mode mode_;
  const CallOptions options_;
  RootCache<Cached> tables_;  // by server and table name
  EntryCache entries_;
};

}  // namespace ardma::dht

#endif  // ARDMA_SERVICES_DHT_DHT_CLIENT_H_
