// The list service's algorithm: a lock-free singly linked list in server memory, written once
// against Context, so the same code runs next to the data (active mode) and on a client, one round
// trip per step (RDMA mode). Layout and concurrency rules: list_format.h. The active-code library
// that exposes it (argument parsing and the function table) is list_functions.cc; the typed client
// is ListClient.
//
//   ARDMA_ASSIGN_OR_RETURN(uint64_t header, list::OpenByName(ctx, "jobs", /*create=*/true));
//   ARDMA_RETURN_IF_ERROR(list::Append(ctx, header, ListValue(int64_t{42})));
//
// Every function may be called concurrently with any other, by any number of clients and active
// functions. A `header` that holds no list header fails with a stale-root status (root_cache.h).
#ifndef ARDMA_SERVICES_LIST_LIST_H_
#define ARDMA_SERVICES_LIST_LIST_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/context/context.h"
#include "services/list/list_format.h"

namespace ardma::list {

// The header address of the list `name`; with `create`, a missing list is created (exactly one
// of several racing creators wins). NotFound without `create`.
absl::StatusOr<uint64_t> OpenByName(Context& ctx, std::string_view name, bool create);
// The target's header address: its own, or its name's.
absl::StatusOr<uint64_t> Resolve(Context& ctx, const Target& target, bool create);

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

}  // namespace ardma::list

#endif  // ARDMA_SERVICES_LIST_LIST_H_
