// ListClient: what an application embeds to use named linked lists in an ardmad's memory.
//
//   ARDMA_ASSIGN_OR_RETURN(auto client, ardma::Client::Connect("127.0.0.1:15712"));
//   ardma::list::ListClient lists(client.get(), ardma::Mode::kActive);
//   ARDMA_RETURN_IF_ERROR(lists.Append("jobs", int64_t{42}));
//   ARDMA_RETURN_IF_ERROR(lists.Append("jobs", std::string("payload")));
//   ARDMA_ASSIGN_OR_RETURN(ardma::list::ListValue first, lists.Get("jobs", 0));   // 42
//   ARDMA_ASSIGN_OR_RETURN(uint64_t n, lists.Size("jobs"));                       // 2
//
// Mode::kActive: every call is one EXECUTE (one round trip); the "list" library is shipped on
// first use. Mode::kRdma: the same functions run here over one-sided operations; append and get
// cost one READ per node walked (the Active RDMA paper's comparison). Both modes share one layout
// (list_format.h), so clients in different modes can work on the same lists at once.
//
// Errors: InvalidArgument (bad name, value over kMaxValueBytes), NotFound (reading a list that was
// never written), OutOfRange (index past the end), ResourceExhausted (server memory full), and the
// Client's transport errors.
//
// Borrows the Client for its lifetime. Thread-safe.
#ifndef ARDMA_SERVICES_LIST_LIST_CLIENT_H_
#define ARDMA_SERVICES_LIST_LIST_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/active/active_library.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/client/servers.h"
#include "services/list/list.h"
#include "services/list/list_format.h"
#include "services/root_cache.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(list);

namespace ardma::list {

class ListClient {
 public:
  ListClient(Client* client, Mode mode, CallOptions options = {})
      : one_(std::make_unique<OneServer>(client)), servers_(one_.get()), mode_(mode),
        options_(options) {}
  // Over a cluster (a cluster::Cluster as the Servers) each list lives whole on the server that
  // owns its name's slot (namespace "list").
  ListClient(Servers* servers, Mode mode, CallOptions options = {})
      : servers_(servers), mode_(mode), options_(options) {}

  // Adds at the tail (walking the list, as in the Active RDMA paper) or at the head. Creates the list.
  absl::Status Append(std::string_view list, const ListValue& value);
  absl::Status Prepend(std::string_view list, const ListValue& value);
  // The element at `index` (0 = head).
  absl::StatusOr<ListValue> Get(std::string_view list, uint64_t index);
  // Removes the element at `index` and returns it.
  absl::StatusOr<ListValue> Remove(std::string_view list, uint64_t index);
  absl::StatusOr<uint64_t> Size(std::string_view list);
  // One page of elements from `cursor` (default: the start): at most `max_items`, and no more than
  // `max_bytes` of values unless a single element is larger. Pass page.next to continue; a page
  // with next.done is the last.
  absl::StatusOr<ScanPage> Scan(std::string_view list, const ScanCursor& cursor = {},
                                uint32_t max_items = 1024, uint32_t max_bytes = 1u << 20);
  // Every element, page by page.
  absl::StatusOr<std::vector<ListValue>> ReadAll(std::string_view list);

  Mode mode() const { return mode_; }

 private:
  // Runs `function` with args = target + `rest` on the server that holds `list`, following
  // redirects. In RDMA mode the target is the list's header address, resolved once per name and
  // server (and created for Use::kCreate).
  absl::StatusOr<std::string> Run(std::string_view function, std::string_view list,
                                  std::string_view rest, Use use);
  // The header address of `list` on `client`'s server, resolved here, one-sidedly.
  absl::StatusOr<uint64_t> ResolveHeader(Client& client, std::string_view list, Use use);

  std::unique_ptr<OneServer> one_;  // when given one Client
  Servers* const servers_;
  const Mode mode_;
  const CallOptions options_;
  RootCache<uint64_t> headers_;  // RDMA mode: header addresses by server and list name
};

}  // namespace ardma::list

#endif  // ARDMA_SERVICES_LIST_LIST_CLIENT_H_
