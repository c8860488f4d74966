// ardma-find's expression and batch encodings, shared by the active function (find_functions.cc)
// and the command line (find_main.cc). The expression is a tree in prefix order; the server walks
// the tree with dfs.find, tests each entry and answers a batch of matches with the walk's cursor.
#ifndef ARDMA_APPS_FIND_FIND_FORMAT_H_
#define ARDMA_APPS_FIND_FIND_FORMAT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/dfs/dfs_format.h"

namespace ardma::find {

enum class Op : uint8_t {
  kAnd = 1, kOr = 2, kNot = 3,
  kName = 10, kIname = 11, kPath = 12, kType = 14, kSize = 15, kMtime = 16, kMmin = 17,
  kNewer = 18, kEmpty = 19, kTrue = 20, kFalse = 21,
  kPrint = 30, kPrint0 = 31,
};

struct Expr {
  Op op = Op::kTrue;
  std::vector<std::unique_ptr<Expr>> kids;  // And/Or: 2, Not: 1
  std::string text;   // glob for name/iname/path
  char type = 'f';    // for kType
  int cmp = 0;        // -1 less, 0 equal, +1 more (size, mtime, mmin)
  uint64_t n = 0;     // size in units, days, minutes
  uint64_t unit = 512;  // size unit in bytes
  absl::Time time;    // kNewer: the reference time
};

struct Request {
  std::string fs;
  std::string root;     // DFS path
  std::string display;  // how the root is printed (e.g. "dfs:/a")
  std::string expr;     // EncodeExpr
  bool implicit_print = true;  // the expression has no action
  uint32_t min_depth = 0, max_depth = UINT32_MAX;
  absl::Time now;       // for -mtime / -mmin, as find's start time
  std::string cursor;   // dfs.find's
  uint32_t max_entries = 4096;  // entries walked per batch
};

struct Match {
  std::string path;
  char terminator = '\n';
};

struct Batch {
  std::vector<Match> matches;
  std::string next;  // cursor; empty when done
  bool done = false;
};

std::string EncodeExpr(const Expr& e);
absl::StatusOr<std::unique_ptr<Expr>> DecodeExpr(std::string_view bytes);
std::string EncodeRequest(const Request& r);
absl::StatusOr<Request> DecodeRequest(std::string_view bytes);
std::string EncodeBatch(const Batch& b);
absl::StatusOr<Batch> DecodeBatch(std::string_view bytes);

// Evaluates `e` on one entry (`path` as printed); appends to `out` what its actions print.
bool Evaluate(const Expr& e, const dfs::FoundEntry& entry, std::string_view path, absl::Time now,
              std::vector<Match>* out);

}  // namespace ardma::find

#endif  // ARDMA_APPS_FIND_FIND_FORMAT_H_
