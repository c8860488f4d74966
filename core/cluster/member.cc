#include "core/cluster/member.h"

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/status_macros.h"

namespace ardma::cluster {

bool IsClusterAddress(std::string_view text) { return absl::StartsWith(ToAbsl(text), "etcd://"); }

absl::StatusOr<ClusterAddress> ParseClusterAddress(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("cluster address '", ToAbsl(text), "' ",
                                                   ToAbsl(why),
                                                   " (expected etcd://HOST:PORT[,HOST:PORT...]/NAME)"));
  };
  if (!IsClusterAddress(text)) return bad("does not start with etcd://");
  std::string_view rest = text.substr(7);
  size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash == 0) return bad("names no etcd endpoint");
  ClusterAddress out{std::string(rest.substr(0, slash)), std::string(rest.substr(slash + 1))};
  if (out.name.empty()) return bad("names no cluster");
  for (char ch : out.name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_') {
      return bad("has a cluster name other than letters, digits, '-' and '_'");
    }
  }
  return out;
}

std::string ClusterPrefix(std::string_view name) {
  return absl::StrCat("/ardma/", ToAbsl(name), "/");
}

std::string MembersPrefix(std::string_view name) {
  return absl::StrCat("/ardma/", ToAbsl(name), "/members/");
}
std::string MapKey(std::string_view name) { return absl::StrCat("/ardma/", ToAbsl(name), "/map"); }
std::string ControllerKey(std::string_view name) {
  return absl::StrCat("/ardma/", ToAbsl(name), "/controller");
}
std::string SyncedPrefix(std::string_view name) {
  return absl::StrCat("/ardma/", ToAbsl(name), "/synced/");
}

std::string MemberInfo::ToJson() const {
  return nlohmann::json{{"id", id}, {"addresses", addresses}}.dump();
}

absl::StatusOr<MemberInfo> MemberInfo::Parse(std::string_view text) {
  nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object() || !json.contains("id") ||
      !json["id"].is_string() || !json.contains("addresses") || !json["addresses"].is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a member record is not {\"id\": ..., \"addresses\": {...}}: ", ToAbsl(text)));
  }
  MemberInfo out;
  out.id = json["id"];
  for (const auto& [transport, address] : json["addresses"].items()) {
    if (!address.is_string()) return absl::InvalidArgumentError("a member address is not text");
    out.addresses[transport] = address;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Member>> Member::Join(MemberOptions options) {
  if (options.self.id.empty()) return absl::InvalidArgumentError("a member needs an id");
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> etcd,
                         EtcdClient::Connect(options.where.endpoints));
  std::unique_ptr<Member> member(new Member(std::move(options), std::move(etcd)));
  const absl::Time asked = absl::Now();
  ARDMA_RETURN_IF_ERROR(member->Register());
  member->ReadMap();
  member->Held(asked, member->options_.ttl);
  member->thread_ = std::thread([m = member.get()] { m->Run(); });
  return member;
}

absl::Status Member::Register() {
  const MemberOptions& o = options_;
  ARDMA_ASSIGN_OR_RETURN(int64_t lease, etcd_->GrantLease(o.ttl));
  std::string key = MembersPrefix(o.where.name) + o.self.id;
  absl::StatusOr<bool> created = etcd_->PutIf(key, 0, o.self.ToJson(), lease);
  if (!created.ok() || !*created) {
    (void)etcd_->RevokeLease(lease);
    if (!created.ok()) return created.status();
    absl::StatusOr<std::optional<KeyValue>> holder = etcd_->Get(key);
    return absl::AlreadyExistsError(absl::StrCat(
        "server id ", o.self.id, " is already registered in cluster ", o.where.name,
        holder.ok() && holder->has_value() ? absl::StrCat(" by ", (*holder)->value) : "",
        " (another live server started from the same memory file?)"));
  }
  lease_ = lease;
  return absl::OkStatus();
}

void Member::ReadMap() {
  absl::StatusOr<std::optional<KeyValue>> kv = etcd_->Get(MapKey(options_.where.name));
  if (!kv.ok() || !kv->has_value()) return;  // etcd away (the cached map stays), or no map yet
  {
    absl::MutexLock lock(&mu_);
    if ((*kv)->mod_revision == map_revision_) return;
    map_revision_ = (*kv)->mod_revision;
  }
  absl::StatusOr<SlotMap> parsed = SlotMap::Parse((*kv)->value);
  if (!parsed.ok()) {
    ARDMA_LOG(kError, "cluster %s: the slot map at revision %d is invalid, keeping the last: %s",
              options_.where.name, (*kv)->mod_revision, parsed.status().message());
    return;
  }
  auto map = std::make_shared<const SlotMap>(*std::move(parsed));
  {
    absl::MutexLock lock(&mu_);
    if (map_ != nullptr && map->epoch() < map_->epoch()) return;
    map_ = map;
  }
  if (options_.on_map) {
    if (absl::Status s = options_.on_map(*map); !s.ok()) {
      ARDMA_LOG(kError, "cluster %s: taking the slot map of epoch %d: %s", options_.where.name,
                map->epoch(), s.message());
      absl::MutexLock lock(&mu_);
      map_revision_ = 0;  // try again at the next poll
    }
  }
}

std::unique_ptr<EtcdWatch> Member::WatchMap() {
  int64_t revision = 0;
  if (!etcd_->GetPrefix(MapKey(options_.where.name), &revision).ok()) return nullptr;
  ReadMap();
  absl::StatusOr<std::unique_ptr<EtcdWatch>> watch =
      etcd_->Watch(MapKey(options_.where.name), revision + 1);
  if (!watch.ok()) return nullptr;
  absl::MutexLock lock(&mu_);
  if (leaving_) return nullptr;  // Leave found no watch to wake
  watch_ = watch->get();
  return *std::move(watch);
}

void Member::ForgetWatch(std::unique_ptr<EtcdWatch>& watch) {
  {
    absl::MutexLock lock(&mu_);
    watch_ = nullptr;
  }
  watch.reset();
}

void Member::Run() {
  absl::Time next_renewal = absl::Now() + options_.ttl / 3;
  bool warned = false;
  std::unique_ptr<EtcdWatch> watch;
  auto leaving = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return leaving_; };
  for (;;) {
    if (watch == nullptr) watch = WatchMap();
    if (watch != nullptr) {
      absl::StatusOr<int64_t> changed =
          watch->Next(std::max(absl::ZeroDuration(), next_renewal - absl::Now()));
      if (!changed.ok()) {
        ForgetWatch(watch);  // etcd went away: read and watch again
      } else if (*changed != 0) {
        ReadMap();
      }
    }
    {
      absl::MutexLock lock(&mu_);
      if (watch == nullptr) {
        mu_.AwaitWithDeadline(absl::Condition(&leaving),
                              std::min(next_renewal, absl::Now() + options_.retry_interval));
      }
      if (leaving_) break;
    }
    if (absl::Now() < next_renewal) continue;
    const absl::Time asked = absl::Now();
    next_renewal = asked + options_.ttl / 3;
    absl::StatusOr<absl::Duration> ttl = etcd_->KeepAlive(lease_);
    if (absl::IsNotFound(ttl.status())) {
      // The lease ran out (etcd was away, or this process was stopped): register again. The
      // slots' replicas may have been given writes meanwhile, so on_lease is not called again:
      // this member stays fenced (takes no replicated write) until it restarts.
      ARDMA_LOG(kWarning, "cluster %s: membership lapsed, registering again%s",
                options_.where.name,
                options_.on_lease ? " (replicated writes stay refused until a restart)" : "");
      if (options_.on_lapse) options_.on_lapse();
      if (absl::Status s = Register(); !s.ok()) {
        ARDMA_LOG(kError, "cluster %s: %s", options_.where.name, s.message());
      }
    } else if (!ttl.ok() && !warned) {
      ARDMA_LOG(kWarning, "cluster %s: cannot renew the membership: %s", options_.where.name,
                ttl.status().message());
      warned = true;
    } else if (ttl.ok()) {
      warned = false;
      renewals_.fetch_add(1, std::memory_order_relaxed);
      Held(asked, std::min(*ttl, options_.ttl));
    }
  }
  ForgetWatch(watch);
}

void Member::Held(absl::Time asked, absl::Duration ttl) {
  if (options_.on_lease) options_.on_lease(asked + ttl - options_.ttl / 3);
}

std::shared_ptr<const SlotMap> Member::map() const {
  absl::MutexLock lock(&mu_);
  return map_;
}

void Member::Leave() {
  {
    absl::MutexLock lock(&mu_);
    if (leaving_) return;
    leaving_ = true;
    if (watch_ != nullptr) watch_->Wake();
  }
  if (thread_.joinable()) thread_.join();
  if (lease_ != 0) (void)etcd_->RevokeLease(lease_);
}

Member::~Member() { Leave(); }

}  // namespace ardma::cluster
