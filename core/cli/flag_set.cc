#include "core/cli/flag_set.h"

#include <getopt.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/memory/region.h"
#include "core/status_macros.h"
#include "core/version.h"

namespace ardma {

namespace {

// Wraps a setter of a flag that always takes a value.
FlagSet::OnOption Required(std::function<absl::Status(std::string_view)> set) {
  return [set = std::move(set)](std::optional<std::string_view> v) { return set(v.value_or("")); };
}

}  // namespace

void FlagSet::Add(Flag flag) {
  flag.section = std::exchange(section_, "");
  flags_.push_back(std::move(flag));
}

void FlagSet::String(std::string name, std::string* value, std::string metavar, std::string help) {
  Add({std::move(name), std::move(metavar), std::move(help), *value,
       Required([value](std::string_view v) {
         *value = std::string(v);
         return absl::OkStatus();
       })});
}

void FlagSet::Int(std::string name, int64_t* value, std::string metavar, std::string help) {
  Add({std::move(name), std::move(metavar), std::move(help), absl::StrCat(*value),
       Required([value](std::string_view v) {
         if (!absl::SimpleAtoi(ToAbsl(v), value)) {
           return absl::InvalidArgumentError("expected an integer");
         }
         return absl::OkStatus();
       })});
}

void FlagSet::Bool(std::string name, bool* value, std::string help) {
  Flag f{std::move(name), "", std::move(help), *value ? "true" : "false",
         [value](std::optional<std::string_view> v) {
           if (!v.has_value() || *v == "true" || *v == "1" || *v == "yes") {
             *value = true;
           } else if (*v == "false" || *v == "0" || *v == "no") {
             *value = false;
           } else {
             return absl::InvalidArgumentError("expected true or false");
           }
           return absl::OkStatus();
         }};
  f.argument = Argument::kOptional;
  f.bool_value = value;
  Add(std::move(f));
}

void FlagSet::Bytes(std::string name, uint64_t* value, std::string help) {
  Add({std::move(name), "SIZE", std::move(help), *value ? absl::StrCat(*value) : "",
       Required([value](std::string_view v) -> absl::Status {
         ARDMA_ASSIGN_OR_RETURN(*value, ParseByteSize(v));
         return absl::OkStatus();
       })});
}

void FlagSet::Duration(std::string name, absl::Duration* value, std::string help) {
  Add({std::move(name), "DURATION", std::move(help), absl::FormatDuration(*value),
       Required([value](std::string_view v) {
         double seconds;
         if (absl::SimpleAtod(ToAbsl(v), &seconds) && seconds >= 0) {
           *value = absl::Seconds(seconds);  // a bare number is seconds
           return absl::OkStatus();
         }
         if (!absl::ParseDuration(ToAbsl(v), value) || *value < absl::ZeroDuration()) {
           return absl::InvalidArgumentError(
               "expected a duration such as 10ms, 30s or 2.5 (seconds)");
         }
         return absl::OkStatus();
       })});
}

void FlagSet::Option(std::string name, char letter, Argument argument, std::string metavar,
                     std::string help, OnOption on) {
  Flag f{std::move(name), std::move(metavar), std::move(help), "", std::move(on)};
  f.argument = argument;
  if (letter != 0) f.shorts.push_back(letter);
  Add(std::move(f));
}

const FlagSet::Flag* FlagSet::Find(std::string_view name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return &f;
    for (const std::string& alias : f.aliases) {
      if (alias == name) return &f;
    }
  }
  return nullptr;
}

void FlagSet::Short(char letter, std::string_view name) {
  if (name == "help") help_shorts_.push_back(letter);
  if (name == "version") version_shorts_.push_back(letter);
  for (Flag& f : flags_) {
    if (f.name == name) f.shorts.push_back(letter);
  }
}

void FlagSet::Alias(std::string alias, std::string_view name) {
  for (Flag& f : flags_) {
    if (f.name == name) f.aliases.push_back(alias);
  }
}

const FlagSet::Flag* FlagSet::FindShort(char letter) const {
  for (const Flag& f : flags_) {
    if (f.shorts.find(letter) != std::string::npos) return &f;
  }
  return nullptr;
}

absl::Status FlagSet::Set(const Flag& flag, std::string_view spelled,
                          std::optional<std::string_view> value) {
  if (absl::Status s = flag.on(value); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(spelled), "=", ToAbsl(value.value_or("")), ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> FlagSet::Parse(int argc, char** argv,
                                                        bool stop_at_positional) {
  return Parse(std::vector<std::string>(argv + 1, argv + argc), stop_at_positional);
}

namespace {

// "--server needs HOST:PORT"; a one-letter metavariable (N) is a placeholder, not a noun.
absl::Status NeedsValue(std::string_view spelled, std::string_view metavar) {
  return absl::InvalidArgumentError(
      absl::StrCat(ToAbsl(spelled), " needs ", metavar.size() > 1 ? ToAbsl(metavar) : "a value"));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> FlagSet::Parse(const std::vector<std::string>& args,
                                                        bool stop_at_positional,
                                                        bool stop_at_unknown) {
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "--") {
      positional.insert(positional.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (arg == "--help" || arg == "-h") {
      help_requested_ = true;
      continue;
    }
    if (arg == "--version") {
      version_requested_ = true;
      continue;
    }
    if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
      if (const Flag* flag = FindShort(arg[1])) {
        std::string spelled = absl::StrCat("-", ToAbsl(arg.substr(1, 1)));
        std::optional<std::string_view> value;
        if (arg.size() > 2) value = arg.substr(2);
        if (flag->argument != Argument::kRequired) {
          if (value.has_value()) {
            return absl::InvalidArgumentError(absl::StrCat(spelled, " takes no value"));
          }
        } else if (!value.has_value()) {
          if (i + 1 >= args.size()) return NeedsValue(spelled, flag->metavar);
          value = args[++i];
        }
        ARDMA_RETURN_IF_ERROR(Set(*flag, spelled, value));
        continue;
      }
    }
    if (arg.size() < 3 || arg.substr(0, 2) != "--") {
      if (stop_at_positional) {
        positional.insert(positional.end(), args.begin() + i, args.end());
        break;
      }
      positional.emplace_back(arg);
      continue;
    }
    std::string_view body = arg.substr(2);
    std::string_view name = body;
    std::optional<std::string_view> value;
    if (size_t eq = body.find('='); eq != std::string_view::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
    }
    const Flag* flag = Find(name);
    if (flag == nullptr && !value.has_value() && name.substr(0, 3) == "no-") {
      const Flag* negated = Find(name.substr(3));
      if (negated != nullptr && negated->bool_value != nullptr) {
        *negated->bool_value = false;
        continue;
      }
    }
    if (flag == nullptr && stop_at_positional && stop_at_unknown) {
      positional.insert(positional.end(), args.begin() + i, args.end());
      break;
    }
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unrecognized option '", ToAbsl(arg), "'"));  // as getopt_long says
    }
    std::string spelled = absl::StrCat("--", ToAbsl(name));
    if (flag->argument == Argument::kNone && value.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(spelled, " takes no value"));
    }
    if (flag->argument == Argument::kRequired && !value.has_value()) {
      if (i + 1 >= args.size()) return NeedsValue(spelled, flag->metavar);
      value = args[++i];
    }
    ARDMA_RETURN_IF_ERROR(Set(*flag, spelled, value));
  }
  return positional;
}

absl::StatusOr<std::vector<std::string>> FlagSet::ParseGnu(int argc, char** argv) {
  // getopt_long's tables: a long option's value is kLong + its index, so an error names it.
  constexpr int kLong = 0x10000, kHelp = 0x20000, kVersion = 0x20001;
  std::vector<option> longs;
  std::string shorts = ":";  // a missing argument is ':', not '?'
  auto add_short = [&](char letter, Argument argument) {
    shorts.push_back(letter);
    if (argument != Argument::kNone) shorts += argument == Argument::kOptional ? "::" : ":";
  };
  for (size_t k = 0; k < flags_.size(); ++k) {
    const Flag& f = flags_[k];
    // A Bool() flag is a switch here: GNU tools have no --no-NAME forms unless declared.
    Argument argument = f.bool_value != nullptr ? Argument::kNone : f.argument;
    int has_arg = argument == Argument::kNone       ? no_argument
                  : argument == Argument::kOptional ? optional_argument
                                                    : required_argument;
    for (char letter : f.shorts) add_short(letter, argument);
    if (!f.name.empty()) longs.push_back({f.name.c_str(), has_arg, nullptr, kLong + int(k)});
    for (const std::string& alias : f.aliases) {
      longs.push_back({alias.c_str(), has_arg, nullptr, kLong + int(k)});
    }
  }
  for (char letter : help_shorts_) add_short(letter, Argument::kNone);
  for (char letter : version_shorts_) add_short(letter, Argument::kNone);
  longs.push_back({"help", no_argument, nullptr, kHelp});
  longs.push_back({"version", no_argument, nullptr, kVersion});
  longs.push_back({nullptr, 0, nullptr, 0});

  std::vector<char*> args(argv, argv + argc);  // getopt permutes; the caller's argv stays
  args.push_back(nullptr);
  optind = 0;  // glibc: a fresh scan (a process may parse more than once)
  opterr = 0;
  for (;;) {
    int code = getopt_long(argc, args.data(), shorts.c_str(), longs.data(), nullptr);
    if (code == -1) break;
    if (code == '?' || code == ':') return GnuError(code, optopt, args[optind - 1]);
    if (code == kHelp || help_shorts_.find(char(code)) != std::string::npos) {
      help_requested_ = true;
      return std::vector<std::string>();
    }
    if (code == kVersion || version_shorts_.find(char(code)) != std::string::npos) {
      version_requested_ = true;
      return std::vector<std::string>();
    }
    const Flag& flag = code >= kLong ? flags_[code - kLong] : *FindShort(char(code));
    std::optional<std::string_view> value;
    if (optarg != nullptr) value = optarg;
    ARDMA_RETURN_IF_ERROR(flag.on(value));
  }
  return std::vector<std::string>(args.begin() + optind, args.begin() + argc);
}

absl::Status FlagSet::GnuError(int code, int optopt, std::string_view arg) const {
  constexpr int kLong = 0x10000;
  auto long_name = [&]() -> std::string {
    if (optopt >= kLong + int(flags_.size())) return optopt == kLong * 2 ? "help" : "version";
    return flags_[optopt - kLong].name;
  };
  if (optopt >= kLong) {
    return absl::InvalidArgumentError(
        absl::StrCat("option '--", long_name(),
                     code == ':' ? "' requires an argument" : "' doesn't allow an argument"));
  }
  if (optopt != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(code == ':' ? "option requires an argument -- '" : "invalid option -- '",
                     std::string(1, char(optopt)), "'"));
  }
  // An unknown long option, or one whose prefix fits several.
  std::string_view typed = arg.substr(2, arg.find('=') - 2);
  std::vector<std::string> fits;
  auto consider = [&](const std::string& name) {
    if (name.compare(0, typed.size(), typed) == 0) fits.push_back(absl::StrCat("'--", name, "'"));
  };
  for (const Flag& f : flags_) {
    if (!f.name.empty()) consider(f.name);
    for (const std::string& alias : f.aliases) consider(alias);
  }
  consider("help");
  consider("version");
  if (fits.size() > 1 && arg.substr(0, 2) == "--") {
    return absl::InvalidArgumentError(
        absl::StrCat("option '", ToAbsl(arg.substr(0, arg.find('='))),
                     "' is ambiguous; possibilities: ", absl::StrJoin(fits, " ")));
  }
  return absl::InvalidArgumentError(absl::StrCat("unrecognized option '", ToAbsl(arg), "'"));
}

absl::StatusOr<std::vector<std::string>> FlagSet::ConfigFileArgs(std::string_view text,
                                                                 std::string_view origin) {
  std::vector<std::string> out;
  int number = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(start, end - start));
    start = end + 1;
    ++number;
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (trimmed.empty()) continue;
    std::string flag(trimmed);
    if (flag.rfind("--", 0) == 0) flag = flag.substr(2);
    size_t split = flag.find_first_of("= \t");
    std::string name = flag.substr(0, split);
    if (name.empty() || name[0] == '-') {
      return absl::InvalidArgumentError(
          absl::StrCat(ToAbsl(origin), ":", number, ": expected a flag, as 'name value'"));
    }
    if (split == std::string::npos) {
      out.push_back("--" + name);
      continue;
    }
    absl::string_view value = absl::StripAsciiWhitespace(absl::string_view(flag).substr(split + 1));
    if (!value.empty() && value.front() == '=')
      value = absl::StripLeadingAsciiWhitespace(value.substr(1));
    out.push_back(absl::StrCat("--", name, "=", value));
  }
  return out;
}

std::optional<int> FlagSet::ParseForMain(int argc, char** argv, std::vector<std::string>* args) {
  std::vector<std::string> all(argv + 1, argv + argc);
  if (config_file_flag_) {
    // --config FILE / --config=FILE: its flags go first, so the command line's win.
    std::vector<std::string> rest, from_file;
    for (size_t i = 0; i < all.size(); ++i) {
      std::string path;
      if (all[i] == "--config" && i + 1 < all.size()) {
        path = all[++i];
      } else if (all[i].rfind("--config=", 0) == 0) {
        path = all[i].substr(9);
      } else if (all[i] == "--config") {
        std::cerr << program_ << ": flag --config needs a value\n";
        return 2;
      } else {
        rest.push_back(all[i]);
        continue;
      }
      std::ifstream in(path);
      if (!in) {
        std::cerr << program_ << ": --config " << path << ": cannot read it\n";
        return 2;
      }
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      absl::StatusOr<std::vector<std::string>> flags = ConfigFileArgs(text, path);
      if (!flags.ok()) {
        std::cerr << program_ << ": " << flags.status().message() << "\n";
        return 2;
      }
      from_file.insert(from_file.end(), flags->begin(), flags->end());
    }
    from_file.insert(from_file.end(), rest.begin(), rest.end());
    all = std::move(from_file);
  }
  absl::StatusOr<std::vector<std::string>> parsed = Parse(all);
  if (!parsed.ok()) {  // a usage error, said as GNU tools say it
    std::cerr << program_ << ": " << parsed.status().message() << "\nTry '" << program_
              << " --help' for more information.\n";
    return 2;
  }
  if (help_requested_) {
    std::cout << Help();
    return 0;
  }
  if (version_requested_) {
    std::cout << VersionLine(program_) << "\n";
    return 0;
  }
  *args = std::move(*parsed);
  return std::nullopt;
}

void FlagSet::AppendHelpLine(std::string* out, std::string left, std::string_view help,
                             size_t column, size_t gap) {
  if (left.size() + gap > column) {
    absl::StrAppend(out, left, std::string(gap, ' '));
  } else {
    left.resize(column, ' ');
    absl::StrAppend(out, left);
  }
  // Lines after the first of a help text line up under it.
  absl::StrAppend(out, absl::StrReplaceAll(ToAbsl(help), {{"\n", "\n" + std::string(column, ' ')}}),
                  "\n");
}

std::string FlagSet::Help() const {
  std::string out = absl::StrCat(usage_, "\n\nFlags:\n");
  for (const Flag& f : flags_) {
    if (f.help.empty()) continue;
    std::string left = absl::StrCat(
        f.shorts.empty() ? std::string("  ") : absl::StrCat("  -", f.shorts.substr(0, 1), ", "),
        "--", f.name, f.metavar.empty() ? "" : " ", f.metavar);
    std::string help = f.help;
    if (!f.default_text.empty()) absl::StrAppend(&help, " (default: ", f.default_text, ")");
    AppendHelpLine(&out, left, help, 33, 1);
  }
  AppendHelpLine(&out, "  -h, --help", "show this help", 33, 1);
  if (config_file_flag_) {
    AppendHelpLine(&out, "  --config FILE",
                   "read flags from FILE, one 'name value' per line (the command line wins)", 33,
                   1);
  }
  AppendHelpLine(&out, "      --version", "print the version and commit", 33, 1);
  return out;
}

std::string FlagSet::GnuHelp(std::string_view epilog) const {
  constexpr size_t kColumn = 30;
  std::string out = absl::StrCat(usage_, "\n");
  auto left = [](std::string_view shorts, std::string_view name,
                 const std::vector<std::string>& aliases, std::string_view metavar,
                 Argument argument) {
    std::vector<std::string> spellings;
    for (char letter : shorts) spellings.push_back(absl::StrCat("-", std::string(1, letter)));
    if (!name.empty()) spellings.push_back(absl::StrCat("--", ToAbsl(name)));
    for (const std::string& alias : aliases) spellings.push_back("--" + alias);
    std::string text =
        absl::StrCat(shorts.empty() ? "      " : "  ", absl::StrJoin(spellings, ", "));
    if (!metavar.empty()) {
      bool optional = argument == Argument::kOptional;
      absl::StrAppend(&text,
                      name.empty() ? " "
                      : optional   ? "[="
                                   : "=",
                      ToAbsl(metavar), optional && !name.empty() ? "]" : "");
    }
    return text;
  };
  for (const Flag& f : flags_) {
    if (!f.section.empty()) absl::StrAppend(&out, f.section, "\n");
    if (f.help.empty()) continue;
    AppendHelpLine(&out, left(f.shorts, f.name, f.aliases, f.metavar, f.argument), f.help, kColumn,
                   2);
  }
  AppendHelpLine(&out, left(help_shorts_, "help", {}, "", Argument::kNone), "show this help",
                 kColumn, 2);
  AppendHelpLine(&out, left(version_shorts_, "version", {}, "", Argument::kNone),
                 "print the version and commit", kColumn, 2);
  if (!epilog.empty()) absl::StrAppend(&out, "\n", ToAbsl(epilog), "\n");
  return out;
}

}  // namespace ardma
