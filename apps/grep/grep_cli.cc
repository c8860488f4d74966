#include "apps/grep/grep_cli.h"

#include <getopt.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ardma::grep {

const char kUsage[] =
    "Usage: ardma-grep [OPTION]... PATTERNS [dfs:FILE]...\n"
    "Search for PATTERNS in files of an ardmad's file system, on the server.\n"
    "Output, options and exit status follow GNU grep (in the C locale); FILEs are dfs:/PATH.\n"
    "\n"
    "Pattern selection and interpretation:\n"
    "  -E, --extended-regexp     PATTERNS are extended regular expressions\n"
    "  -F, --fixed-strings       PATTERNS are strings\n"
    "  -G, --basic-regexp        PATTERNS are basic regular expressions (default)\n"
    "  -P, --perl-regexp         PATTERNS are Perl regular expressions (PCRE2, on the server)\n"
    "  -e, --regexp=PATTERNS     use PATTERNS for matching (repeatable)\n"
    "  -i, --ignore-case         ignore case distinctions\n"
    "  -w, --word-regexp         match only whole words\n"
    "  -x, --line-regexp         match only whole lines\n"
    "  -f, --file=FILE           take PATTERNS from FILE (one per line; - for standard input)\n"
    "  -z, --null-data           lines end in NUL bytes, not newlines\n"
    "Miscellaneous:\n"
    "  -s, --no-messages         suppress error messages about files\n"
    "  -v, --invert-match        select non-matching lines\n"
    "  -a, --text                search binary files as text\n"
    "Output control:\n"
    "  -m, --max-count=NUM       stop after NUM selected lines per file\n"
    "  -n, --line-number         print line numbers\n"
    "  -b, --byte-offset         print the byte offset of each line (with -o: of each match)\n"
    "      --line-buffered       flush output after every line\n"
    "  -H, --with-filename       print the file name for each match\n"
    "  -h, --no-filename         suppress the file name prefix\n"
    "  -o, --only-matching       show only the matching parts of lines\n"
    "  -q, --quiet, --silent     print nothing; exit 0 at the first match\n"
    "  -r, --recursive           search directories recursively (files in sorted path order)\n"
    "      --include=GLOB        search only files whose base name matches GLOB\n"
    "      --exclude=GLOB        skip files whose base name matches GLOB\n"
    "      --exclude-dir=GLOB    skip directories whose base name matches GLOB (with -r)\n"
    "  -L, --files-without-match print only names of files with no selected lines\n"
    "  -l, --files-with-matches  print only names of files with selected lines\n"
    "  -c, --count               print only a count of selected lines per file\n"
    "Context control:\n"
    "  -B, --before-context=NUM  print NUM lines of leading context\n"
    "  -A, --after-context=NUM   print NUM lines of trailing context\n"
    "  -C, --context=NUM         print NUM lines of output context\n"
    "      --color[=WHEN]        highlight matches: never, always or auto (a terminal);\n"
    "                            colours from $GREP_COLORS as GNU grep's\n"
    "      --group-separator=SEP  print SEP between groups of context lines (default --)\n"
    "      --no-group-separator  no separator between groups\n"
    "ardma:\n"
    "      --server=HOST:PORT    the ardmad ($ARDMA_SERVER, else 127.0.0.1:15712)\n"
    "      --auth-file=FILE      authenticate as FILE's NAME SECRET (default $ARDMA_AUTH_FILE)\n"
    "      --fs=NAME             the file system (default: default)\n"
    "      --mode=active|rdma    scan on the server (default) or here over one-sided reads\n"
    "      --help                show this help\n"
    "  -V, --version             print the version and commit\n"
    "\n"
    "BRE/ERE patterns use GNU's syntax, run by RE2; back-references need -P (PCRE2).\n"
    "Exit status: 0 if a line is selected, 1 if none, 2 if an error occurred (unless -q matched).";

namespace {

absl::Status Usage(const std::string& message) { return absl::InvalidArgumentError(message); }

bool ParseCount(const char* text, uint64_t* out) { return absl::SimpleAtoi(text, out); }

}  // namespace

int UsageError(std::string_view message) {
  std::cerr << "ardma-grep: " << message << "\nUsage: ardma-grep [OPTION]... PATTERNS [FILE]...\n"
            << "Try 'ardma-grep --help' for more information.\n";
  return 2;
}

absl::StatusOr<Command> ParseCommandLine(int argc, char** argv) {
  optind = 0;  // glibc: start a fresh scan (the library may parse more than once)
  Command f;
  std::vector<std::string> patterns;
  std::string color_when = "never";
  enum {
    kColor = 1000,
    kServer,
    kFs,
    kMode,
    kHelp,
    kAuthFile,
    kVersion,
    kInclude,
    kExclude,
    kExcludeDir,
    kGroupSeparator,
    kNoGroupSeparator,
    kLineBuffered
  };
  static const option kLong[] = {{"extended-regexp", no_argument, nullptr, 'E'},
                                 {"fixed-strings", no_argument, nullptr, 'F'},
                                 {"basic-regexp", no_argument, nullptr, 'G'},
                                 {"perl-regexp", no_argument, nullptr, 'P'},
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
                                 {"auth-file", required_argument, nullptr, kAuthFile},
                                 {"fs", required_argument, nullptr, kFs},
                                 {"mode", required_argument, nullptr, kMode},
                                 {"help", no_argument, nullptr, kHelp},
                                 {"version", no_argument, nullptr, kVersion},
                                 {"file", required_argument, nullptr, 'f'},
                                 {"text", no_argument, nullptr, 'a'},
                                 {"byte-offset", no_argument, nullptr, 'b'},
                                 {"null-data", no_argument, nullptr, 'z'},
                                 {"include", required_argument, nullptr, kInclude},
                                 {"exclude", required_argument, nullptr, kExclude},
                                 {"exclude-dir", required_argument, nullptr, kExcludeDir},
                                 {"group-separator", required_argument, nullptr, kGroupSeparator},
                                 {"no-group-separator", no_argument, nullptr, kNoGroupSeparator},
                                 {"line-buffered", no_argument, nullptr, kLineBuffered},
                                 {nullptr, 0, nullptr, 0}};
  bool count = false, list = false, list_without = false, patterns_given = false;
  opterr = 0;
  int opt;
  while ((opt = getopt_long(argc, argv, "EFGPe:f:iywxsvVm:nHhoqrRLlcB:A:C:abz", kLong, nullptr)) !=
         -1) {
    uint64_t n = 0;
    switch (opt) {
      case 'E':
        f.options.syntax = Syntax::kExtended;
        break;
      case 'F':
        f.options.syntax = Syntax::kFixed;
        break;
      case 'G':
        f.options.syntax = Syntax::kBasic;
        break;
      case 'P':
        f.options.syntax = Syntax::kPerl;
        break;
      case 'e':
        patterns.emplace_back(optarg);
        patterns_given = true;
        break;
      case 'f': {  // one pattern per line; an empty file has none
        std::string name = optarg;
        std::ifstream in;
        if (name != "-") in.open(name, std::ios::binary);
        std::istream& src = name == "-" ? std::cin : in;
        if (name != "-" && !in) return absl::NotFoundError(name + ": No such file or directory");
        for (std::string line; std::getline(src, line);) patterns.push_back(line);
        patterns_given = true;
        break;
      }
      case 'a':
        f.options.text = true;
        break;
      case 'b':
        f.byte_offset = true;
        break;
      case 'z':
        f.options.null_data = true;
        break;
      case kInclude:
        f.include.emplace_back(optarg);
        break;
      case kExclude:
        f.exclude.emplace_back(optarg);
        break;
      case kExcludeDir:
        f.exclude_dir.emplace_back(optarg);
        break;
      case kGroupSeparator:
        f.group_separator = optarg;
        break;
      case kNoGroupSeparator:
        f.group_separator.reset();
        break;
      case kLineBuffered:
        f.line_buffered = true;
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
        if (!ParseCount(optarg, &n)) return Usage(absl::StrCat("invalid max count"));
        f.options.max_count = n;
        f.max_zero = n == 0;
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
        f.quiet = true;
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
          return Usage(absl::StrCat(optarg, ": invalid context length argument"));
        }
        if (opt != 'B') f.options.after = static_cast<uint32_t>(n);
        if (opt != 'A') f.options.before = static_cast<uint32_t>(n);
        f.context_given = true;
        break;
      case kColor:
        color_when = optarg != nullptr ? optarg : "auto";
        if (color_when != "never" && color_when != "always" && color_when != "auto") {
          return Usage("invalid argument '" + color_when + "' for '--color'");
        }
        break;
      case kServer:
        f.server = optarg;
        break;
      case kAuthFile:
        f.auth_file = optarg;
        break;
      case kFs:
        f.fs = optarg;
        break;
      case kMode: {
        absl::StatusOr<Mode> mode = ParseMode(optarg);
        if (!mode.ok()) return Usage(std::string(mode.status().message()));
        f.mode = *mode;
        break;
      }
      case kHelp:
        f.help = true;
        return f;
      case 'V':
      case kVersion:
        f.version = true;
        return f;
      default:
        return Usage(optopt != 0 ? absl::StrCat("invalid option -- '",
                                                std::string(1, static_cast<char>(optopt)), "'")
                                 : absl::StrCat("unrecognized option '", argv[optind - 1], "'"));
    }
  }
  if (!patterns_given) {
    if (optind >= argc) return Usage("no PATTERNS given");
    patterns.emplace_back(argv[optind++]);
  }
  f.options.patterns = patterns;
  if (f.quiet) {
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
  f.options.numbers = f.line_numbers || f.context_given;  // (context groups by line number)
  if (f.options.report != Report::kLines) {
    f.options.before = f.options.after = 0;
    f.context_given = false;
  }
  f.operands.assign(argv + optind, argv + argc);
  return f;
}

}  // namespace ardma::grep
