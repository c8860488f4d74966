// `ardma list push|pop|len|range NAME ...`: the list service at a shell, as redis-cli's RPUSH,
// LPOP, LLEN and LRANGE, on one server or, with --server etcd://HOST:PORT/NAME, on a cluster
// (each list lives whole on the owner of its name's slot; docs/cluster.md).
#include <cstdio>
#include <variant>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "services/list/list_client.h"
#include "tools/ardma_cli.h"

namespace ardma::cli {
namespace {

void PrintValue(const list::ListValue& value) {
  if (const int64_t* n = std::get_if<int64_t>(&value)) {
    std::printf("%lld\n", static_cast<long long>(*n));
  } else {
    const std::string& s = std::get<std::string>(value);
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fputc('\n', stdout);
  }
}

// Prints elements START..STOP (inclusive; STOP -1: to the end), page by page.
absl::Status PrintRange(list::ListClient& lists, const std::string& name, uint64_t start,
                        int64_t stop) {
  list::ScanCursor cursor;
  uint64_t index = 0;
  while (!cursor.done && (stop < 0 || index <= static_cast<uint64_t>(stop))) {
    ARDMA_ASSIGN_OR_RETURN(list::ScanPage page, lists.Scan(name, cursor));
    for (const list::ListValue& value : page.values) {
      if (index >= start && (stop < 0 || index <= static_cast<uint64_t>(stop))) PrintValue(value);
      ++index;
    }
    cursor = page.next;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunListCommand(const Options& opt, const std::vector<std::string>& args) {
  const std::string cmd = args.size() > 1 ? args[1] : "";
  const bool ok_shape = (cmd == "push" && args.size() >= 4) ||
                        ((cmd == "pop" || cmd == "len") && args.size() == 3) ||
                        (cmd == "range" && args.size() >= 3 && args.size() <= 5);
  constexpr char kUsage[] =
      "usage: ardma list push NAME VALUE... | pop NAME | len NAME | range NAME [START [STOP]]";
  if (!ok_shape) return Usage(kUsage);
  uint64_t start = 0;
  int64_t stop = -1;
  if (cmd == "range" && ((args.size() > 3 && !absl::SimpleAtoi(args[3], &start)) ||
                         (args.size() > 4 && (!absl::SimpleAtoi(args[4], &stop) || stop < -1)))) {
    return Usage("ardma list range: START is an index from 0, STOP an index or -1 (the end)");
  }
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Servers> servers, ConnectServices(opt));
  list::ListClient lists(servers.get(), opt.mode);
  const std::string& name = args[2];
  if (cmd == "push") {  // each VALUE at the tail, in order; prints the new length
    for (size_t i = 3; i < args.size(); ++i) {
      ARDMA_RETURN_IF_ERROR(lists.Append(name, list::ListValue(args[i])));
    }
    ARDMA_ASSIGN_OR_RETURN(uint64_t n, lists.Size(name));
    std::printf("%llu\n", static_cast<unsigned long long>(n));
  } else if (cmd == "pop") {  // the head
    ARDMA_ASSIGN_OR_RETURN(list::ListValue value, lists.Remove(name, 0));
    PrintValue(value);
  } else if (cmd == "len") {
    ARDMA_ASSIGN_OR_RETURN(uint64_t n, lists.Size(name));
    std::printf("%llu\n", static_cast<unsigned long long>(n));
  } else {
    ARDMA_RETURN_IF_ERROR(PrintRange(lists, name, start, stop));
  }
  return absl::OkStatus();
}

}  // namespace ardma::cli
