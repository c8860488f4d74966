// Runs a parsed ardma-grep command: expands the operands, asks the server for batches and prints
// them as GNU grep would.
#include <fnmatch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "apps/grep/grep_cli.h"
#include "apps/grep/grep_matcher.h"
#include "core/client/client.h"
#include "core/cluster/router.h"
#include "core/status_macros.h"
#include "services/dfs/dfs_client.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(grep);

namespace ardma::grep {
namespace {

// GNU grep's colours: defaults, then $GREP_COLORS (ms mc sl cx fn ln bn se, mt for both match
// colours, rv and ne).
struct Colors {
  std::string ms = "01;31", mc = "01;31", sl, cx, fn = "35", ln = "32", bn = "32", se = "36";
  bool rv = false, ne = false;

  static Colors FromEnvironment() {
    Colors c;
    const char* env = std::getenv("GREP_COLORS");
    if (env == nullptr) return c;
    for (absl::string_view item : absl::StrSplit(env, ':', absl::SkipEmpty())) {
      std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
      const std::string& k = kv.first;
      const std::string& v = kv.second;
      if (k == "mt")
        c.ms = c.mc = v;
      else if (k == "ms")
        c.ms = v;
      else if (k == "mc")
        c.mc = v;
      else if (k == "sl")
        c.sl = v;
      else if (k == "cx")
        c.cx = v;
      else if (k == "fn")
        c.fn = v;
      else if (k == "ln")
        c.ln = v;
      else if (k == "bn")
        c.bn = v;
      else if (k == "se")
        c.se = v;
      else if (k == "rv")
        c.rv = true;
      else if (k == "ne")
        c.ne = true;
    }
    return c;
  }
};

// Formats records as GNU grep does.
class Printer {
 public:
  Printer(const Command& f, const std::vector<std::string>& names, bool with_filename)
      : f_(f),
        names_(names),
        with_filename_(with_filename),
        context_(f.context_given),
        colors_(Colors::FromEnvironment()),
        eol_(f.options.null_data ? '\0' : '\n') {
    if (colors_.rv && f.options.invert) std::swap(colors_.sl, colors_.cx);
  }

  void Print(const Record& r) {
    switch (r.kind) {
      case RecordKind::kSelected:
      case RecordKind::kContext:
        Line(r);
        break;
      case RecordKind::kCount:
        Count(r);
        break;
      case RecordKind::kBinary:
        selected_ = true;
        std::fflush(stdout);
        std::fprintf(stderr, "ardma-grep: %s: binary file matches\n", names_[r.file].c_str());
        break;
      case RecordKind::kSize: {  // -T: numbers as wide as the file's size + 1 in digits
        if (widths_.size() <= r.file) widths_.resize(r.file + 1, 1);
        widths_[r.file] = static_cast<int>(absl::StrCat(r.line + 1).size());
        break;
      }
      case RecordKind::kError:
        error_ = true;
        if (!f_.suppress) {
          std::fflush(stdout);
          std::fprintf(stderr, "ardma-grep: %s: %.*s\n", names_[r.file].c_str(),
                       static_cast<int>(r.text.size()), r.text.data());
        }
        break;
    }
    if (f_.line_buffered) std::fflush(stdout);
  }

  bool selected() const { return selected_; }
  bool error() const { return error_; }

 private:
  // Appends `text` in colour `sgr` (SGR parameters) to `out`, as GNU grep writes it; plain
  // without --color.
  void Put(std::string* out, const std::string& sgr, std::string_view text) const {
    if (!f_.color || sgr.empty()) {
      out->append(text);
      return;
    }
    const char* erase = colors_.ne ? "" : "\33[K";
    absl::StrAppend(out, "\33[", sgr, "m", erase, absl::string_view(text.data(), text.size()),
                    "\33[m", erase);
  }
  std::string Colored(const std::string& sgr, std::string_view text) const {
    std::string out;
    Put(&out, sgr, text);
    return out;
  }
  // The file name (then `sep`, or a NUL with -Z), line number and byte offset before a line;
  // with -T, numbers right-aligned and a tab before content that is not empty.
  void Prefix(std::string* out, const Record& r, char sep, uint64_t offset, bool content) const {
    std::string_view s(&sep, 1);
    if (with_filename_) {
      Put(out, colors_.fn, names_[r.file]);
      if (f_.null_after_name) {
        out->push_back('\0');
      } else {
        Put(out, colors_.se, s);
      }
    }
    if (f_.line_numbers) {
      Put(out, colors_.ln, Number(r, r.line));
      Put(out, colors_.se, s);
    }
    if (f_.byte_offset) {
      Put(out, colors_.bn, Number(r, offset));
      Put(out, colors_.se, s);
    }
    if (f_.initial_tab && content && (with_filename_ || f_.line_numbers || f_.byte_offset)) {
      out->push_back('\t');
    }
  }
  std::string Number(const Record& r, uint64_t n) const {
    std::string digits = absl::StrCat(n);
    size_t width = f_.initial_tab && r.file < widths_.size() ? widths_[r.file] : 0;
    return digits.size() < width ? std::string(width - digits.size(), ' ') + digits : digits;
  }
  // A file name alone (-c's, -l's, -L's), then `after` or, with -Z, a NUL byte.
  std::string NameThen(const Record& r, std::string_view after) const {
    std::string out = Colored(colors_.fn, names_[r.file]);
    if (f_.null_after_name) {
      out.push_back('\0');
    } else {
      out += Colored(colors_.se, after);
    }
    return out;
  }

  void Line(const Record& r) {
    bool selected = r.kind == RecordKind::kSelected;
    if (selected) selected_ = true;
    if (context_ && printed_ && (r.file != last_file_ || r.line != last_line_ + 1) &&
        f_.group_separator.has_value()) {
      std::string sep = Colored(colors_.se, *f_.group_separator);
      std::printf("%s\n", sep.c_str());
    }
    printed_ = true;
    last_file_ = r.file;
    last_line_ = r.line;
    std::string& out = out_;  // reused: no allocation per line
    out.clear();
    if (f_.only_matching) {
      if (!selected) return;
      for (auto [start, len] : r.spans) {
        Prefix(&out, r, ':', r.offset + start, len > 0);
        Put(&out, colors_.ms, r.text.substr(start, len));
        out += eol_;
      }
      std::fwrite(out.data(), 1, out.size(), stdout);
      return;
    }
    Prefix(&out, r, selected ? ':' : '-', r.offset, !r.text.empty());
    const std::string& line_color = selected ? colors_.sl : colors_.cx;
    const std::string& match_color = selected ? colors_.ms : colors_.mc;
    if (f_.color && !r.spans.empty()) {
      size_t at = 0;
      for (auto [start, len] : r.spans) {
        Put(&out, line_color, r.text.substr(at, start - at));
        Put(&out, match_color, r.text.substr(start, len));
        at = start + len;
      }
      Put(&out, line_color, r.text.substr(at));
    } else {
      Put(&out, line_color, r.text);
    }
    out += eol_;
    std::fwrite(out.data(), 1, out.size(), stdout);
  }

  void Count(const Record& r) {
    switch (f_.options.report) {
      case Report::kCount: {
        if (r.line > 0) selected_ = true;
        std::string out;
        if (with_filename_) out = NameThen(r, ":");
        absl::StrAppend(&out, r.line, "\n");
        std::fwrite(out.data(), 1, out.size(), stdout);
        break;
      }
      case Report::kFilesWithMatch:
        selected_ = true;
        PrintName(r);
        break;
      case Report::kFilesWithout:  // the exit status still follows selected lines, as GNU's
        if (r.line > 0) {
          selected_ = true;
        } else {
          PrintName(r);
        }
        break;
      case Report::kQuiet:
        selected_ = true;
        break;
      case Report::kLines:
        break;
    }
  }

  // -l's and -L's line: the name and a newline, or a NUL with -Z.
  void PrintName(const Record& r) {
    std::string out = Colored(colors_.fn, names_[r.file]);
    out.push_back(f_.null_after_name ? '\0' : '\n');
    std::fwrite(out.data(), 1, out.size(), stdout);
  }

  const Command& f_;
  const std::vector<std::string>& names_;
  std::vector<int> widths_;  // -T: each file's number width
  const bool with_filename_;
  const bool context_;
  Colors colors_;
  const char eol_;
  std::string out_;
  bool printed_ = false;
  uint32_t last_file_ = 0;
  uint64_t last_line_ = 0;
  bool selected_ = false;
  bool error_ = false;
};

// A cluster member that is down or does not answer: its files are reported unreadable, the
// others are searched.
bool Unreachable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
}

// The files one server scans, and its batches as they come.
struct Share {
  Client* client = nullptr;
  bool by_inode = false;  // the files are opened by inode on the member with their bytes
  Request req;
  absl::Status failed;  // its server could not be reached: the files left are unreadable
  std::future<absl::StatusOr<Batch>> next;  // the batch asked for
  std::optional<absl::StatusOr<Batch>> batch;  // the batch being printed
  size_t pos = 0;                              // its next record
};

}  // namespace

int RunCommand(const Command& command) {
  std::vector<std::string> warnings;
  absl::StatusOr<Matcher> m = Matcher::Compile(command.options, &warnings);
  if (!m.ok()) {
    std::cerr << "ardma-grep: " << m.status().message() << "\n";
    return 2;
  }
  for (const std::string& w : warnings) std::cerr << "ardma-grep: warning: " << w << "\n";
  if (command.max_zero) return 1;
  // -v of a pattern every line matches selects nothing: GNU grep reads no file and prints
  // nothing, not even -c's counts.
  if (command.options.invert && m->always() &&
      (command.options.report == Report::kLines || command.options.report == Report::kCount)) {
    return 1;
  }
  const Command& f = command;
  const std::vector<std::string>& operands = f.operands;
  if (operands.empty()) {
    return UsageError("no FILE given (ardma-grep searches dfs:/PATH files only)");
  }
  absl::StatusOr<ClientOptions> options = f.ConnectOptions();
  absl::StatusOr<std::unique_ptr<Servers>> servers =
      options.ok() ? cluster::ConnectServers(f.server, *options) : options.status();
  if (!servers.ok()) {
    std::cerr << "ardma-grep: " << servers.status().message() << "\n";
    return 2;
  }
  const bool on_cluster = (*servers)->RoutesBySlot();
  if (on_cluster && f.mode == Mode::kRdma) {
    return UsageError(
        "--mode rdma searches one server; a cluster's files are searched in active mode");
  }
  // Operands: dfs:/PATH; with -r, directories expand to their files in sorted path order.
  dfs::DfsClient fs(servers->get(), Mode::kActive, f.fs);
  std::vector<std::string> names, paths;
  std::vector<uint64_t> inos;  // on a cluster: each file's inode (0: unknown, send it by path)
  bool operand_error = false, expanded = false;
  auto matches_any = [](const std::vector<std::string>& globs, std::string_view name) {
    for (const std::string& g : globs) {
      if (::fnmatch(g.c_str(), std::string(name).c_str(), 0) == 0) return true;
    }
    return false;
  };
  // --include / --exclude on a file's base name, as GNU grep weighs them: the last option that
  // matches decides; with none matching, the file is searched unless the first was --include.
  auto wanted = [&](std::string_view path) {
    if (f.name_filters.empty()) return true;
    std::string base(path.substr(path.rfind('/') + 1));
    for (auto it = f.name_filters.rbegin(); it != f.name_filters.rend(); ++it) {
      if (::fnmatch(it->second.c_str(), base.c_str(), 0) == 0) return it->first;
    }
    return !f.name_filters.front().first;
  };
  // Appends the files under directory `dir` (a path that may pass through links) to `found`, in
  // Find's order. -r skips the links met on the way; -R follows them, and a link back to a
  // directory being walked (`ancestors`: their inodes) is a "recursive directory loop", as GNU's.
  std::vector<std::pair<std::string, uint64_t>> found;  // path, inode
  auto Contains = [](const std::vector<uint64_t>& inos, uint64_t ino) {
    return std::find(inos.begin(), inos.end(), ino) != inos.end();
  };
  auto LoopWarning = [&](const std::string& path) {
    if (!f.suppress) std::cerr << "ardma-grep: dfs:" << path << ": warning: recursive directory loop\n";
  };
  auto expand = [&](auto& self, const std::string& dir, std::vector<uint64_t> ancestors) -> bool {
    std::vector<std::string> skipped_dirs;                // --exclude-dir: nothing below them
    std::vector<std::pair<uint32_t, uint64_t>> walking;   // depth and inode of the entry's dirs
    std::vector<std::pair<std::string, std::vector<uint64_t>>> links;  // -R: to follow after
    std::string cursor;
    for (;;) {
      absl::StatusOr<dfs::FindPage> page = fs.Find(dir, cursor, 4096);
      if (!page.ok()) {
        std::cerr << "ardma-grep: dfs:" << dir << ": " << dfs::ErrnoText(page.status()) << "\n";
        return false;
      }
      for (const auto& e : page->entries) {
        while (!skipped_dirs.empty() &&
               !(e.path.size() > skipped_dirs.back().size() &&
                 e.path.compare(0, skipped_dirs.back().size(), skipped_dirs.back()) == 0 &&
                 e.path[skipped_dirs.back().size()] == '/')) {
          skipped_dirs.pop_back();
        }
        if (!skipped_dirs.empty()) continue;
        while (!walking.empty() && walking.back().first >= e.depth) walking.pop_back();
        std::string_view base = std::string_view(e.path).substr(e.path.rfind('/') + 1);
        if (e.type == dfs::FileType::kDirectory) {
          if (e.depth > 0 && matches_any(f.exclude_dir, base)) {
            skipped_dirs.push_back(e.path);
          } else if (e.depth > 0 && Contains(ancestors, e.ino)) {  // reached through a link
            LoopWarning(e.path);
            skipped_dirs.push_back(e.path);
          } else {
            walking.emplace_back(e.depth, e.ino);
          }
        } else if (e.type == dfs::FileType::kFile && wanted(e.path)) {
          found.emplace_back(e.path, e.ino);
        } else if (e.type == dfs::FileType::kSymlink && f.dereference) {
          std::vector<uint64_t> above = ancestors;
          for (const auto& w : walking) above.push_back(w.second);
          links.emplace_back(e.path, std::move(above));
        }
      }
      if (page->done) break;
      cursor = page->next;
    }
    for (auto& [link, above] : links) {
      absl::StatusOr<dfs::Stat> st = fs.LookupFollowing(link);
      std::string_view base = std::string_view(link).substr(link.rfind('/') + 1);
      if (!st.ok()) {
        if (!wanted(link)) continue;  // as a file's name: GNU weighs it before reading it
        if (!f.suppress) {
          std::cerr << "ardma-grep: dfs:" << link << ": " << dfs::ErrnoText(st.status()) << "\n";
        }
        operand_error = true;
      } else if (st->type != dfs::FileType::kDirectory) {
        if (wanted(link)) found.emplace_back(link, st->type == dfs::FileType::kFile ? st->ino : 0);
      } else if (matches_any(f.exclude_dir, base)) {
        continue;
      } else if (Contains(above, st->ino)) {
        LoopWarning(link);
      } else if (!self(self, link + "/", std::move(above))) {
        return false;
      }
    }
    return true;
  };
  for (const std::string& operand : operands) {
    if (operand.rfind("dfs:", 0) != 0) {
      if (!f.suppress) std::cerr << "ardma-grep: " << operand << ": not a dfs:/PATH file\n";
      operand_error = true;
      continue;
    }
    std::string path = operand.substr(4);
    if (f.recursive) {
      // A link on the command line is followed, with -r too.
      absl::StatusOr<dfs::Stat> st = fs.LookupFollowing(path);
      if (st.ok() && st->type == dfs::FileType::kDirectory) {
        expanded = true;
        found.clear();
        if (!expand(expand, path.back() == '/' ? path : path + "/", {})) return 2;
        std::sort(found.begin(), found.end());
        for (const auto& [p, ino] : found) {
          names.push_back("dfs:" + p);
          paths.push_back(p);
          inos.push_back(ino);
        }
        continue;
      }
    }
    if (!wanted(path)) continue;
    names.push_back(operand);
    paths.push_back(path);
    uint64_t ino = 0;
    if (on_cluster) {
      // Its bytes' member is found by its inode; a name that is no file goes to the namespace's
      // member by path, which reports it as GNU grep does.
      absl::StatusOr<dfs::Stat> st = fs.LookupFollowing(path);
      if (st.ok() && st->type == dfs::FileType::kFile) ino = st->ino;
    }
    inos.push_back(ino);
  }
  // A file name prefix with several operands (even if --exclude skips some), or a directory
  // searched (-r); not for one file.
  bool with_filename =
      f.with_filename == -1 ? (operands.size() > 1 || expanded) : f.with_filename == 1;
  Printer printer(f, names, with_filename);
  Request req;
  req.fs = f.fs;
  req.options = f.options;
  // The files go to the servers in shares: all to the one server, or on a cluster each to the
  // member that holds its bytes (by inode), those of unknown inode to the namespace's by path.
  // Every share's first batch is asked for at once (one parallel wave); the records are printed
  // in the files' order, each share's next batch asked for as soon as its cursor is known, so
  // the servers scan while this prints.
  std::vector<Share> shares;
  std::vector<std::pair<size_t, uint32_t>> place(paths.size());  // share, index in it
  for (size_t k = 0; k < paths.size(); ++k) {
    bool by_inode = on_cluster && inos[k] != 0;
    absl::StatusOr<Client*> client = (*servers)->ForSlot(
        by_inode ? dfs::DataSlot(f.fs, inos[k]) : dfs::NamespaceSlot(f.fs));
    if (!client.ok() && !Unreachable(client.status())) {
      std::cerr << "ardma-grep: " << client.status().message() << "\n";
      return 2;
    }
    Client* to = client.ok() ? *client : nullptr;  // null: a member that is down
    size_t s = 0;
    while (s < shares.size() && !(shares[s].client == to && shares[s].by_inode == by_inode)) {
      ++s;
    }
    if (s == shares.size()) {
      shares.push_back(Share{to, by_inode, req});
      if (!client.ok()) shares.back().failed = client.status();
    }
    place[k] = {s, static_cast<uint32_t>(shares[s].req.files.size())};
    shares[s].req.files.push_back(paths[k]);
    if (by_inode) shares[s].req.inos.push_back(inos[k]);
  }
  // Sent from this thread, one share after another, before any answer is awaited: the wave
  // leaves at once (a thread per share would start its request only when the members already
  // scanning let it have a core).
  auto fetch = [&f](Client* client, const Request& r) {
    return std::async(std::launch::deferred,
                      [sent = InvokeAsync(*client, f.mode, active_libraries::grep(), "grep.scan",
                                          EncodeRequest(r))]() mutable -> absl::StatusOr<Batch> {
                        ARDMA_ASSIGN_OR_RETURN(std::string reply, sent.get());
                        return DecodeBatch(std::move(reply));
                      });
  };
  if (f.mode == Mode::kActive) {
    for (Share& share : shares) {  // the library everywhere first: then the requests go together
      if (!share.failed.ok()) continue;
      absl::Status loaded = EnsureLoaded(*share.client, active_libraries::grep());
      if (!loaded.ok() && Unreachable(loaded)) share.failed = loaded;
    }
  }
  for (Share& share : shares) {
    if (share.failed.ok()) share.next = fetch(share.client, share.req);
  }
  bool unreadable = false;
  for (size_t k = 0; k < paths.size() && !(f.quiet && printer.selected()); ++k) {
    Share& share = shares[place[k].first];
    const uint32_t local = place[k].second;
    for (;;) {
      if (!share.failed.ok()) {
        // Its member is down: like GNU grep on a file it cannot read, say so and go on.
        if (!f.suppress) {
          std::cerr << "ardma-grep: " << names[k] << ": " << dfs::ErrnoText(share.failed) << "\n";
        }
        unreadable = true;
        break;
      }
      if (!share.batch) {
        share.batch = share.next.get();
        share.pos = 0;
        if (!share.batch->ok()) {
          if (!Unreachable(share.batch->status())) {
            std::cerr << "ardma-grep: " << share.batch->status().message() << "\n";
            return 2;
          }
          share.failed = share.batch->status();
          continue;
        }
        if (!(**share.batch).next.done) {
          share.req.cursor = (**share.batch).next;
          share.next = fetch(share.client, share.req);
        }
      }
      const Batch& batch = **share.batch;
      while (share.pos < batch.records.size() && batch.records[share.pos].file == local) {
        Record r = batch.records[share.pos++];
        r.file = static_cast<uint32_t>(k);
        printer.Print(r);
      }
      if (share.pos < batch.records.size() || batch.next.done) break;  // on to the next file
      share.batch.reset();  // this file may go on in the share's next batch
    }
  }
  for (Share& share : shares) {
    if (share.next.valid()) share.next.wait();  // (a -q run leaves batches unread)
  }
  std::fflush(stdout);
  if (f.quiet && printer.selected()) return 0;
  if (printer.error() || operand_error || unreadable) return 2;
  return printer.selected() ? 0 : 1;
}

}  // namespace ardma::grep
