// Runs a parsed ardma-grep command: expands the operands, asks the server for batches and prints
// them as GNU grep would.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "apps/grep/grep_cli.h"
#include "apps/grep/grep_matcher.h"
#include "core/client/client.h"
#include "services/dfs/dfs_client.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(grep);

namespace ardma::grep {
namespace {

// Formats records as GNU grep does.
class Printer {
 public:
  Printer(const Command& f, const std::vector<std::string>& names, bool with_filename)
      : f_(f),
        names_(names),
        with_filename_(with_filename),
        context_(f.options.before > 0 || f.options.after > 0) {}

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
      case RecordKind::kError:
        error_ = true;
        if (!f_.suppress) {
          std::fflush(stdout);
          std::fprintf(stderr, "ardma-grep: %s: %s\n", names_[r.file].c_str(), r.text.c_str());
        }
        break;
    }
  }

  bool selected() const { return selected_; }
  bool error() const { return error_; }

 private:
  std::string Colored(const char* sgr, std::string_view text) const {
    if (!f_.color) return std::string(text);
    return absl::StrCat("\33[", sgr, "m\33[K", absl::string_view(text.data(), text.size()),
                        "\33[m\33[K");
  }
  std::string Prefix(const Record& r, char sep) const {
    std::string out;
    std::string s(1, sep);
    if (with_filename_) absl::StrAppend(&out, Colored("35", names_[r.file]), Colored("36", s));
    if (f_.line_numbers)
      absl::StrAppend(&out, Colored("32", absl::StrCat(r.line)), Colored("36", s));
    return out;
  }

  void Line(const Record& r) {
    bool selected = r.kind == RecordKind::kSelected;
    if (selected) selected_ = true;
    if (context_ && printed_ && (r.file != last_file_ || r.line != last_line_ + 1)) {
      std::printf("%s\n", Colored("36", "--").c_str());
    }
    printed_ = true;
    last_file_ = r.file;
    last_line_ = r.line;
    if (f_.only_matching) {
      if (!selected) return;
      for (auto [start, len] : r.spans) {
        std::string out = Prefix(r, ':');
        out += Colored("01;31", std::string_view(r.text).substr(start, len));
        out += '\n';
        std::fwrite(out.data(), 1, out.size(), stdout);
      }
      return;
    }
    std::string out = Prefix(r, selected ? ':' : '-');
    if (selected && f_.color && !r.spans.empty()) {
      size_t at = 0;
      for (auto [start, len] : r.spans) {
        out.append(r.text, at, start - at);
        out += Colored("01;31", std::string_view(r.text).substr(start, len));
        at = start + len;
      }
      out.append(r.text, at, std::string::npos);
    } else {
      out += r.text;
    }
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
  }

  void Count(const Record& r) {
    switch (f_.options.report) {
      case Report::kCount: {
        if (r.line > 0) selected_ = true;
        std::string out;
        if (with_filename_)
          absl::StrAppend(&out, Colored("35", names_[r.file]), Colored("36", ":"));
        absl::StrAppend(&out, r.line, "\n");
        std::fwrite(out.data(), 1, out.size(), stdout);
        break;
      }
      case Report::kFilesWithMatch:
        selected_ = true;
        std::printf("%s\n", Colored("35", names_[r.file]).c_str());
        break;
      case Report::kFilesWithout:  // the exit status still follows selected lines, as GNU's
        if (r.line > 0) {
          selected_ = true;
        } else {
          std::printf("%s\n", Colored("35", names_[r.file]).c_str());
        }
        break;
      case Report::kQuiet:
        selected_ = true;
        break;
      case Report::kLines:
        break;
    }
  }

  const Command& f_;
  const std::vector<std::string>& names_;
  const bool with_filename_;
  const bool context_;
  bool printed_ = false;
  uint32_t last_file_ = 0;
  uint64_t last_line_ = 0;
  bool selected_ = false;
  bool error_ = false;
};

}  // namespace

int RunCommand(const Command& command) {
  if (absl::StatusOr<Matcher> m = Matcher::Compile(command.options); !m.ok()) {
    std::cerr << "ardma-grep: " << m.status().message() << "\n";
    return 2;
  }
  if (command.max_zero) return 1;
  const Command& f = command;
  const std::vector<std::string>& operands = f.operands;
  if (operands.empty()) {
    return UsageError("no FILE given (ardma-grep searches dfs:/PATH files only)");
  }
  absl::StatusOr<ClientOptions> options = OptionsWithAuthFile(f.auth_file);
  absl::StatusOr<std::unique_ptr<Client>> client =
      options.ok() ? Client::Connect(f.server, *options) : options.status();
  if (!client.ok()) {
    std::cerr << "ardma-grep: " << client.status().message() << "\n";
    return 2;
  }
  // Operands: dfs:/PATH; with -r, directories expand to their files in sorted path order.
  dfs::DfsClient fs(client->get(), Mode::kActive, f.fs);
  std::vector<std::string> names, paths;
  bool operand_error = false;
  for (const std::string& operand : operands) {
    if (operand.rfind("dfs:", 0) != 0) {
      if (!f.suppress) std::cerr << "ardma-grep: " << operand << ": not a dfs:/PATH file\n";
      operand_error = true;
      continue;
    }
    std::string path = operand.substr(4);
    if (f.recursive) {
      absl::StatusOr<dfs::Stat> st = fs.Lookup(path);
      if (st.ok() && st->type == dfs::FileType::kDirectory) {
        std::vector<std::string> found;
        std::string cursor;
        for (;;) {
          absl::StatusOr<dfs::FindPage> page = fs.Find(path, cursor, 4096);
          if (!page.ok()) {
            std::cerr << "ardma-grep: " << operand << ": " << page.status().message() << "\n";
            return 2;
          }
          for (const auto& e : page->entries) {
            if (e.type == dfs::FileType::kFile) found.push_back(e.path);
          }
          if (page->done) break;
          cursor = page->next;
        }
        std::sort(found.begin(), found.end());
        for (const std::string& p : found) {
          names.push_back("dfs:" + p);
          paths.push_back(p);
        }
        continue;
      }
    }
    names.push_back(operand);
    paths.push_back(path);
  }
  bool with_filename =
      f.with_filename == -1 ? (names.size() > 1 || f.recursive) : f.with_filename == 1;
  Printer printer(f, names, with_filename);
  Request req;
  req.fs = f.fs;
  req.files = paths;
  req.options = f.options;
  while (!req.files.empty() && !req.cursor.done) {
    absl::StatusOr<std::string> reply =
        Invoke(**client, f.mode, active_libraries::grep(), "grep.scan", EncodeRequest(req));
    if (!reply.ok()) {
      std::cerr << "ardma-grep: " << reply.status().message() << "\n";
      return 2;
    }
    absl::StatusOr<Batch> batch = DecodeBatch(*reply);
    if (!batch.ok()) {
      std::cerr << "ardma-grep: " << batch.status().message() << "\n";
      return 2;
    }
    for (const Record& r : batch->records) printer.Print(r);
    req.cursor = std::move(batch->next);
  }
  std::fflush(stdout);
  if (f.quiet && printer.selected()) return 0;
  if (printer.error() || operand_error) return 2;
  return printer.selected() ? 0 : 1;
}

}  // namespace ardma::grep
