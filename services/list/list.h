// The list service's algorithm: a lock-free singly linked list in server memory, written once
// against Context, so the same code runs next to the data (active mode) and on a client, one round
// trip per step (RDMA mode). Layout and concurrency rules: list_format.h. The active-code library
// that exposes it (argument parsing and the function table) is list_functions.cc; the typed client
// is ListClient.
//
//   ARDMA_ASSIGN_OR_RETURN(uint64_t header, list::OpenByName(ctx, "jobs", list::Use::kCreate));
//   ARDMA_RETURN_IF_ERROR(list::Append(ctx, header, ListValue(int64_t{42})));
//
// Every function may be called concurrently with any other, by any number of clients and active
// functions. A `header` that holds no list header fails with a stale-root status (root_cache.h).
#ifndef ARDMA_SERVICES_LIST_LIST_H_
#define ARDMA_SERVICES_LIST_LIST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/context/context.h"
#include "services/list/list_format.h"

namespace ardma::list {

// What a call does with a list: read it, change it, or change it and create it if missing.
enum class Use { kRead, kWrite, kCreate };
// The header address of the list `name`; for kCreate, a missing list is created (exactly one of
// several racing creators wins), else NotFound. On a cluster member that does not serve the name's
// slot (for a read: owned or frozen; for a change: owned), the redirect (slots::RedirectOf).
absl::StatusOr<uint64_t> OpenByName(Context& ctx, std::string_view name, Use use);
// The target's header address: its own (unchecked: the list's words say if it moved), or its
// name's.
absl::StatusOr<uint64_t> Resolve(Context& ctx, const Target& target, Use use);

absl::Status Append(Context& ctx, uint64_t header, const ListValue& value);
absl::Status Prepend(Context& ctx, uint64_t header, const ListValue& value);
// The live element at `index`; OutOfRange past the end. Remove also unlinks and frees it.
absl::StatusOr<ListValue> Get(Context& ctx, uint64_t header, uint64_t index);
absl::StatusOr<ListValue> Remove(Context& ctx, uint64_t header, uint64_t index);
absl::StatusOr<uint64_t> Size(Context& ctx, uint64_t header);
// One page of a scan from `cursor`, at most `max_items` values (positive) and about `max_bytes`
// (capped at 8 MiB; at least one value), encoded as list.scan's result (list_format.h).
absl::StatusOr<std::string> Scan(Context& ctx, uint64_t header, const ScanCursor& cursor,
                                 uint32_t max_items, uint32_t max_bytes);

// ---- Moving a list to another server (a cluster's slot moves: docs/cluster.md) ----
//
// The giver seals the list: every link word gets a sealed bit, in list order, so every change
// (which CASes a link word expecting it unsealed) fails from then on and answers a redirect;
// reads go on. The receiver adopts the live values, not served until the map names it. A change
// that linearized before its word was sealed is in what the seal reads.

// Seals the list (its slot `slot` recorded for redirects; sealing a sealed list changes nothing).
absl::Status Seal(Context& ctx, uint64_t header, uint32_t slot);
// A sealed list's live values, in order.
absl::StatusOr<std::vector<ListValue>> Values(Context& ctx, uint64_t header);
// Undoes Seal (a move that failed).
absl::Status Unseal(Context& ctx, uint64_t header);
// Whether the list is served here: once it moved away, or until an adopted one may be served,
// every call on it answers the redirect its slot's fence gives.
absl::Status SetServed(Context& ctx, uint64_t header, bool served);
// On the receiving server: the list `name` of slot `slot` holding `values`, not served (SetServed).
// Reuses (and empties) the list of that name left here. Returns its header.
absl::StatusOr<uint64_t> Adopt(Context& ctx, std::string_view name, uint32_t slot,
                               const std::vector<ListValue>& values);

}  // namespace ardma::list

#endif  // ARDMA_SERVICES_LIST_LIST_H_
