// The "find" active-code library: find.scan walks a DFS tree next to the data (dfs.find through
// Call), tests every entry against the shipped expression and answers a batch of matches plus the
// walk's cursor.
#include <algorithm>
#include <functional>

#include "apps/find/find_format.h"
#include "core/active/function_table.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"

namespace ardma::find {
namespace {

using wire::ByteWriter;

absl::StatusOr<std::string> Scan(Context& ctx, std::string_view args) {
  ARDMA_ASSIGN_OR_RETURN(Request req, DecodeRequest(args));
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Expr> expr, DecodeExpr(req.expr));
  std::string call;
  ByteWriter w(&call);
  w.Str16(req.fs);
  w.Str16(req.root);
  w.Bytes32(req.cursor);
  w.U32(std::clamp<uint32_t>(req.max_entries, 1, 10000));
  w.U32(req.max_depth);
  w.U8(req.follow_start ? 1 : 0);
  absl::StatusOr<std::string> bytes = ctx.Call("dfs.find", call);
  if (!bytes.ok()) return bytes.status();
  ARDMA_ASSIGN_OR_RETURN(dfs::FindPage page, dfs::DecodeFindPage(*bytes));
  Batch batch;
  batch.next = page.next;
  batch.done = page.done;
  batch.pruned = std::move(req.pruned);
  // A link's target, for %l and -ls: one more call, only when asked for.
  std::function<std::string(const dfs::FoundEntry&)> link = [&](const dfs::FoundEntry& e) {
    std::string args;
    ByteWriter a(&args);
    a.Str16(req.fs);
    a.Str16(e.path);
    absl::StatusOr<std::string> target = ctx.Call("dfs.readlink", args);
    return target.ok() ? *target : std::string();
  };
  // The type of a link's target, for %Y: one more call, only when asked for.
  std::function<char(const dfs::FoundEntry&)> target_type = [&](const dfs::FoundEntry& e) {
    std::string args;
    ByteWriter a(&args);
    a.Str16(req.fs);
    a.Str16(e.path);
    a.U8(1);  // stat(2), not lstat(2)
    absl::StatusOr<std::string> st = ctx.Call("dfs.stat", args);
    return TargetTypeLetter(st.ok() ? dfs::DecodeStat(*st) : absl::StatusOr<dfs::Stat>(st.status()));
  };
  for (const dfs::FoundEntry& e : page.entries) {
    std::string_view path = e.path;
    // Printed as find prints it: the starting point as given, then the rest of the path.
    std::string shown =
        req.display + std::string(path.substr(std::min(path.size(), req.root.size())));
    if (!OutsidePruned(batch.pruned, shown)) continue;
    if (e.depth < req.min_depth) continue;
    Env env{.now = req.now, .link_target = &link, .target_type = &target_type};
    std::vector<Match> printed;
    bool matched = Evaluate(*expr, e, shown, req.display, env, &printed);
    if (req.implicit_print && matched) printed.push_back({shown, '\n'});
    if (env.prune) batch.pruned.push_back(shown);
    for (Match& m : printed) batch.matches.push_back(std::move(m));
  }
  return EncodeBatch(batch);
}

}  // namespace
}  // namespace ardma::find

ARDMA_ACTIVE_LIBRARY(find, {"find.scan", &ardma::find::Scan});
