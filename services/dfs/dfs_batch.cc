// dfs.batch: many small namespace-and-data changes in one request, applied in order — what a tree
// upload needs (mkdir, whole small files, symbolic links, attributes) without a round trip each.
#include <string>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/dfs/dfs.h"

namespace ardma::dfs {
namespace {

// One change: `flags` says what to do when the name already exists and which attributes to set.
absl::Status Apply(Context& ctx, const Fs& fs, const BatchOp& op) {
  bool keep = (op.flags & kBatchKeepExisting) != 0;
  bool through = false;  // the name is a link to a file: written (and set) through it
  switch (op.kind) {
    case BatchKind::kMkdir: {
      absl::StatusOr<Stat> made = Make(ctx, fs, op.path, FileType::kDirectory, op.mode, false);
      if (absl::IsInvalidArgument(made.status())) {
        // "d/." (cp -r src/. d): no name to make, but the directory it names may be there.
        absl::StatusOr<Stat> there = StatPath(ctx, fs, op.path, /*follow=*/true);
        if (there.ok() && there->type == FileType::kDirectory) return absl::OkStatus();
      }
      if (absl::IsAlreadyExists(made.status())) {
        return absl::FailedPreconditionError(absl::StrCat("dfs: cannot overwrite non-directory ",
                                                          ToAbsl(op.path), " with a directory"));
      }
      return made.status();
    }
    case BatchKind::kPut: {
      bool newer_only = (op.flags & kBatchKeepNewer) != 0;
      absl::StatusOr<Stat> made =
          Make(ctx, fs, op.path, FileType::kFile, op.mode, keep || newer_only);
      if (keep && absl::IsAlreadyExists(made.status())) return absl::OkStatus();
      if (newer_only && absl::IsAlreadyExists(made.status())) {
        ARDMA_ASSIGN_OR_RETURN(Stat st, StatPath(ctx, fs, op.path));
        if (st.type == FileType::kFile) {
          if (absl::ToUnixNanos(st.mtime) >= static_cast<int64_t>(op.mtime_ns)) {
            return absl::OkStatus();  // not older than the source: kept
          }
          made = Make(ctx, fs, op.path, FileType::kFile, op.mode, false);
        }
      }
      if (absl::IsAlreadyExists(made.status())) {  // of another type
        ARDMA_ASSIGN_OR_RETURN(Stat st, StatPath(ctx, fs, op.path));
        if (st.type == FileType::kDirectory) return IsADirectory();
        // A link: written through to the file it names, as cp writes; a dangling one refused.
        made = StatPath(ctx, fs, op.path, /*follow=*/true);
        if (absl::IsNotFound(made.status())) {
          return absl::FailedPreconditionError(absl::StrCat(
              "dfs: not writing through dangling symlink ", ToAbsl(op.path)));
        }
        ARDMA_RETURN_IF_ERROR(made.status());
        if (made->type == FileType::kDirectory) return IsADirectory();
        through = true;
      }
      ARDMA_RETURN_IF_ERROR(made.status());
      if (made->size > 0) ARDMA_RETURN_IF_ERROR(Truncate(ctx, fs, op.path, 0));
      if (!op.data.empty()) ARDMA_RETURN_IF_ERROR(Write(ctx, fs, op.path, 0, op.data).status());
      break;
    }
    case BatchKind::kSymlink: {
      absl::StatusOr<Stat> made = Symlink(ctx, fs, op.path, op.data);
      if (!absl::IsAlreadyExists(made.status())) return made.status();
      if (keep) return absl::OkStatus();
      ARDMA_ASSIGN_OR_RETURN(Stat st, StatPath(ctx, fs, op.path));
      if (st.type == FileType::kDirectory) {
        return absl::FailedPreconditionError(absl::StrCat("dfs: cannot overwrite directory ",
                                                          ToAbsl(op.path), " with non-directory"));
      }
      ARDMA_RETURN_IF_ERROR(Remove(ctx, fs, op.path, FileType::kFile));
      ARDMA_RETURN_IF_ERROR(Symlink(ctx, fs, op.path, op.data).status());
      break;
    }
    case BatchKind::kSetAttr:
      break;
    default:
      return absl::InvalidArgumentError("dfs.batch: unknown operation");
  }
  if ((op.flags & (kBatchSetMode | kBatchSetMtime)) == 0) return absl::OkStatus();
  ARDMA_ASSIGN_OR_RETURN(Stat st, StatPath(ctx, fs, op.path, through));
  return SetAttr(ctx, fs, op.path, (op.flags & kBatchSetMode) ? op.mode : st.mode,
                 (op.flags & kBatchSetMtime) ? op.mtime_ns : 0, through);
}

}  // namespace

std::vector<absl::Status> ApplyBatch(Context& ctx, const Fs& fs, std::span<const BatchOp> ops) {
  std::vector<absl::Status> results;

  results.reserve(ops.size());
  for (const BatchOp& op : ops) results.push_back(Apply(ctx, fs, op));
  return results;
}

}  // namespace ardma::dfs
