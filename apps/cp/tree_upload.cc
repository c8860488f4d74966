#include "apps/cp/tree_upload.h"

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace ardma::cp {
namespace {

constexpr size_t kMaxOps = 2048;
constexpr uint64_t kMaxBytes = 4u << 20;

}  // namespace

TreeUpload::TreeUpload(dfs::DfsClient* fs, Copier* copier, bool verbose)
    : fs_(fs), copier_(copier), verbose_(verbose), sender_([this] { SendLoop(); }) {}

TreeUpload::~TreeUpload() {
  Drain();
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  sender_.join();
}

void TreeUpload::Add(dfs::BatchKind kind, uint8_t flags, uint32_t mode, uint64_t mtime_ns,
                     const Location& dst, std::string data, const std::string& src_display) {
  building_bytes_ += data.size() + dst.path.size() + 32;
  building_.push_back(
      Pending{kind, flags, mode, mtime_ns, dst.path, std::move(data), src_display, dst.display});
  if (building_.size() >= kMaxOps || building_bytes_ >= kMaxBytes) Submit();
}

void TreeUpload::Submit() {
  if (building_.empty()) return;
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](TreeUpload* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu_) { return t->ready_.empty(); },
      this));
  ready_ = std::move(building_);
  building_.clear();
  building_bytes_ = 0;
}

void TreeUpload::Drain() {
  Submit();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](TreeUpload* t)
           ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu_) { return t->ready_.empty() && !t->busy_; },
      this));
}

void TreeUpload::SendLoop() {
  for (;;) {
    std::vector<Pending> batch;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](TreeUpload* t)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu_) { return !t->ready_.empty() || t->stop_; },
          this));
      if (ready_.empty()) return;  // stopping
      batch = std::move(ready_);
      ready_.clear();
      busy_ = true;
    }
    std::vector<dfs::BatchOp> ops;
    ops.reserve(batch.size());
    for (const Pending& p : batch) {
      ops.push_back(dfs::BatchOp{p.kind, p.flags, p.mode, p.mtime_ns, p.path, p.data});
    }
    absl::StatusOr<std::vector<absl::Status>> results = fs_->Batch(ops);
    for (size_t i = 0; i < batch.size(); ++i) {
      Report(batch[i], results.ok() ? (*results)[i] : results.status());
    }
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

void TreeUpload::Report(const Pending& p, const absl::Status& s) {
  for (const std::string& dir : failed_dirs_) {
    if (p.path.compare(0, dir.size(), dir) == 0 &&
        (p.path.size() == dir.size() || p.path[dir.size()] == '/')) {
      return;  // it (or its directory) could not be made: already reported
    }
  }
  if (s.ok()) {
    if (verbose_ && p.kind != dfs::BatchKind::kSetAttr) {
      copier_->Verbose(Location{false, "", p.src_display}, Location{true, "", p.dst_display});
    }
    return;
  }
  switch (p.kind) {
    case dfs::BatchKind::kMkdir:
      failed_dirs_.push_back(p.path);
      if (absl::IsFailedPrecondition(s) && absl::StrContains(s.message(), "overwrite")) {
        return copier_->Fail(absl::StrCat("cannot overwrite non-directory ", Quoted(p.dst_display),
                                          " with directory ", Quoted(p.src_display)));
      }
      return copier_->Fail(
          absl::StrCat("cannot create directory ", Quoted(p.dst_display), ": ", ErrnoText(s)));
    case dfs::BatchKind::kPut:
      if (absl::StrContains(s.message(), "dangling symlink")) {
        return copier_->Fail(
            absl::StrCat("not writing through dangling symlink ", Quoted(p.dst_display)));
      }
      if (ErrnoText(s) == "Is a directory") {
        return copier_->Fail(absl::StrCat("cannot overwrite directory ", Quoted(p.dst_display),
                                          " with non-directory"));
      }
      return copier_->Fail(
          absl::StrCat("cannot create regular file ", Quoted(p.dst_display), ": ", ErrnoText(s)));
    case dfs::BatchKind::kSymlink:
      return copier_->Fail(
          absl::StrCat("cannot create symbolic link ", Quoted(p.dst_display), ": ", ErrnoText(s)));
    case dfs::BatchKind::kSetAttr:
      return copier_->Fail(
          absl::StrCat("preserving permissions for ", Quoted(p.dst_display), ": ", ErrnoText(s)));
  }
}

}  // namespace ardma::cp
