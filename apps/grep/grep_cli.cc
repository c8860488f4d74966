#include "apps/grep/grep_cli.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace ardma::grep {

namespace {

constexpr char kUsageLine[] = "Usage: ardma-grep [OPTION]... PATTERNS [dfs:FILE]...";

bool ParseCount(std::string_view text, uint64_t* out) {
  return absl::SimpleAtoi(ToAbsl(text), out);
}

// What the options gather before the command is complete.
struct Gathered {
  std::vector<std::string> patterns;
  bool patterns_given = false;
  bool count = false, list = false, list_without = false;
  std::string color_when = "never";
};

using Arg = FlagSet::Argument;
using OnOption = FlagSet::OnOption;

// An option that sets `*field` to `value`.
template <typename T>
OnOption Sets(T* field, T value) {
  return [field, value](std::optional<std::string_view>) {
    *field = value;
    return absl::OkStatus();
  };
}

// An option whose argument is appended to `*list`.
OnOption Appends(std::vector<std::string>* list) {
  return [list](std::optional<std::string_view> v) {
    list->emplace_back(*v);
    return absl::OkStatus();
  };
}

// grep's options on `flags`, gathering into `f` and `g`: the one table that parses and documents.
void DeclareFlags(FlagSet& flags, Command* f, Gathered* g) {
  Options& o = f->options;
  flags.Section("Pattern selection and interpretation:");
  flags.Option("extended-regexp", 'E', Arg::kNone, "", "PATTERNS are extended regular expressions",
               Sets(&o.syntax, Syntax::kExtended));
  flags.Option("fixed-strings", 'F', Arg::kNone, "", "PATTERNS are strings",
               Sets(&o.syntax, Syntax::kFixed));
  flags.Option("basic-regexp", 'G', Arg::kNone, "",
               "PATTERNS are basic regular expressions (default)", Sets(&o.syntax, Syntax::kBasic));
  flags.Option("perl-regexp", 'P', Arg::kNone, "",
               "PATTERNS are Perl regular expressions (PCRE2, on the server)",
               Sets(&o.syntax, Syntax::kPerl));
  flags.Option("regexp", 'e', Arg::kRequired, "PATTERNS", "use PATTERNS for matching (repeatable)",
               [g](std::optional<std::string_view> v) {
                 g->patterns.emplace_back(*v);
                 g->patterns_given = true;
                 return absl::OkStatus();
               });
  flags.Option("file", 'f', Arg::kRequired, "FILE",
               "take PATTERNS from FILE (one per line; - for standard input)",
               [g](std::optional<std::string_view> v) {  // an empty file has no pattern
                 std::string name(*v);
                 std::ifstream in;
                 if (name != "-") in.open(name, std::ios::binary);
                 std::istream& src = name == "-" ? std::cin : in;
                 if (name != "-" && !in) {
                   return absl::NotFoundError(name + ": No such file or directory");
                 }
                 for (std::string line; std::getline(src, line);) g->patterns.push_back(line);
                 g->patterns_given = true;
                 return absl::OkStatus();
               });
  flags.Option("ignore-case", 'i', Arg::kNone, "", "ignore case distinctions",
               Sets(&o.ignore_case, true));
  flags.Short('y', "ignore-case");
  flags.Option("word-regexp", 'w', Arg::kNone, "", "match only whole words", Sets(&o.word, true));
  flags.Option("line-regexp", 'x', Arg::kNone, "", "match only whole lines", Sets(&o.line, true));
  flags.Option("null-data", 'z', Arg::kNone, "", "lines end in NUL bytes, not newlines",
               Sets(&o.null_data, true));

  flags.Section("Miscellaneous:");
  flags.Option("no-messages", 's', Arg::kNone, "", "suppress error messages about files",
               Sets(&f->suppress, true));
  flags.Option("invert-match", 'v', Arg::kNone, "", "select non-matching lines",
               Sets(&o.invert, true));
  flags.Option("text", 'a', Arg::kNone, "", "search binary files as text", Sets(&o.text, true));

  flags.Section("Output control:");
  flags.Option("max-count", 'm', Arg::kRequired, "NUM", "stop after NUM selected lines per file",
               [f](std::optional<std::string_view> v) {
                 uint64_t n = 0;
                 if (!ParseCount(*v, &n)) return absl::InvalidArgumentError("invalid max count");
                 f->options.max_count = n;
                 f->max_zero = n == 0;
                 return absl::OkStatus();
               });
  flags.Option("line-number", 'n', Arg::kNone, "", "print line numbers",
               Sets(&f->line_numbers, true));
  flags.Option("byte-offset", 'b', Arg::kNone, "",
               "print the byte offset of each line (with -o: of each match)",
               Sets(&f->byte_offset, true));
  flags.Option("null", 'Z', Arg::kNone, "", "print a 0 byte after each FILE name",
               Sets(&f->null_after_name, true));
  flags.Option("initial-tab", 'T', Arg::kNone, "", "make tabs line up (if needed)",
               Sets(&f->initial_tab, true));
  flags.Option("line-buffered", 0, Arg::kNone, "", "flush output after every line",
               Sets(&f->line_buffered, true));
  flags.Option("with-filename", 'H', Arg::kNone, "", "print the file name for each match",
               Sets(&f->with_filename, 1));
  flags.Option("no-filename", 'h', Arg::kNone, "", "suppress the file name prefix",
               Sets(&f->with_filename, 0));
  flags.Option("only-matching", 'o', Arg::kNone, "", "show only the matching parts of lines",
               Sets(&f->only_matching, true));
  flags.Option("quiet", 'q', Arg::kNone, "", "print nothing; exit 0 at the first match",
               Sets(&f->quiet, true));
  flags.Alias("silent", "quiet");
  flags.Option("recursive", 'r', Arg::kNone, "",
               "search directories recursively (files in sorted path order); symbolic links "
               "are followed only if they are on the command line",
               Sets(&f->recursive, true));
  flags.Option("dereference-recursive", 'R', Arg::kNone, "",
               "likewise, but follow all symbolic links", [f](std::optional<std::string_view>) {
                 f->recursive = f->dereference = true;  // (a later -r keeps following, as GNU)
                 return absl::OkStatus();
               });
  // GNU's precedence: the last --include/--exclude that matches a name decides; a name none
  // matches is searched unless the first of them was an --include.
  auto filter = [f](bool include) -> OnOption {
    return [f, include](std::optional<std::string_view> v) {
      f->name_filters.emplace_back(include, std::string(*v));
      return absl::OkStatus();
    };
  };
  flags.Option("include", 0, Arg::kRequired, "GLOB",
               "search only files whose base name matches GLOB", filter(true));
  flags.Option("exclude", 0, Arg::kRequired, "GLOB", "skip files whose base name matches GLOB",
               filter(false));
  flags.Option("exclude-dir", 0, Arg::kRequired, "GLOB",
               "skip directories whose base name matches GLOB (with -r)", Appends(&f->exclude_dir));
  flags.Option("files-without-match", 'L', Arg::kNone, "",
               "print only names of files with no selected lines", Sets(&g->list_without, true));
  flags.Option("files-with-matches", 'l', Arg::kNone, "",
               "print only names of files with selected lines", Sets(&g->list, true));
  flags.Option("count", 'c', Arg::kNone, "", "print only a count of selected lines per file",
               Sets(&g->count, true));

  flags.Section("Context control:");
  auto context = [f](char which) -> OnOption {
    return [f, which](std::optional<std::string_view> v) {
      uint64_t n = 0;
      if (!ParseCount(*v, &n) || n > 1000000) {
        return absl::InvalidArgumentError(
            absl::StrCat(ToAbsl(*v), ": invalid context length argument"));
      }
      if (which != 'B') f->options.after = static_cast<uint32_t>(n);
      if (which != 'A') f->options.before = static_cast<uint32_t>(n);
      f->context_given = true;
      return absl::OkStatus();
    };
  };
  flags.Option("before-context", 'B', Arg::kRequired, "NUM", "print NUM lines of leading context",
               context('B'));
  flags.Option("after-context", 'A', Arg::kRequired, "NUM", "print NUM lines of trailing context",
               context('A'));
  flags.Option("context", 'C', Arg::kRequired, "NUM", "print NUM lines of output context",
               context('C'));
  flags.Option(
      "color", 0, Arg::kOptional, "WHEN",
      "highlight matches: never, always or auto (a terminal);\n"
      "colours from $GREP_COLORS as GNU grep's",
      [g](std::optional<std::string_view> v) {
        g->color_when = std::string(v.value_or("auto"));
        if (g->color_when != "never" && g->color_when != "always" && g->color_when != "auto") {
          return absl::InvalidArgumentError("invalid argument '" + g->color_when +
                                            "' for '--color'");
        }
        return absl::OkStatus();
      });
  flags.Alias("colour", "color");
  flags.Option("group-separator", 0, Arg::kRequired, "SEP",
               "print SEP between groups of context lines (default --)",
               [f](std::optional<std::string_view> v) {
                 f->group_separator = std::string(*v);
                 return absl::OkStatus();
               });
  flags.Option("no-group-separator", 0, Arg::kNone, "", "no separator between groups",
               [f](std::optional<std::string_view>) {
                 f->group_separator.reset();
                 return absl::OkStatus();
               });

  flags.Section("ardma:");
  f->Declare(flags);
  flags.Short('V', "version");
}

}  // namespace

std::string Help() {
  Command f;
  Gathered g;
  FlagSet flags("ardma-grep",
                absl::StrCat(kUsageLine,
                             "\nSearch for PATTERNS in files of an ardmad's file system, on the "
                             "server.\nOutput, options and exit status follow GNU grep (in the C "
                             "locale); FILEs are dfs:/PATH.\n"));
  DeclareFlags(flags, &f, &g);
  return flags.GnuHelp(
      "BRE/ERE patterns use GNU's syntax, run by RE2; back-references need -P (PCRE2).\n"
      "Exit status: 0 if a line is selected, 1 if none, 2 if an error occurred (unless -q "
      "matched).");
}

int UsageError(std::string_view message) {
  std::cerr << "ardma-grep: " << message << "\nUsage: ardma-grep [OPTION]... PATTERNS [FILE]...\n"
            << "Try 'ardma-grep --help' for more information.\n";
  return 2;
}

absl::StatusOr<Command> ParseCommandLine(int argc, char** argv) {
  Command f;
  Gathered g;
  FlagSet flags("ardma-grep", kUsageLine);
  DeclareFlags(flags, &f, &g);
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> operands, flags.ParseGnu(argc, argv));
  f.help = flags.help_requested();
  f.version = flags.version_requested();
  if (f.help || f.version) return f;
  auto next = operands.begin();
  if (!g.patterns_given) {
    if (next == operands.end()) return absl::InvalidArgumentError("no PATTERNS given");
    g.patterns.push_back(*next++);
  }
  f.options.patterns = g.patterns;
  if (f.quiet) {
    f.options.report = Report::kQuiet;
  } else if (g.list) {
    f.options.report = Report::kFilesWithMatch;
  } else if (g.list_without) {
    f.options.report = Report::kFilesWithout;
  } else if (g.count) {
    f.options.report = Report::kCount;
  }
  f.color = g.color_when == "always" ||
            (g.color_when == "auto" && isatty(STDOUT_FILENO) && std::getenv("TERM") != nullptr &&
             std::string(std::getenv("TERM")) != "dumb");
  f.options.spans = f.only_matching || f.color;
  f.options.numbers = f.line_numbers || f.context_given;  // (context groups by line number)
  f.options.sizes = f.initial_tab;  // -T pads numbers to the width of the file's size
  if (f.options.report != Report::kLines) {
    f.options.before = f.options.after = 0;
    f.context_given = false;
  }
  f.operands.assign(next, operands.end());
  return f;
}

}  // namespace ardma::grep
