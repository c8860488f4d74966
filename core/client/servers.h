// Servers: where a service's client sends a call about a key — one server, or the server a
// cluster's slot map names (cluster::Cluster, docs/cluster.md). The service clients (DhtClient,
// ...) take either, so an application moves to a cluster by handing over a Cluster instead.
#ifndef ARDMA_CORE_CLIENT_SERVERS_H_
#define ARDMA_CORE_CLIENT_SERVERS_H_

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
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

}  // namespace ardma

#endif  // ARDMA_CORE_CLIENT_SERVERS_H_
