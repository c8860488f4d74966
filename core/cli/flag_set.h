// FlagSet: command-line flags for the project's tools, spelled as the design gives them
// (`--memory-file PATH`, `--memory=1G`), with a --help generated from the same table that parses.
//
//   FlagSet flags("ardmad", "The Active RDMA server.");
//   std::string listen = "127.0.0.1:15712";
//   flags.String("listen", &listen, "HOST:PORT", "address to listen on");
//   ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> args, flags.Parse(argc, argv));
//
// Accepts --name=value and --name value; booleans also as --name / --no-name; flags given a short
// name (Short) also as -x VALUE / -xVALUE. "--" ends flags.
// Parse returns the positional arguments; an unknown flag or a bad value is INVALID_ARGUMENT with a
// message naming the flag. --help / -h is reported through help_requested(); --version too
// (ParseForMain prints the version line and exits 0).
//
// Tools that follow GNU's conventions (ardma-grep, ardma-cp, ardma-mount) declare their options on
// the same table, with Option() for those that repeat or act in order, and parse with ParseGnu():
//   flags.Option("regexp", 'e', FlagSet::Argument::kRequired, "PATTERNS", "use PATTERNS",
//                [&](std::optional<std::string_view> v) { patterns.emplace_back(*v); ... });
// GnuHelp() then lists them as GNU's --help does, under Section() headings.
// Not thread-safe; use from main.
#ifndef ARDMA_CORE_CLI_FLAG_SET_H_
#define ARDMA_CORE_CLI_FLAG_SET_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ardma {

class FlagSet {
 public:
  FlagSet(std::string program, std::string usage)
      : program_(std::move(program)), usage_(std::move(usage)) {}

  // How an Option() takes its argument: none, always (--name=V, --name V, -xV, -x V), or only
  // attached (--name=V, -xV; GNU's --color[=WHEN]).
  enum class Argument { kNone, kRequired, kOptional };
  using OnOption = std::function<absl::Status(std::optional<std::string_view> argument)>;

  void String(std::string name, std::string* value, std::string metavar, std::string help);
  void Int(std::string name, int64_t* value, std::string metavar, std::string help);
  void Bool(std::string name, bool* value, std::string help);
  // Byte sizes such as 4096, 64K, 512M, 1G.
  void Bytes(std::string name, uint64_t* value, std::string help);
  // Durations such as 250us, 10ms, 30s, 2m; a bare number is seconds.
  void Duration(std::string name, absl::Duration* value, std::string help);

  // An option that runs `on` each time it is given, in command-line order, with its argument
  // (nullopt when it has none): for options that repeat (grep -e) or whose order matters (cp -L
  // after -P). `name` empty: a short option only; `letter` 0: a long one only. An empty `help`
  // leaves it out of the help (an option a tool accepts but does not advertise). Its errors are
  // reported as they are by ParseGnu, after "--name=VALUE: " by Parse.
  void Option(std::string name, char letter, Argument argument, std::string metavar,
              std::string help, OnOption on);

  // Gives the already-declared flag `name` a one-letter spelling: -t VALUE, -tVALUE, or -q for a
  // boolean; another call adds another (-r, -R). "help" and "version" name the built-in flags.
  void Short(char letter, std::string_view name);
  // Another long spelling of the already-declared flag `name` (--silent for --quiet).
  void Alias(std::string alias, std::string_view name);
  // Starts a heading in the help before the next flag declared ("Output control:").
  void Section(std::string heading) { section_ = std::move(heading); }

  // Stops at the first positional argument when `stop_at_positional` (subcommand tools), so the
  // rest of argv is left for the subcommand; and, when `stop_at_unknown` too, at the first long
  // option it does not know (find: `--bogus` begins the expression, where it is a predicate).
  absl::StatusOr<std::vector<std::string>> Parse(int argc, char** argv,
                                                 bool stop_at_positional = false);
  absl::StatusOr<std::vector<std::string>> Parse(const std::vector<std::string>& args,
                                                 bool stop_at_positional = false,
                                                 bool stop_at_unknown = false);
  bool help_requested() const { return help_requested_; }
  bool version_requested() const { return version_requested_; }

  // Parses as GNU's getopt_long does: short options cluster and take their argument attached or
  // next (-rn, -ePAT, -e PAT); a long option may be shortened to a unique prefix (--regex) and
  // takes =VALUE or the next argument; options and operands mix (the operands come back in order);
  // "--" ends the options; --help or --version stops the parse and sets help_requested() /
  // version_requested(). Errors are INVALID_ARGUMENT with getopt's message ("invalid option --
  // 'z'", "unrecognized option '--bogus'", "option '--server' requires an argument", "option
  // '--co' is ambiguous; possibilities: '--color' '--count'") or the option's own.
  absl::StatusOr<std::vector<std::string>> ParseGnu(int argc, char** argv);

  // For main(): parses into *args; on a bad flag prints "<program>: <error>" to stderr and
  // returns 2, on --help prints Help() to stdout and returns 0; otherwise returns nullopt and
  // main carries on.
  std::optional<int> ParseForMain(int argc, char** argv, std::vector<std::string>* args);

  // Adds --config FILE: flags read from FILE, one per line ("name value", "name=value" or a bare
  // boolean "name"; a leading "--" is allowed; '#' starts a comment), applied before the command
  // line's, so the command line wins. For daemons run by a service manager.
  void ConfigFileFlag() { config_file_flag_ = true; }
  // The flags of a config file's text, as command-line arguments; INVALID_ARGUMENT naming the
  // line for one that is not a flag.
  static absl::StatusOr<std::vector<std::string>> ConfigFileArgs(std::string_view text,
                                                                 std::string_view origin);
  std::string Help() const;
  // The help of a GNU-style tool: the usage, the options as GNU lists them ("  -e,
  // --regexp=PATTERNS  use PATTERNS") under their sections, --help and --version, then `epilog`.
  std::string GnuHelp(std::string_view epilog) const;

 private:
  struct Flag {
    std::string name;
    std::string metavar;  // empty for booleans
    std::string help;
    std::string default_text;
    OnOption on;
    Argument argument = Argument::kRequired;
    bool* bool_value = nullptr;  // Bool(): also --no-NAME and --NAME=true|false
    std::string shorts;          // one-letter spellings
    std::vector<std::string> aliases;
    std::string section;  // a heading the help prints before this flag
  };
  void Add(Flag flag);
  const Flag* Find(std::string_view name) const;
  const Flag* FindShort(char letter) const;
  // Runs `flag` with `value`, naming it as `spelled` in errors.
  static absl::Status Set(const Flag& flag, std::string_view spelled,
                          std::optional<std::string_view> value);
  // One help line: the spellings, padded to `column` (at least `gap` spaces), then the help.
  static void AppendHelpLine(std::string* out, std::string left, std::string_view help,
                             size_t column, size_t gap);
  // GNU's message for getopt_long's error `code` ('?' or ':') at argv[optind - 1].
  absl::Status GnuError(int code, int optopt, std::string_view arg) const;

  std::string program_;
  std::string usage_;
  std::vector<Flag> flags_;
  std::string section_;
  std::string help_shorts_, version_shorts_;
  bool help_requested_ = false;
  bool config_file_flag_ = false;
  bool version_requested_ = false;
};

}  // namespace ardma

#endif  // ARDMA_CORE_CLI_FLAG_SET_H_
