#include "core/cluster/peer_calls.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/client/servers.h"
#include "core/status_macros.h"

namespace ardma::cluster {

absl::StatusOr<Cluster*> PeerCalls::Connected() {
  absl::MutexLock lock(&mu_);
  if (cluster_ == nullptr) {
    absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Connect(address_, options_);
    if (!cluster.ok()) {
      return absl::Status(
          cluster.status().code(),
          absl::StrCat("cannot reach the cluster's other members: ", cluster.status().message()));
    }
    cluster_ = *std::move(cluster);
  }
  return cluster_.get();
}

absl::StatusOr<std::string> PeerCalls::Call(const PeerTarget& target, std::string_view function,
                                            std::string_view args, absl::Time deadline) {
  return Run(target, function, args, deadline, /*replica=*/false);
}

absl::StatusOr<std::string> PeerCalls::Replicate(const std::string& member,
                                                 std::string_view function, std::string_view args,
                                                 absl::Time deadline) {
  return Run(PeerTarget::Member(member), function, args, deadline, /*replica=*/true);
}

absl::StatusOr<std::string> PeerCalls::Run(const PeerTarget& target, std::string_view function,
                                           std::string_view args, absl::Time deadline,
                                           bool replica) {
  auto time_left = [&]() -> absl::StatusOr<absl::Duration> {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("no time left to call ", std::string(function), " on a peer"));
    }
    return left;
  };
  ARDMA_RETURN_IF_ERROR(time_left().status());
  ARDMA_ASSIGN_OR_RETURN(Cluster * cluster, Connected());
  ARDMA_ASSIGN_OR_RETURN(absl::Duration left, time_left());
  // The callee gets what is left of the caller's deadline; an endless one stays the client's
  // default timeout.
  auto execute = [&](Client& client) -> absl::StatusOr<std::string> {
    absl::StatusOr<absl::Duration> now_left = time_left();
    if (!now_left.ok()) return now_left.status();
    CallOptions options;
    options.timeout = *now_left == absl::InfiniteDuration() ? absl::ZeroDuration() : *now_left;
    options.peer = true;
    options.replica = replica;
    absl::StatusOr<std::string> result = client.Execute(function, args, options);
    if (absl::IsUnavailable(result.status())) {
      // The member went away mid-call (or answered so itself): say which.
      const std::string member =
          target.slot.has_value() ? cluster->map()->Owner(*target.slot) : target.member;
      return absl::UnavailableError(absl::StrCat("member ", member, " (", client.address(),
                                                 "): ", result.status().message()));
    }
    return result;
  };
  if (target.slot.has_value()) {
    return RouteToSlot<std::string>(*cluster, *target.slot, left, SlotSubject{"function", function},
                                    execute);
  }
  ARDMA_ASSIGN_OR_RETURN(Client * client, cluster->ForMember(target.member));
  return execute(*client);
}

absl::StatusOr<Client*> PeerCalls::ClientFor(std::string_view id) {
  ARDMA_ASSIGN_OR_RETURN(Cluster * cluster, Connected());
  return cluster->ForMember(id);
}

}  // namespace ardma::cluster
