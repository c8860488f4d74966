// The "find" active-code library: find.scan walks a DFS tree next to the data (dfs.find through
// Call), tests every entry against the shipped expression and answers a batch of matches plus the
// walk's cursor.
#include <algorithm>

#include "apps/find/find_format.h"
#include "core/active/function_table.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"

namespace ardma::find {
namespace {

using wire::ByteReader;
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
  absl::StatusOr<std::string> page = ctx.Call("dfs.find", call);
  if (!page.ok()) return page.status();
  // dfs.find's page: next, done, entries.
  ByteReader r(*page);
  std::string_view next;
  uint8_t done;
  uint32_t n;
  if (!r.Bytes32(&next) || !r.U8(&done) || !r.U32(&n)) return absl::DataLossError("find: bad page");
  Batch batch;
  batch.next = std::string(next);
  batch.done = done != 0;
  for (uint32_t i = 0; i < n; ++i) {
    dfs::FoundEntry e;
    std::string_view path;
    uint8_t type;
    uint64_t mtime;
    if (!r.Str16(&path) || !r.U8(&type) || !r.U64(&e.size) || !r.U32(&e.depth) || !r.U32(&e.mode) ||
        !r.U64(&mtime)) {
      return absl::DataLossError("find: bad entry");
    }
    e.type = static_cast<dfs::FileType>(type);
    e.mtime = absl::FromUnixNanos(static_cast<int64_t>(mtime));
    if (e.depth < req.min_depth) continue;
    // Printed as find prints it: the starting point as given, then the rest of the path.
    std::string shown = req.display + std::string(path.substr(std::min(path.size(), req.root.size())));
    std::vector<Match> printed;
    bool matched = Evaluate(*expr, e, shown, req.now, &printed);
    if (req.implicit_print && matched) printed.push_back({shown, '\n'});
    for (Match& m : printed) batch.matches.push_back(std::move(m));
  }
  return EncodeBatch(batch);
}

}  // namespace
}  // namespace ardma::find

ARDMA_ACTIVE_LIBRARY(find, {"find.scan", &ardma::find::Scan});
