// ardma-find's expression and batch encodings, shared by the active function (find_functions.cc)
// and the command line (find_main.cc). The expression is a tree in prefix order; the server walks
// the tree with dfs.find, tests each entry and answers a batch of matches with the walk's cursor.
#ifndef ARDMA_APPS_FIND_FIND_FORMAT_H_
#define ARDMA_APPS_FIND_FIND_FORMAT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/dfs/dfs_format.h"

namespace ardma::find {

enum class Op : uint8_t {
  kAnd = 1,
  kOr = 2,
  kNot = 3,
  kComma = 4,
  kName = 10,
  kIname = 11,
  kPath = 12,
  kIpath = 13,
  kType = 14,
  kSize = 15,
  kMtime = 16,
  kMmin = 17,
  kNewer = 18,
  kEmpty = 19,
  kTrue = 20,
  kFalse = 21,
  kRegex = 22,
  kIregex = 23,
  kPrune = 24,
  kPrint = 30,
  kPrint0 = 31,
  kPrintf = 32,
  kLs = 33,
  // Run here, on the client (they need its processes or change the tree): the walk's entries
  // come to the client and the whole expression is evaluated there.
  kExec = 40,
  kOk = 41,
  kDelete = 42,
};

struct Expr {
  Op op = Op::kTrue;
  std::vector<std::unique_ptr<Expr>> kids;  // And/Or/Comma: 2, Not: 1
  std::string text;                   // glob (name, path), regex, -printf format, -type letters
  int cmp = 0;                        // -1 less, 0 equal, +1 more (size, mtime, mmin)
  uint64_t n = 0;                     // size in units, days, minutes; regex: its -regextype
  uint64_t unit = 512;                // size unit in bytes
  absl::Time time;                    // kNewer: the reference time
  std::vector<std::string> argv;      // -exec / -ok: the command, "{}" where the path goes
  bool batch = false;                 // -exec ... {} +
  int index = 0;                      // -exec / -ok: which one (for the client's batches)
  std::shared_ptr<const void> regex;  // -regex / -iregex: compiled when decoded or parsed
};

// -regextype values (GNU find's names).
enum class RegexType : uint8_t {
  kEmacs = 0,
  kPosixBasic = 1,
  kPosixExtended = 2,
  kPosixEgrep = 3,
  kPosixAwk = 4,
  kGrep = 5,
  kEgrep = 6,
  kFindutilsDefault = 7
};

// What -exec, -ok and -delete do; only the client has one (the server never sees them).
class Actions {
 public:
  virtual ~Actions() = default;
  virtual bool Exec(const Expr& e, std::string_view path) = 0;
  virtual bool Delete(const dfs::FoundEntry& entry, std::string_view path) = 0;
};

// Where an entry is evaluated: find's start time, how to read a symbolic link's target (for %l
// and -ls; may be null) and the client's actions (null on the server).
struct Env {
  absl::Time now;
  const std::function<std::string(const dfs::FoundEntry&)>* link_target = nullptr;
  // A link's target's type letter for %Y (N dangling, L a loop), asked only for links.
  const std::function<char(const dfs::FoundEntry&)>* target_type = nullptr;
  Actions* actions = nullptr;
  std::string owner = "-", group = "-";  // -ls, %u and %g: the DFS has no owners
  bool prune = false;                    // set by -prune on a directory: do not descend
};

struct Request {
  std::string fs;
  std::string root;            // DFS path
  std::string display;         // how the root is printed (e.g. "dfs:/a")
  std::string expr;            // EncodeExpr
  bool implicit_print = true;  // the expression has no action
  uint32_t min_depth = 0, max_depth = UINT32_MAX;
  absl::Time now;                   // for -mtime / -mmin, as find's start time
  std::string cursor;               // dfs.find's
  uint32_t max_entries = 4096;      // entries walked per batch
  bool follow_start = false;        // -H (or -L): a link given as the root is walked through
  std::vector<std::string> pruned;  // -prune: directories (shown paths) whose contents are skipped
};

// What an action printed: a path and its terminator, or (terminator kRaw) text as it is.
struct Match {
  std::string path;
  char terminator = '\n';
  static constexpr char kRaw = 1;
};

struct Batch {
  std::vector<Match> matches;
  std::string next;  // cursor; empty when done
  bool done = false;
  std::vector<std::string> pruned;  // the request's, updated
};

// True if `e` holds an action only the client can run (-exec, -ok, -delete).
bool NeedsClient(const Expr& e);
// -prune bookkeeping in walk order: false if `path` (shown) lies below a pruned directory;
// drops the pruned directories the walk has left.
bool OutsidePruned(std::vector<std::string>& pruned, std::string_view path);

std::string EncodeExpr(const Expr& e);
absl::StatusOr<std::unique_ptr<Expr>> DecodeExpr(std::string_view bytes);
std::string EncodeRequest(const Request& r);
absl::StatusOr<Request> DecodeRequest(std::string_view bytes);
std::string EncodeBatch(const Batch& b);
absl::StatusOr<Batch> DecodeBatch(std::string_view bytes);

// Evaluates `e` on one entry (`path` as printed, `root` the starting point as given); appends to
// `out` what its actions print.
bool Evaluate(const Expr& e, const dfs::FoundEntry& entry, std::string_view path,
              std::string_view root, Env& env, std::vector<Match>* out);
// -printf's output for one entry.
std::string FormatPrintf(std::string_view format, const dfs::FoundEntry& entry,
                         std::string_view path, std::string_view root, const Env& env);
// %Y's letter for a link whose target stats as `target` (stat(2), the link followed): the
// target's type, N if it is dangling, L for a loop of links.
char TargetTypeLetter(const absl::StatusOr<dfs::Stat>& target);
// -ls's line for one entry.
std::string FormatLs(const dfs::FoundEntry& entry, std::string_view path, const Env& env);
// INVALID_ARGUMENT if `pattern` does not compile as a regex of `type`.
absl::Status CheckRegex(std::string_view pattern, RegexType type, bool icase);
// Compiles every -regex / -iregex in `e` (after parsing or decoding).
absl::Status CompileRegexes(Expr& e);

}  // namespace ardma::find

#endif  // ARDMA_APPS_FIND_FIND_FORMAT_H_
