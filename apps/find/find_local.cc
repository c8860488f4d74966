#include "apps/find/find_local.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
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

int WalkHere(dfs::DfsClient& fs, const Expression& expr, const std::string& root,
             const std::string& display, absl::Time now) {
  LocalActions actions(fs);
  std::function<std::string(const dfs::FoundEntry&)> link = [&](const dfs::FoundEntry& e) {
    absl::StatusOr<std::string> t = fs.Readlink(e.path);
    return t.ok() ? *t : std::string();
  };
  std::vector<std::string> pruned;
  // -depth: directories wait here until the walk has left them.
  std::vector<std::pair<dfs::FoundEntry, std::string>> waiting;
  auto evaluate = [&](const dfs::FoundEntry& listed, const std::string& shown) {
    if (listed.depth < expr.min_depth) return;
    // A directory reached after its contents (-depth, -delete) has lost what was deleted from it
    // meanwhile: `-empty -delete` then removes a whole chain of empty directories, as GNU's.
    dfs::FoundEntry e = listed;
    if (e.type == dfs::FileType::kDirectory) e.size -= std::min(e.size, actions.DeletedIn(e.path));
    Env env{.now = now, .link_target = &link, .actions = &actions};
    std::vector<Match> printed;
    bool matched = Evaluate(*expr.expr, e, shown, display, env, &printed);
    if (!expr.has_action && matched) printed.push_back({shown, '\n'});
    if (env.prune && !expr.depth_first) pruned.push_back(shown);
    for (const Match& m : printed) {
      std::fwrite(m.path.data(), 1, m.path.size(), stdout);
      if (m.terminator != Match::kRaw) std::fputc(m.terminator, stdout);
    }
  };
  std::string cursor;
  int status = 0;
  for (;;) {
    absl::StatusOr<dfs::FindPage> page = fs.Find(root, cursor, 4096, expr.max_depth);
    if (!page.ok()) {
      std::cerr << "ardma-find: '" << display << "': "
                << (absl::IsNotFound(page.status()) ? "No such file or directory"
                                                    : std::string(page.status().message()))
                << "\n";
      status = 1;
      break;
    }
    for (const dfs::FoundEntry& e : page->entries) {
      std::string shown =
          display +
          std::string(std::string_view(e.path).substr(std::min(e.path.size(), root.size())));
      if (!OutsidePruned(pruned, shown)) continue;
      if (expr.depth_first) {
        while (!waiting.empty() && waiting.back().first.depth >= e.depth) {
          evaluate(waiting.back().first, waiting.back().second);
          waiting.pop_back();
        }
        if (e.type == dfs::FileType::kDirectory) {
          waiting.emplace_back(e, shown);
          continue;
        }
      }
      evaluate(e, shown);
    }
    if (page->done) break;
    cursor = page->next;
  }
  while (!waiting.empty()) {
    evaluate(waiting.back().first, waiting.back().second);
    waiting.pop_back();
  }
  actions.FlushAll();
  std::fflush(stdout);
  return status != 0 || actions.failed() ? 1 : 0;
}

}  // namespace ardma::find
