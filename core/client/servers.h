// Servers: where a service's client sends a call about a key — one server, or the server a
// cluster's slot map names (cluster::Cluster, docs/cluster.md). The service clients (DhtClient,
// ...) take either, so an application moves to a cluster by handing over a Cluster instead.
#ifndef ARDMA_CORE_CLIENT_SERVERS_H_
#define ARDMA_CORE_CLIENT_SERVERS_H_

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/client/client.h"

namespace ardma {

class Servers {
 public:
  virtual ~Servers() = default;
  // The client of the server that holds `key` of namespace `space` (a DHT table, "lock", ...).
  virtual absl::StatusOr<Client*> For(std::string_view space, std::string_view key) = 0;
  // Every server, each once: for what spans a whole namespace (a table's size).
  virtual absl::StatusOr<std::vector<Client*>> All() = 0;
};

// One server holds every key: over a Client borrowed, or owned.
class OneServer final : public Servers {
 public:
  explicit OneServer(Client* client) : client_(client) {}
  explicit OneServer(std::unique_ptr<Client> client)
      : owned_(std::move(client)), client_(owned_.get()) {}
  absl::StatusOr<Client*> For(std::string_view, std::string_view) override { return client_; }
  absl::StatusOr<std::vector<Client*>> All() override { return std::vector<Client*>{client_}; }

 private:
  std::unique_ptr<Client> owned_;
  Client* const client_;
};

}  // namespace ardma

#endif  // ARDMA_CORE_CLIENT_SERVERS_H_
