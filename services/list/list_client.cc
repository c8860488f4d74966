#include "services/list/list_client.h"

#include "absl/strings/str_cat.h"
#include "core/client/remote_context.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/list/list.h"

namespace ardma::list {

absl::StatusOr<uint64_t> ListClient::ResolveHeader(Client& client, std::string_view list,
                                                   Use use) {
  RemoteContext ctx(&client, {&active_libraries::list()}, options_);
  return OpenByName(ctx, list, use);
}

absl::StatusOr<std::string> ListClient::Run(std::string_view function, std::string_view list,
                                            std::string_view rest, Use use) {
  ARDMA_RETURN_IF_ERROR(CheckName(list));
  auto on = [&](Client& client) -> absl::StatusOr<std::string> {
    auto attempt = [&](std::optional<uint64_t> cached) -> absl::StatusOr<std::string> {
      Target target{list, 0};
      if (mode_ == Mode::kRdma) {
        if (cached.has_value()) {
          target.header = *cached;
        } else {
          ARDMA_ASSIGN_OR_RETURN(target.header, ResolveHeader(client, list, use));
          headers_.Store(ServerScopedName(client, list), target.header);
        }
      }
      std::string args;
      EncodeTarget(target, &args);
      args.append(rest);
      return Invoke(client, mode_, active_libraries::list(), function, args, options_);
    };
    if (mode_ == Mode::kActive) return attempt(std::nullopt);
    return headers_.Run<std::string>(ServerScopedName(client, list), attempt);
  };
  return RouteToSlot<std::string>(
      *servers_, slots::SlotOf(kListSpace, list),
      options_.timeout > absl::ZeroDuration() ? options_.timeout : absl::Seconds(30),
      SlotSubject{"list", list}, on);
}

absl::Status ListClient::Append(std::string_view list, const ListValue& value) {
  std::string rest;
  EncodeValue(value, &rest);
  return Run("list.append", list, rest, Use::kCreate).status();
}

absl::Status ListClient::Prepend(std::string_view list, const ListValue& value) {
  std::string rest;
  EncodeValue(value, &rest);
  return Run("list.prepend", list, rest, Use::kCreate).status();
}

namespace {
std::string IndexArg(uint64_t index) {
  std::string out;
  wire::ByteWriter(&out).U64(index);
  return out;
}
}  // namespace

absl::StatusOr<ListValue> ListClient::Get(std::string_view list, uint64_t index) {
  ARDMA_ASSIGN_OR_RETURN(std::string result,
                         Run("list.get", list, IndexArg(index), Use::kRead));
  return DecodeValueResult(result);
}

absl::StatusOr<ListValue> ListClient::Remove(std::string_view list, uint64_t index) {
  ARDMA_ASSIGN_OR_RETURN(std::string result,
                         Run("list.remove", list, IndexArg(index), Use::kWrite));
  return DecodeValueResult(result);
}

absl::StatusOr<uint64_t> ListClient::Size(std::string_view list) {
  ARDMA_ASSIGN_OR_RETURN(std::string result, Run("list.size", list, "", Use::kRead));
  wire::ByteReader r(result);
  uint64_t n;
  if (!r.U64(&n) || !r.AtEnd()) return absl::DataLossError("list.size: bad result");
  return n;
}

absl::StatusOr<ScanPage> ListClient::Scan(std::string_view list, const ScanCursor& cursor,
                                          uint32_t max_items, uint32_t max_bytes) {
  ARDMA_ASSIGN_OR_RETURN(std::string result,
                         Run("list.scan", list, EncodeScanRest(cursor, max_items, max_bytes),
                             Use::kRead));
  return DecodeScanResult(result);
}

absl::StatusOr<std::vector<ListValue>> ListClient::ReadAll(std::string_view list) {
  std::vector<ListValue> all;
  ScanCursor cursor;
  do {
    ARDMA_ASSIGN_OR_RETURN(ScanPage page, Scan(list, cursor));
    for (auto& v : page.values) all.push_back(std::move(v));
    cursor = page.next;
  } while (!cursor.done);
  return all;
}

}  // namespace ardma::list
