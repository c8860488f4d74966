#include "core/cli/flag_set.h"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/memory/region.h"
#include "core/security/auth.h"
#include "core/status_macros.h"
#include "core/version.h"

namespace ardma {

void FlagSet::String(std::string name, std::string* value, std::string metavar, std::string help) {
  std::string def = value->empty() ? "" : *value;
  flags_.push_back(
      {std::move(name), std::move(metavar), std::move(help), def, [value](std::string_view v) {
         *value = std::string(v);
         return absl::OkStatus();
       }});
}

void FlagSet::Int(std::string name, int64_t* value, std::string metavar, std::string help) {
  flags_.push_back({std::move(name), std::move(metavar), std::move(help), absl::StrCat(*value),
                    [value](std::string_view v) {
                      if (!absl::SimpleAtoi(ToAbsl(v), value)) {
                        return absl::InvalidArgumentError("expected an integer");
                      }
                      return absl::OkStatus();
                    }});
}

void FlagSet::Bool(std::string name, bool* value, std::string help) {
  Flag f{std::move(name), "", std::move(help), *value ? "true" : "false",
         [value](std::string_view v) {
           if (v == "true" || v == "1" || v == "yes") {
             *value = true;
           } else if (v == "false" || v == "0" || v == "no") {
             *value = false;
           } else {
             return absl::InvalidArgumentError("expected true or false");
           }
           return absl::OkStatus();
         }};
  f.is_bool = true;
  f.bool_value = value;
  flags_.push_back(std::move(f));
}

void FlagSet::Bytes(std::string name, uint64_t* value, std::string help) {
  flags_.push_back({std::move(name), "SIZE", std::move(help), *value ? absl::StrCat(*value) : "",
                    [value](std::string_view v) -> absl::Status {
                      ARDMA_ASSIGN_OR_RETURN(*value, ParseByteSize(v));
                      return absl::OkStatus();
                    }});
}

void FlagSet::Duration(std::string name, absl::Duration* value, std::string help) {
  flags_.push_back({std::move(name), "DURATION", std::move(help), absl::FormatDuration(*value),
                    [value](std::string_view v) {
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
                    }});
}

const FlagSet::Flag* FlagSet::Find(std::string_view name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

void FlagSet::Short(char letter, std::string_view name) {
  for (Flag& f : flags_) {
    if (f.name == name) f.short_name = letter;
  }
}

const FlagSet::Flag* FlagSet::FindShort(char letter) const {
  for (const Flag& f : flags_) {
    if (f.short_name == letter) return &f;
  }
  return nullptr;
}

absl::Status FlagSet::Set(const Flag& flag, std::string_view spelled, std::string_view value) {
  if (absl::Status s = flag.set(value); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(spelled), "=", ToAbsl(value), ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> FlagSet::Parse(int argc, char** argv,
                                                        bool stop_at_positional) {
  return Parse(std::vector<std::string>(argv + 1, argv + argc), stop_at_positional);
}

absl::StatusOr<std::vector<std::string>> FlagSet::Parse(const std::vector<std::string>& args,
                                                        bool stop_at_positional) {
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
        if (flag->is_bool) {
          if (arg.size() > 2) {
            return absl::InvalidArgumentError(absl::StrCat(spelled, " takes no value"));
          }
          *flag->bool_value = true;
          continue;
        }
        std::string_view value = arg.substr(2);
        if (value.empty()) {
          if (i + 1 >= args.size()) {
            return absl::InvalidArgumentError(absl::StrCat(spelled, " needs a value"));
          }
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
    std::string_view name = body, value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != std::string_view::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    const Flag* flag = Find(name);
    if (flag == nullptr && !has_value && name.substr(0, 3) == "no-") {
      const Flag* negated = Find(name.substr(3));
      if (negated != nullptr && negated->is_bool) {
        *negated->bool_value = false;
        continue;
      }
    }
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", ToAbsl(name), " (see --help)"));
    }
    if (!has_value) {
      if (flag->is_bool) {
        *flag->bool_value = true;
        continue;
      }
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", ToAbsl(name), " needs a value"));
      }
      value = args[++i];
    }
    ARDMA_RETURN_IF_ERROR(Set(*flag, absl::StrCat("--", ToAbsl(name)), value));
  }
  return positional;
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
  if (!parsed.ok()) {
    std::cerr << program_ << ": " << parsed.status().message() << "\n";
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

std::string FlagSet::Help() const {
  std::string out = absl::StrCat(usage_, "\n\nFlags:\n");
  for (const Flag& f : flags_) {
    std::string left =
        absl::StrCat(f.short_name != 0 ? absl::StrCat("  -", std::string(1, f.short_name), ", ")
                                       : std::string("  "),
                     "--", f.name, f.metavar.empty() ? "" : " ", f.metavar);
    absl::StrAppendFormat(&out, "%-32s %s", left, f.help);
    if (!f.default_text.empty()) absl::StrAppend(&out, " (default: ", f.default_text, ")");
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppendFormat(&out, "%-32s %s\n", "  -h, --help", "show this help");
  if (config_file_flag_) {
    absl::StrAppendFormat(
        &out, "%-32s %s\n", "  --config FILE",
        "read flags from FILE, one 'name value' per line (the command line wins)");
  }
  absl::StrAppendFormat(&out, "%-32s %s\n", "      --version", "print the version and commit");
  return out;
}

void AuthFileFlag(FlagSet& flags, std::string* path) {
  flags.String("auth-file", path, "FILE",
               "authenticate as the NAME SECRET on FILE's first line (mode 0600; default: "
               "$ARDMA_AUTH_FILE)");
}

absl::Status UseAuthFile(const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  ARDMA_RETURN_IF_ERROR(security::LoadCredentials(path).status());
  ::setenv("ARDMA_AUTH_FILE", path.c_str(), 1);
  return absl::OkStatus();
}

bool IsLongOption(std::string_view arg, std::string_view name) {
  return arg == name || (arg.substr(0, name.size()) == name && arg.size() > name.size() &&
                         arg[name.size()] == '=');
}

absl::StatusOr<std::string> LongOptionValue(int argc, char** argv, int& i, std::string_view name) {
  std::string_view arg = argv[i];
  if (arg.size() > name.size() && arg[name.size()] == '=') {
    return std::string(arg.substr(name.size() + 1));
  }
  if (i + 1 >= argc) {
    return absl::InvalidArgumentError(
        absl::StrCat("option '", ToAbsl(name), "' requires an argument"));
  }
  return std::string(argv[++i]);
}

}  // namespace ardma
