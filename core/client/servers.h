// Servers: where a service's client sends a call about a key — one server, or the server a
// cluster's slot map names (cluster::Cluster, docs/cluster.md). The service clients (DhtClient,
// ...) take either, so an application moves to a cluster by handing over a Cluster instead.
#ifndef ARDMA_CORE_CLIENT_SERVERS_H_
#define ARDMA_CORE_CLIENT_SERVERS_H_

#include <algorithm>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/client/client.h"
#include "core/slots.h"

namespace ardma {

class Servers {
 public:
  virtual ~Servers() = default;
  // The client of the server that holds `key` of namespace `space` (a DHT table, "lock", ...).
  virtual absl::StatusOr<Client*> For(std::string_view space, std::string_view key) = 0;
  // The same for a key whose slot (slots::SlotOf) the caller has computed already.
  virtual absl::StatusOr<Client*> ForSlot(uint32_t slot) = 0;
  // Every server, each once: for what spans a whole namespace (a table's size).
  virtual absl::StatusOr<std::vector<Client*>> All() = 0;
  // A server answered that the key's slot is not served there (it moved, or is moving): learn
  // where it is now. OK when the caller should simply try again (For may now name another
  // server); an error when it cannot be found.
  virtual absl::Status Redirected(const slots::Redirect& redirect) = 0;
  // Whether ForSlot depends on the slot (false: a caller need not compute it to route).
  virtual bool RoutesBySlot() const { return true; }
  // Whether `slot`'s writes are replicated (its owner has replicas in the slot map).
  virtual bool Replicated(uint32_t slot) { return false; }
  // Where a read of `slot` that may be a little behind goes (CallOptions::stale_read): a live
  // replica of its owner if it has one, else the owner.
  virtual absl::StatusOr<Client*> ForStaleRead(uint32_t slot) { return ForSlot(slot); }
};

// One server holds every key: over a Client borrowed, or owned.
class OneServer final : public Servers {
 public:
  explicit OneServer(Client* client) : client_(client) {}
  explicit OneServer(std::unique_ptr<Client> client)
      : owned_(std::move(client)), client_(owned_.get()) {}
  absl::StatusOr<Client*> For(std::string_view, std::string_view) override { return client_; }
  absl::StatusOr<Client*> ForSlot(uint32_t) override { return client_; }
  absl::StatusOr<std::vector<Client*>> All() override { return std::vector<Client*>{client_}; }
  bool RoutesBySlot() const override { return false; }
  absl::Status Redirected(const slots::Redirect& redirect) override {
    if (redirect.frozen) return absl::OkStatus();  // back shortly
    return absl::FailedPreconditionError(absl::StrCat(
        "the server does not serve slot ", redirect.slot,
        " (it moved to another server of its cluster): connect with the cluster's etcd:// "
        "address"));
  }

 private:
  std::unique_ptr<Client> owned_;
  Client* const client_;
};

// What a slot's call is about, for its error message ("table t", "lock l"): pieces, so a call
// that succeeds builds no string.
struct SlotSubject {
  std::string_view kind;  // "table", "lock", "list", "function"
  std::string_view name;
};

// Runs `call(Client&) -> StatusOr<T>` on the server that holds `slot` (any value, for Servers
// that do not route by slot), following redirects (the
// slot moved: learn where; or is moving: try again shortly): an error status that carries one
// (slots::RedirectOf; it crosses the wire whole), or an answer for which
// `redirect_of(const T&) -> std::optional<slots::Redirect>` has one. A slot still moving `timeout`
// after the first redirect fails with DEADLINE_EXCEEDED naming `what`.
template <typename T, typename Call, typename RedirectOf>
absl::StatusOr<T> RouteToSlot(Servers& servers, uint32_t slot, absl::Duration timeout,
                              SlotSubject what, Call call, RedirectOf redirect_of) {
  absl::Time deadline = absl::InfinitePast();  // set at the first redirect
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<Client*> client = servers.ForSlot(slot);
    if (!client.ok()) return client.status();
    absl::StatusOr<T> result = call(**client);
    std::optional<slots::Redirect> redirect =
        result.ok() ? redirect_of(*result) : slots::RedirectOf(result.status());
    if (!redirect) return result;
    absl::Status learned = servers.Redirected(*redirect);
    if (absl::IsFailedPrecondition(learned)) return learned;
    if (deadline == absl::InfinitePast()) {
      deadline = absl::Now() + timeout;
    } else if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("slot ", redirect->slot, " of ", absl::string_view(what.kind.data(), what.kind.size()),
                       " ", absl::string_view(what.name.data(), what.name.size()),
                       " did not settle on a server within the call's timeout",
                       learned.ok() ? "" : absl::StrCat(": ", learned.message())));
    }
    absl::SleepFor(std::min(absl::Microseconds(100) * (1 << std::min(attempt, 8)),
                            absl::Milliseconds(20)));
  }
}

template <typename T, typename Call>
absl::StatusOr<T> RouteToSlot(Servers& servers, uint32_t slot, absl::Duration timeout,
                              SlotSubject what, Call call) {
  return RouteToSlot<T>(servers, slot, timeout, what, call,
                        [](const T&) { return std::optional<slots::Redirect>(); });
}

}  // namespace ardma

#endif  // ARDMA_CORE_CLIENT_SERVERS_H_
