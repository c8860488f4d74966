// PeerCalls: how a member of a cluster calls the other members (Context::CallPeer, DESIGN §10).
// ardmad --cluster builds one and hands it to its server from above, so core/server holds only
// the PeerCaller interface. It keeps a Cluster of its own, connected on first use (a member starts
// before its cluster has a slot map), whose clients authenticate with the server's own peer
// credentials (the auth file's secret granted `peer`). Each call is an EXECUTE marked as a peer's
// (wire::kFlagPeer) with the time left to the caller's deadline; a call by slot follows redirects.
//
// Thread-safe.
#ifndef ARDMA_CORE_CLUSTER_PEER_CALLS_H_
#define ARDMA_CORE_CLUSTER_PEER_CALLS_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/client/client.h"
#include "core/cluster/router.h"
#include "core/context/context.h"

namespace ardma::cluster {

class PeerCalls final : public PeerCaller {
 public:
  // `address`: the cluster's etcd://HOST:PORT[,...]/NAME; `options`: its members' clients' (with
  // the peer credentials when the members require authentication).
  PeerCalls(std::string address, Cluster::Options options)
      : address_(std::move(address)), options_(std::move(options)) {}

  absl::StatusOr<std::string> Call(const PeerTarget& target, std::string_view function,
                                   std::string_view args, absl::Time deadline) override;
  absl::StatusOr<std::string> Replicate(const std::string& member, std::string_view function,
                                        std::string_view args, absl::Time deadline) override;
  // A client of member `id` (this member's own too), with the peer credentials: for ardmad's
  // own work between members (filling a replica).
  absl::StatusOr<Client*> ClientFor(std::string_view id);

 private:
  absl::StatusOr<std::string> Run(const PeerTarget& target, std::string_view function,
                                  std::string_view args, absl::Time deadline, bool replica);
  absl::StatusOr<Cluster*> Connected();

  const std::string address_;
  const Cluster::Options options_;
  absl::Mutex mu_;
  std::unique_ptr<Cluster> cluster_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ardma::cluster

#endif  // ARDMA_CORE_CLUSTER_PEER_CALLS_H_
