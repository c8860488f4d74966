#include "apps/find/find_local.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/status_macros.h"

extern char** environ;

namespace ardma::find {
namespace {

// Runs argv, waits; true if it exited 0.
bool Run(const std::vector<std::string>& argv) {
  std::fflush(stdout);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  if (::posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) {
    std::cerr << "ardma-find: '" << argv[0] << "': No such file or directory\n";
    return false;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

class LocalActions : public Actions {
 public:
  explicit LocalActions(dfs::DfsClient& fs) : fs_(fs) {}

  bool Exec(const Expr& e, std::string_view path) override {
    if (e.batch) {  // -exec ... {} +: collected, run in groups; always true here
      Pending& p = pending_[e.index];
      p.expr = &e;
      p.paths.emplace_back(path);
      p.bytes += path.size() + 1;
      if (p.paths.size() >= 1024 || p.bytes >= 128 * 1024) Flush(p);
      return true;
    }
    std::vector<std::string> argv;
    for (const std::string& a : e.argv) {
      argv.push_back(absl::StrReplaceAll(a, {{"{}", std::string(path)}}));
    }
    if (e.op == Op::kOk) {
      std::fflush(stdout);
      std::cerr << "< " << e.argv[0] << " ... " << path << " > ? " << std::flush;  // as GNU
      std::string answer;
      if (!std::getline(std::cin, answer) || answer.empty() ||
          (answer[0] != 'y' && answer[0] != 'Y')) {
        return false;
      }
    }
    return Run(argv);
  }

  bool Delete(const dfs::FoundEntry& entry, std::string_view path) override {
    if (entry.depth == 0 && (entry.path == "/" || path.ends_with("/."))) return true;
    absl::Status s =
        entry.type == dfs::FileType::kDirectory ? fs_.Rmdir(entry.path) : fs_.Unlink(entry.path);
    if (s.ok()) {
      ++deleted_in_[entry.path.substr(0, entry.path.rfind('/'))];
      return true;
    }
    std::string why = absl::IsFailedPrecondition(s) &&
                              std::string(s.message()).find("not empty") != std::string::npos
                          ? "Directory not empty"
                          : std::string(s.message());
    std::cerr << "ardma-find: cannot delete '" << path << "': " << why << "\n";
    failed_ = true;
    return false;
  }

  // Runs what -exec ... + still holds.
  void FlushAll() {
    for (auto& [index, p] : pending_) Flush(p);
  }
  bool failed() const { return failed_; }
  // Entries of directory `path` this walk deleted.
  uint64_t DeletedIn(const std::string& path) const {
    auto it = deleted_in_.find(path);
    return it == deleted_in_.end() ? 0 : it->second;
  }

 private:
  struct Pending {
    const Expr* expr = nullptr;
    std::vector<std::string> paths;
    size_t bytes = 0;
  };
  void Flush(Pending& p) {
    if (p.paths.empty()) return;
    std::vector<std::string> argv(p.expr->argv.begin(), p.expr->argv.end() - 1);  // without {}
    argv.insert(argv.end(), p.paths.begin(), p.paths.end());
    if (!Run(argv)) failed_ = true;  // find's status says a command failed
    p.paths.clear();
    p.bytes = 0;
  }

  dfs::DfsClient& fs_;
  std::map<int, Pending> pending_;
  std::map<std::string, uint64_t> deleted_in_;  // directory -> entries deleted from it
  bool failed_ = false;
};

}  // namespace

namespace {

// The walk: the expression evaluated entry by entry, in pre-order (or post-order with -depth),
// and with -L a link's target walked where the link stands.
class Walker {
 public:
  Walker(dfs::DfsClient& fs, const Expression& expr, absl::Time now, bool follow_all)
      : fs_(fs), expr_(expr), now_(now), follow_all_(follow_all), actions_(fs) {
    link_ = [this](const dfs::FoundEntry& e) {
      absl::StatusOr<std::string> t = fs_.Readlink(e.path);
      return t.ok() ? *t : std::string();
    };
    target_type_ = [this](const dfs::FoundEntry& e) {
      return TargetTypeLetter(fs_.LookupFollowing(e.path));
    };
  }

  // Walks `root` (shown as `display`), whose entries are `base` deeper than the starting point;
  // `above`: the walk's directories above `root` (inode, shown path), for -L's loop check.
  void Walk(const std::string& root, const std::string& display, bool follow_start,
            uint32_t base, const std::vector<std::pair<uint64_t, std::string>>& above) {
    // -depth: directories wait here until the walk has left them.
    std::vector<std::pair<dfs::FoundEntry, std::string>> waiting;
    std::vector<std::pair<uint64_t, std::string>> dirs = above;  // the entry's ancestors
    std::vector<uint32_t> dir_depths;  // the depth in this walk of each of `dirs` past `above`
    std::vector<std::string> looped;  // directories not entered (a loop)
    uint32_t max_depth = expr_.max_depth - std::min(expr_.max_depth, base);
    std::string cursor;
    for (;;) {
      absl::StatusOr<dfs::FindPage> page = fs_.Find(root, cursor, 4096, max_depth, follow_start);
      if (!page.ok()) {
        std::cerr << "ardma-find: '" << display << "': " << dfs::ErrnoText(page.status())
                  << "\n";
        failed_ = true;
        break;
      }
      for (dfs::FoundEntry e : page->entries) {
        std::string shown =
            display +
            std::string(std::string_view(e.path).substr(std::min(e.path.size(), root.size())));
        if (!OutsidePruned(pruned_, shown) || !OutsidePruned(looped, shown)) continue;
        while (!dir_depths.empty() && dir_depths.back() >= e.depth) {
          dirs.pop_back();
          dir_depths.pop_back();
        }
        bool link_to_walk = false;
        if (follow_all_ && e.type == dfs::FileType::kSymlink) {
          // -L: the link stands for its target (a dangling one for itself).
          absl::StatusOr<dfs::Stat> st = fs_.LookupFollowing(e.path);
          if (st.ok()) {
            link_to_walk = st->type == dfs::FileType::kDirectory && e.depth + base < expr_.max_depth;
            e.type = st->type;
            e.size = st->size;
            e.mode = st->mode;
            e.mtime = st->mtime;
            e.ino = st->ino;
          }
        }
        uint32_t depth_here = e.depth;
        e.depth += base;
        if (e.type == dfs::FileType::kDirectory && follow_all_) {
          // A directory met again below itself (through a link): find's loop, not entered.
          auto seen = std::find_if(dirs.begin(), dirs.end(),
                                   [&](const auto& d) { return d.first == e.ino; });
          if (seen != dirs.end()) {
            std::cerr << "ardma-find: File system loop detected; '" << shown
                      << "' is part of the same file system loop as '" << seen->second << "'.\n";
            failed_ = true;
            looped.push_back(shown);
            continue;
          }
        }
        if (link_to_walk) {
          Flush(&waiting, e.depth);
          Walk(e.path, shown, /*follow_start=*/true, e.depth, dirs);
          continue;
        }
        if (e.type == dfs::FileType::kDirectory) {
          dirs.emplace_back(e.ino, shown);
          dir_depths.push_back(depth_here);
        }
        if (expr_.depth_first) {
          Flush(&waiting, e.depth);
          if (e.type == dfs::FileType::kDirectory) {
            waiting.emplace_back(e, shown);
            continue;
          }
        }
        Evaluate(e, shown);
      }
      if (page->done) break;
      cursor = page->next;
    }
    Flush(&waiting, 0);
  }

  int Finish() {
    actions_.FlushAll();
    std::fflush(stdout);
    return failed_ || actions_.failed() ? 1 : 0;
  }

 private:
  // -depth: evaluates the waiting directories at `depth` or deeper (the walk has left them).
  void Flush(std::vector<std::pair<dfs::FoundEntry, std::string>>* waiting, uint32_t depth) {
    while (!waiting->empty() && waiting->back().first.depth >= depth) {
      Evaluate(waiting->back().first, waiting->back().second);
      waiting->pop_back();
    }
  }

  void Evaluate(const dfs::FoundEntry& listed, const std::string& shown) {
    if (listed.depth < expr_.min_depth) return;
    // A directory reached after its contents (-depth, -delete) has lost what was deleted from it
    // meanwhile: `-empty -delete` then removes a whole chain of empty directories, as GNU's.
    dfs::FoundEntry e = listed;
    if (e.type == dfs::FileType::kDirectory) e.size -= std::min(e.size, actions_.DeletedIn(e.path));
    Env env{.now = now_, .link_target = &link_, .target_type = &target_type_, .actions = &actions_};
    std::vector<Match> printed;
    bool matched = find::Evaluate(*expr_.expr, e, shown, start_display_, env, &printed);
    if (!expr_.has_action && matched) printed.push_back({shown, '\n'});
    if (env.prune && !expr_.depth_first) pruned_.push_back(shown);
    for (const Match& m : printed) {
      std::fwrite(m.path.data(), 1, m.path.size(), stdout);
      if (m.terminator != Match::kRaw) std::fputc(m.terminator, stdout);
    }
  }

 public:
  std::string start_display_;  // the starting point as given (%H)

 private:
  dfs::DfsClient& fs_;
  const Expression& expr_;
  const absl::Time now_;
  const bool follow_all_;
  LocalActions actions_;
  std::function<std::string(const dfs::FoundEntry&)> link_;
  std::function<char(const dfs::FoundEntry&)> target_type_;
  std::vector<std::string> pruned_;
  bool failed_ = false;
};

}  // namespace

int WalkHere(dfs::DfsClient& fs, const Expression& expr, const std::string& root,
             const std::string& display, absl::Time now, bool follow_start, bool follow_all) {
  Walker walker(fs, expr, now, follow_all);
  walker.start_display_ = display;
  walker.Walk(root, display, follow_start, 0, {});
  return walker.Finish();
}

}  // namespace ardma::find
