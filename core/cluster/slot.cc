#include "core/cluster/slot.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace ardma::cluster {

SlotMap SlotMap::AllTo(std::string server) {
  return SlotMap(1, {SlotRange{0, kSlots - 1, std::move(server)}});
}

SlotMap SlotMap::Even(const std::vector<std::string>& servers, uint64_t epoch) {
  std::vector<SlotRange> ranges;
  uint32_t n = static_cast<uint32_t>(servers.size());
  for (uint32_t i = 0; i < n; ++i) {
    ranges.push_back({kSlots * i / n, kSlots * (i + 1) / n - 1, servers[i]});
  }
  return SlotMap(epoch, std::move(ranges));
}

uint32_t SlotMap::SlotCount(std::string_view server) const {
  uint32_t n = 0;
  for (const SlotRange& r : ranges_) {
    if (r.server == server) n += r.last - r.first + 1;
  }
  return n;
}

absl::Status SlotMap::Validate(const std::vector<SlotRange>& ranges) {
  uint32_t next = 0;
  for (const SlotRange& r : ranges) {
    if (r.server.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("slots ", r.first, "-", r.last, " name no server"));
    }
    if (r.first > r.last || r.last >= kSlots) {
      return absl::InvalidArgumentError(
          absl::StrCat("slot range ", r.first, "-", r.last, " is not within 0-", kSlots - 1));
    }
    if (r.first < next) {
      return absl::InvalidArgumentError(absl::StrCat(
          "slot ", r.first, " has two owners (ranges overlap or are out of order)"));
    }
    if (r.first > next) {
      return absl::InvalidArgumentError(absl::StrCat("slot ", next, " has no owner"));
    }
    next = r.last + 1;
  }
  if (next != kSlots) return absl::InvalidArgumentError(absl::StrCat("slot ", next, " has no owner"));
  return absl::OkStatus();
}

absl::Status SlotMap::ValidateReplicas(const Replicas& replicas) {
  for (const auto& [owner, list] : replicas) {
    if (owner.empty() || list.empty()) {
      return absl::InvalidArgumentError("a replica list names no owner or no replica");
    }
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i].empty() || list[i] == owner) {
        return absl::InvalidArgumentError(
            absl::StrCat("server ", owner, " cannot be its own replica, nor an unnamed one"));
      }
      if (std::find(list.begin(), list.begin() + i, list[i]) != list.begin() + i) {
        return absl::InvalidArgumentError(
            absl::StrCat("server ", list[i], " is named twice as a replica of ", owner));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SlotMap> SlotMap::Parse(std::string_view text) {
  using Json = nlohmann::json;
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError("the slot map is not a JSON object");
  }
  if (!json.contains("epoch") || !json["epoch"].is_number_unsigned() || json["epoch"] == 0) {
    return absl::InvalidArgumentError("the slot map has no positive \"epoch\"");
  }
  if (!json.contains("ranges") || !json["ranges"].is_array()) {
    return absl::InvalidArgumentError("the slot map has no \"ranges\" array");
  }
  std::vector<SlotRange> ranges;
  for (const Json& r : json["ranges"]) {
    if (!r.is_object() || !r.contains("first") || !r["first"].is_number_unsigned() ||
        !r.contains("last") || !r["last"].is_number_unsigned() || !r.contains("server") ||
        !r["server"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("slot map range ", r.dump(), " needs \"first\", \"last\" and \"server\""));
    }
    uint64_t first = r["first"], last = r["last"];
    if (first >= kSlots || last >= kSlots) {
      return absl::InvalidArgumentError(
          absl::StrCat("slot range ", first, "-", last, " is not within 0-", kSlots - 1));
    }
    ranges.push_back({static_cast<uint32_t>(first), static_cast<uint32_t>(last), r["server"]});
  }
  ARDMA_RETURN_IF_ERROR(Validate(ranges));
  Replicas replicas;
  if (json.contains("replicas")) {
    const Json& all = json["replicas"];
    if (!all.is_object()) {
      return absl::InvalidArgumentError("the slot map's \"replicas\" is not an object");
    }
    for (const auto& [owner, list] : all.items()) {
      if (!list.is_array()) {
        return absl::InvalidArgumentError(
            absl::StrCat("the replicas of ", owner, " are not a list"));
      }
      for (const Json& id : list) {
        if (!id.is_string()) {
          return absl::InvalidArgumentError(absl::StrCat("a replica of ", owner, " is not an id"));
        }
        replicas[owner].push_back(id.get<std::string>());
      }
    }
    ARDMA_RETURN_IF_ERROR(ValidateReplicas(replicas));
  }
  uint32_t replication = 0;
  if (json.contains("replication")) {
    if (!json["replication"].is_number_unsigned() || json["replication"].get<uint64_t>() > 64) {
      return absl::InvalidArgumentError("the slot map's \"replication\" is not a count (0-64)");
    }
    replication = json["replication"].get<uint32_t>();
  }
  return SlotMap(json["epoch"].get<uint64_t>(), std::move(ranges), std::move(replicas),
                 replication);
}

std::string SlotMap::ToJson() const {
  nlohmann::json ranges = nlohmann::json::array();
  for (const SlotRange& r : ranges_) {
    ranges.push_back({{"first", r.first}, {"last", r.last}, {"server", r.server}});
  }
  nlohmann::json json{{"epoch", epoch_}, {"ranges", ranges}};
  if (!replicas_.empty()) json["replicas"] = replicas_;
  if (replication_ != 0) json["replication"] = replication_;
  return json.dump();
}

std::vector<std::string> SlotMap::ReplicasOf(std::string_view server) const {
  auto it = replicas_.find(std::string(server));
  return it == replicas_.end() ? std::vector<std::string>() : it->second;
}

std::vector<bool> SlotMap::SlotsReplicatedOn(std::string_view server) const {
  std::vector<bool> on(slots::kSlots, false);
  for (const SlotRange& range : ranges_) {
    std::vector<std::string> replicas = ReplicasOf(range.server);
    if (std::find(replicas.begin(), replicas.end(), server) == replicas.end()) continue;
    for (uint32_t slot = range.first; slot <= range.last; ++slot) on[slot] = true;
  }
  return on;
}

absl::StatusOr<SlotMap> SlotMap::WithReplicas(uint32_t count) const {
  std::vector<std::string> owners = Servers();  // sorted
  if (count >= owners.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        count, count == 1 ? " replica" : " replicas", " need more than ", owners.size(),
        owners.size() == 1 ? " server" : " servers", " owning slots"));
  }
  Replicas replicas;
  for (size_t i = 0; i < owners.size() && count > 0; ++i) {
    for (uint32_t k = 1; k <= count; ++k) {
      replicas[owners[i]].push_back(owners[(i + k) % owners.size()]);
    }
  }
  return SlotMap(epoch_, ranges_, std::move(replicas), count);
}

std::optional<SlotMap> SlotMap::FailedOver(const std::set<std::string>& live,
                                           const Pairs* synced) const {
  std::vector<SlotRange> ranges = ranges_;
  Replicas replicas = replicas_;
  bool changed = false;
  for (const std::string& owner : Servers()) {
    if (live.contains(owner)) continue;
    const std::vector<std::string> list = ReplicasOf(owner);
    auto heir = std::find_if(list.begin(), list.end(), [&](const std::string& r) {
      return live.contains(r) && (synced == nullptr || synced->contains({owner, r}));
    });
    if (heir == list.end()) continue;
    for (SlotRange& r : ranges) {
      if (r.server == owner) r.server = *heir;
    }
    replicas.erase(owner);
    changed = true;
  }
  // Adjacent ranges of one owner merge (as WithRange makes them).
  std::vector<SlotRange> merged;
  for (const SlotRange& r : ranges) {
    if (!merged.empty() && merged.back().server == r.server) {
      merged.back().last = r.last;
    } else {
      merged.push_back(r);
    }
  }
  std::set<std::string> placed;
  for (const SlotRange& r : merged) placed.insert(r.server);
  for (auto it = replicas.begin(); it != replicas.end();) {
    changed |= std::erase_if(it->second, [&](const std::string& r) {
                 return !live.contains(r) || r == it->first;
               }) > 0;
    placed.insert(it->second.begin(), it->second.end());
    it = it->second.empty() ? replicas.erase(it) : std::next(it);
  }
  std::set<std::string> owners;
  for (const SlotRange& r : merged) owners.insert(r.server);
  for (const std::string& idle : live) {
    if (placed.contains(idle)) continue;
    // The owner with the fewest replicas, if below the count (ties: the first in id order).
    std::optional<std::string> neediest;
    size_t fewest = replication_;
    for (const std::string& owner : owners) {
      size_t has = replicas.contains(owner) ? replicas.at(owner).size() : 0;
      if (has < fewest) {
        fewest = has;
        neediest = owner;
      }
    }
    if (!neediest.has_value()) continue;
    replicas[*neediest].push_back(idle);
    placed.insert(idle);
    changed = true;
  }
  if (!changed) return std::nullopt;
  return SlotMap(epoch_ + 1, std::move(merged), std::move(replicas), replication_);
}

SlotMap::Replicas SlotMap::KeptFor(const std::vector<SlotRange>& ranges) const {
  Replicas kept;
  for (const auto& [owner, list] : replicas_) {
    bool owns = std::any_of(ranges.begin(), ranges.end(),
                            [&](const SlotRange& r) { return r.server == owner; });
    if (owns) kept[owner] = list;
  }
  return kept;
}

const std::string& SlotMap::Owner(uint32_t slot) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), slot,
                             [](uint32_t s, const SlotRange& r) { return s < r.first; });
  return std::prev(it)->server;
}

std::vector<std::string> SlotMap::Servers() const {
  std::vector<std::string> out;
  for (const SlotRange& r : ranges_) out.push_back(r.server);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

SlotMap SlotMap::WithRange(uint32_t first, uint32_t last, const std::string& server) const {
  std::vector<SlotRange> out;
  auto add = [&out](uint32_t f, uint32_t l, const std::string& s) {
    if (!out.empty() && out.back().server == s && out.back().last + 1 == f) {
      out.back().last = l;
    } else {
      out.push_back({f, l, s});
    }
  };
  bool placed = false;
  for (const SlotRange& r : ranges_) {
    if (r.last < first || r.first > last) {  // untouched
      if (!placed && r.first > last) {
        add(first, last, server);
        placed = true;
      }
      add(r.first, r.last, r.server);
      continue;
    }
    if (r.first < first) add(r.first, first - 1, r.server);
    if (!placed) {
      add(first, last, server);
      placed = true;
    }
    if (r.last > last) add(last + 1, r.last, r.server);
  }
  if (!placed) add(first, last, server);
  Replicas kept = KeptFor(out);
  return SlotMap(epoch_ + 1, std::move(out), std::move(kept), replication_);
}

SlotMap SlotMap::WithSlots(const std::vector<uint32_t>& slots, const std::string& server) const {
  std::vector<const std::string*> owners(kSlots);
  for (const SlotRange& r : ranges_) {
    for (uint32_t s = r.first; s <= r.last; ++s) owners[s] = &r.server;
  }
  for (uint32_t s : slots) owners[s] = &server;
  std::vector<SlotRange> out;
  for (uint32_t s = 0; s < kSlots; ++s) {
    if (!out.empty() && out.back().server == *owners[s]) {
      out.back().last = s;
    } else {
      out.push_back({s, s, *owners[s]});
    }
  }
  Replicas kept = KeptFor(out);
  return SlotMap(epoch_ + 1, std::move(out), std::move(kept), replication_);
}

std::vector<uint32_t> SlotMap::SlotsOf(std::string_view server) const {
  std::vector<uint32_t> out;
  for (const SlotRange& r : ranges_) {
    if (r.server != server) continue;
    for (uint32_t s = r.first; s <= r.last; ++s) out.push_back(s);
  }
  return out;
}

}  // namespace ardma::cluster
