// ardma-grep: GNU grep for files in an ardmad's file system. The pattern and options go to the
// server, which scans the files next to the data and answers in bounded batches (one round trip
// each); this program only formats the batches exactly as GNU grep formats its output.
#include <getopt.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "apps/grep/grep_format.h"
#include "apps/grep/grep_matcher.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/host_port.h"
#include "services/dfs/dfs_client.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(grep);

namespace {

using ardma::grep::Record;
using ardma::grep::RecordKind;
using ardma::grep::Report;

constexpr char kUsage[] =
    "Usage: ardma-grep [OPTION]... PATTERNS [dfs:FILE]...\n"
    "Search for PATTERNS in files of an ardmad's file system, on the server.\n"
    "Output, options and exit status follow GNU grep (in the C locale); FILEs are dfs:/PATH.\n"
    "\n"
    "Pattern selection and interpretation:\n"
    "  -E, --extended-regexp     PATTERNS are extended regular expressions\n"
    "  -F, --fixed-strings       PATTERNS are strings\n"
    "  -G, --basic-regexp        PATTERNS are basic regular expressions (default)\n"
    "  -e, --regexp=PATTERNS     use PATTERNS for matching (repeatable)\n"
    "  -i, --ignore-case         ignore case distinctions\n"
    "  -w, --word-regexp         match only whole words\n"
    "  -x, --line-regexp         match only whole lines\n"
    "Miscellaneous:\n"
    "  -s, --no-messages         suppress error messages about files\n"
    "  -v, --invert-match        select non-matching lines\n"
    "Output control:\n"
    "  -m, --max-count=NUM       stop after NUM selected lines per file\n"
    "  -n, --line-number         print line numbers\n"
    "  -H, --with-filename       print the file name for each match\n"
    "  -h, --no-filename         suppress the file name prefix\n"
    "  -o, --only-matching       show only the matching parts of lines\n"
    "  -q, --quiet, --silent     print nothing; exit 0 at the first match\n"
    "  -r, --recursive           search directories recursively (files in sorted path order)\n"
    "  -L, --files-without-match print only names of files with no selected lines\n"
    "  -l, --files-with-matches  print only names of files with selected lines\n"
    "  -c, --count               print only a count of selected lines per file\n"
    "Context control:\n"
    "  -B, --before-context=NUM  print NUM lines of leading context\n"
    "  -A, --after-context=NUM   print NUM lines of trailing context\n"
    "  -C, --context=NUM         print NUM lines of output context\n"
    "      --color[=WHEN]        highlight matches: never, always or auto (a terminal)\n"
    "ardma:\n"
    "      --server=HOST:PORT    the ardmad ($ARDMA_SERVER, else 127.0.0.1:15712)\n"
    "      --fs=NAME             the file system (default: default)\n"
    "      --mode=active|rdma    scan on the server (default) or here over one-sided reads\n"
    "      --help                show this help\n"
    "\n"
    "Patterns use GNU BRE/ERE syntax translated to RE2; back-references are not supported.\n"
    "Exit status: 0 if a line is selected, 1 if none, 2 if an error occurred (unless -q matched).";

struct Flags {
  ardma::grep::Options options;
  bool line_numbers = false;
  int with_filename = -1;  // -1: by the number of files
  bool only_matching = false;
  bool suppress = false;
  bool recursive = false;
  bool color = false;
  std::string server = ardma::DefaultServerAddress();
  std::string fs = "default";
  ardma::Mode mode = ardma::Mode::kActive;
};

int UsageError(const std::string& message) {
  std::cerr << "ardma-grep: " << message << "\nUsage: ardma-grep [OPTION]... PATTERNS [FILE]...\n"
            << "Try 'ardma-grep --help' for more information.\n";
  return 2;
}

bool ParseCount(const char* text, uint64_t* out) { return absl::SimpleAtoi(text, out); }

// Formats records as GNU grep does.
class Printer {
 public:
  Printer(const Flags& f, const std::vector<std::string>& names, bool with_filename)
      : f_(f), names_(names), with_filename_(with_filename),
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
    return absl::StrCat("\33[", sgr, "m\33[K", absl::string_view(text.data(), text.size()), "\33[m\33[K");
  }
  std::string Prefix(const Record& r, char sep) const {
    std::string out;
    std::string s(1, sep);
    if (with_filename_) absl::StrAppend(&out, Colored("35", names_[r.file]), Colored("36", s));
    if (f_.line_numbers) absl::StrAppend(&out, Colored("32", absl::StrCat(r.line)), Colored("36", s));
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
        if (with_filename_) absl::StrAppend(&out, Colored("35", names_[r.file]), Colored("36", ":"));
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

  const Flags& f_;
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

int main(int argc, char** argv) {
  Flags f;
  std::vector<std::string> patterns;
  std::string color_when = "never";
  enum { kColor = 1000, kServer, kFs, kMode, kHelp };
  static const option kLong[] = {
      {"extended-regexp", no_argument, nullptr, 'E'},
      {"fixed-strings", no_argument, nullptr, 'F'},
      {"basic-regexp", no_argument, nullptr, 'G'},
      {"regexp", required_argument, nullptr, 'e'},
      {"ignore-case", no_argument, nullptr, 'i'},
      {"word-regexp", no_argument, nullptr, 'w'},
      {"line-regexp", no_argument, nullptr, 'x'},
      {"no-messages", no_argument, nullptr, 's'},
      {"invert-match", no_argument, nullptr, 'v'},
      {"max-count", required_argument, nullptr, 'm'},
      {"line-number", no_argument, nullptr, 'n'},
      {"with-filename", no_argument, nullptr, 'H'},
      {"no-filename", no_argument, nullptr, 'h'},
      {"only-matching", no_argument, nullptr, 'o'},
      {"quiet", no_argument, nullptr, 'q'},
      {"silent", no_argument, nullptr, 'q'},
      {"recursive", no_argument, nullptr, 'r'},
      {"files-without-match", no_argument, nullptr, 'L'},
      {"files-with-matches", no_argument, nullptr, 'l'},
      {"count", no_argument, nullptr, 'c'},
      {"before-context", required_argument, nullptr, 'B'},
      {"after-context", required_argument, nullptr, 'A'},
      {"context", required_argument, nullptr, 'C'},
      {"color", optional_argument, nullptr, kColor},
      {"colour", optional_argument, nullptr, kColor},
      {"server", required_argument, nullptr, kServer},
      {"fs", required_argument, nullptr, kFs},
      {"mode", required_argument, nullptr, kMode},
      {"help", no_argument, nullptr, kHelp},
      {nullptr, 0, nullptr, 0}};
  bool count = false, list = false, list_without = false, quiet = false, max_zero = false;
  opterr = 0;
  int opt;
  while ((opt = getopt_long(argc, argv, "EFGe:iywxsvm:nHhoqrRLlcB:A:C:", kLong, nullptr)) != -1) {
    uint64_t n = 0;
    switch (opt) {
      case 'E':
        f.options.syntax = ardma::grep::Syntax::kExtended;
        break;
      case 'F':
        f.options.syntax = ardma::grep::Syntax::kFixed;
        break;
      case 'G':
        f.options.syntax = ardma::grep::Syntax::kBasic;
        break;
      case 'e':
        patterns.emplace_back(optarg);
        break;
      case 'i':
      case 'y':
        f.options.ignore_case = true;
        break;
      case 'w':
        f.options.word = true;
        break;
      case 'x':
        f.options.line = true;
        break;
      case 's':
        f.suppress = true;
        break;
      case 'v':
        f.options.invert = true;
        break;
      case 'm':
        if (!ParseCount(optarg, &n)) return UsageError(absl::StrCat("invalid max count"));
        f.options.max_count = n;
        max_zero = n == 0;  // -m 0: select nothing (GNU grep exits 1 at once)
        break;
      case 'n':
        f.line_numbers = true;
        break;
      case 'H':
        f.with_filename = 1;
        break;
      case 'h':
        f.with_filename = 0;
        break;
      case 'o':
        f.only_matching = true;
        break;
      case 'q':
        quiet = true;
        break;
      case 'r':
      case 'R':
        f.recursive = true;
        break;
      case 'L':
        list_without = true;
        break;
      case 'l':
        list = true;
        break;
      case 'c':
        count = true;
        break;
      case 'A':
      case 'B':
      case 'C':
        if (!ParseCount(optarg, &n) || n > 1000000) {
          return UsageError(absl::StrCat(optarg, ": invalid context length argument"));
        }
        if (opt != 'B') f.options.after = static_cast<uint32_t>(n);
        if (opt != 'A') f.options.before = static_cast<uint32_t>(n);
        break;
      case kColor:
        color_when = optarg != nullptr ? optarg : "auto";
        if (color_when != "never" && color_when != "always" && color_when != "auto") {
          return UsageError("invalid argument '" + color_when + "' for '--color'");
        }
        break;
      case kServer:
        f.server = optarg;
        break;
      case kFs:
        f.fs = optarg;
        break;
      case kMode: {
        absl::StatusOr<ardma::Mode> mode = ardma::ParseMode(optarg);
        if (!mode.ok()) return UsageError(std::string(mode.status().message()));
        f.mode = *mode;
        break;
      }
      case kHelp:
        std::cout << kUsage << "\n";
        return 0;
      default:
        return UsageError(optopt != 0 ? absl::StrCat("invalid option -- '", std::string(1, static_cast<char>(optopt)), "'")
                                      : absl::StrCat("unrecognized option '", argv[optind - 1], "'"));
    }
  }
  if (patterns.empty()) {
    if (optind >= argc) return UsageError("no PATTERNS given");
    patterns.emplace_back(argv[optind++]);
  }
  f.options.patterns = patterns;
  if (quiet) {
    f.options.report = Report::kQuiet;
  } else if (list) {
    f.options.report = Report::kFilesWithMatch;
  } else if (list_without) {
    f.options.report = Report::kFilesWithout;
  } else if (count) {
    f.options.report = Report::kCount;
  }
  f.color = color_when == "always" ||
            (color_when == "auto" && isatty(STDOUT_FILENO) && std::getenv("TERM") != nullptr &&
             std::string(std::getenv("TERM")) != "dumb");
  f.options.spans = f.only_matching || f.color;
  if (f.options.report != Report::kLines) f.options.before = f.options.after = 0;
  if (absl::StatusOr<ardma::grep::Matcher> m = ardma::grep::Matcher::Compile(f.options); !m.ok()) {
    std::cerr << "ardma-grep: " << m.status().message() << "\n";
    return 2;
  }
  if (max_zero) return 1;
  std::vector<std::string> operands(argv + optind, argv + argc);
  if (operands.empty()) {
    return UsageError("no FILE given (ardma-grep searches dfs:/PATH files only)");
  }
  absl::StatusOr<std::unique_ptr<ardma::Client>> client = ardma::Client::Connect(f.server);
  if (!client.ok()) {
    std::cerr << "ardma-grep: " << client.status().message() << "\n";
    return 2;
  }
  // Operands: dfs:/PATH; with -r, directories expand to their files in sorted path order.
  ardma::dfs::DfsClient fs(client->get(), ardma::Mode::kActive, f.fs);
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
      absl::StatusOr<ardma::dfs::Stat> st = fs.Lookup(path);
      if (st.ok() && st->type == ardma::dfs::FileType::kDirectory) {
        std::vector<std::string> found;
        std::string cursor;
        for (;;) {
          absl::StatusOr<ardma::dfs::FindPage> page = fs.Find(path, cursor, 4096);
          if (!page.ok()) {
            std::cerr << "ardma-grep: " << operand << ": " << page.status().message() << "\n";
            return 2;
          }
          for (const auto& e : page->entries) {
            if (e.type == ardma::dfs::FileType::kFile) found.push_back(e.path);
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
  bool with_filename = f.with_filename == -1 ? (names.size() > 1 || f.recursive) : f.with_filename == 1;
  Printer printer(f, names, with_filename);
  ardma::grep::Request req;
  req.fs = f.fs;
  req.files = paths;
  req.options = f.options;
  while (!req.files.empty() && !req.cursor.done) {
    absl::StatusOr<std::string> reply = ardma::Invoke(**client, f.mode, ardma::active_libraries::grep(),
                                                      "grep.scan", ardma::grep::EncodeRequest(req));
    if (!reply.ok()) {
      std::cerr << "ardma-grep: " << reply.status().message() << "\n";
      return 2;
    }
    absl::StatusOr<ardma::grep::Batch> batch = ardma::grep::DecodeBatch(*reply);
    if (!batch.ok()) {
      std::cerr << "ardma-grep: " << batch.status().message() << "\n";
      return 2;
    }
    for (const Record& r : batch->records) printer.Print(r);
    req.cursor = std::move(batch->next);
  }
  std::fflush(stdout);
  if (quiet && printer.selected()) return 0;
  if (printer.error() || operand_error) return 2;
  return printer.selected() ? 0 : 1;
}
