#include "services/list/list_client.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/client/remote_context.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"

namespace ardma::list {

absl::StatusOr<uint64_t> ListClient::HeaderAddress(std::string_view list, bool create) {
  ARDMA_RETURN_IF_ERROR(CheckName(list));
  {
    absl::MutexLock lock(&mu_);
    auto it = headers_.find(ToAbsl(list));
    if (it != headers_.end()) return it->second;
  }
  RemoteContext ctx(client_, {&active_libraries::list()}, options_);
  absl::StatusOr<uint64_t> header =
      heap::GetRoot(ctx, absl::StrCat(ToAbsl(kRootPrefix), ToAbsl(list)));
  if (absl::IsNotFound(header.status())) {
    if (!create) return absl::NotFoundError(absl::StrCat("no list named '", ToAbsl(list), "'"));
    std::string args;
    wire::ByteWriter(&args).Str16(list);
    ARDMA_ASSIGN_OR_RETURN(
        std::string result,
        Invoke(*client_, Mode::kRdma, active_libraries::list(), "list.open", args, options_));
    wire::ByteReader r(result);
    uint64_t addr;
    if (!r.U64(&addr)) return absl::DataLossError("list.open: bad result");
    header = addr;
  }
  if (header.ok()) {
    absl::MutexLock lock(&mu_);
    headers_.emplace(std::string(list), *header);
  }
  return header;
}

absl::StatusOr<std::string> ListClient::Run(std::string_view function, std::string_view list,
                                            std::string_view rest, bool create) {
  Target target{list, 0};
  if (mode_ == Mode::kRdma) {
    ARDMA_ASSIGN_OR_RETURN(target.header, HeaderAddress(list, create));
  } else {
    ARDMA_RETURN_IF_ERROR(CheckName(list));
  }
  std::string args;
  EncodeTarget(target, &args);
  args.append(rest);
  absl::StatusOr<std::string> result =
      Invoke(*client_, mode_, active_libraries::list(), function, args, options_);
  if (mode_ == Mode::kRdma && absl::IsInvalidArgument(result.status()) &&
      absl::StrContains(result.status().message(), "no list header")) {
    // The cached address went stale (the server restarted without its memory file): resolve the
    // name again, once.
    {
      absl::MutexLock lock(&mu_);
      headers_.erase(ToAbsl(list));
    }
    return Run(function, list, rest, create);
  }
  return result;
}

absl::Status ListClient::Append(std::string_view list, const ListValue& value) {
  std::string rest;
  EncodeValue(value, &rest);
  return Run("list.append", list, rest, /*create=*/true).status();
}

absl::Status ListClient::Prepend(std::string_view list, const ListValue& value) {
  std::string rest;
  EncodeValue(value, &rest);
  return Run("list.prepend", list, rest, /*create=*/true).status();
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
                         Run("list.get", list, IndexArg(index), /*create=*/false));
  return DecodeValueResult(result);
}

absl::StatusOr<ListValue> ListClient::Remove(std::string_view list, uint64_t index) {
  ARDMA_ASSIGN_OR_RETURN(std::string result,
                         Run("list.remove", list, IndexArg(index), /*create=*/false));
  return DecodeValueResult(result);
}

absl::StatusOr<uint64_t> ListClient::Size(std::string_view list) {
  ARDMA_ASSIGN_OR_RETURN(std::string result, Run("list.size", list, "", /*create=*/false));
  wire::ByteReader r(result);
  uint64_t n;
  if (!r.U64(&n) || !r.AtEnd()) return absl::DataLossError("list.size: bad result");
  return n;
}

absl::StatusOr<ScanPage> ListClient::Scan(std::string_view list, const ScanCursor& cursor,
                                          uint32_t max_items, uint32_t max_bytes) {
  ARDMA_ASSIGN_OR_RETURN(std::string result,
                         Run("list.scan", list, EncodeScanRest(cursor, max_items, max_bytes),
                             /*create=*/false));
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
