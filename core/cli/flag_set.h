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

  void String(std::string name, std::string* value, std::string metavar, std::string help);
  void Int(std::string name, int64_t* value, std::string metavar, std::string help);
  void Bool(std::string name, bool* value, std::string help);
  // Byte sizes such as 4096, 64K, 512M, 1G.
  void Bytes(std::string name, uint64_t* value, std::string help);
  // Durations such as 250us, 10ms, 30s, 2m; a bare number is seconds.
  void Duration(std::string name, absl::Duration* value, std::string help);

  // Gives the already-declared flag `name` a one-letter spelling: -t VALUE, -tVALUE, or -q for a
  // boolean.
  void Short(char letter, std::string_view name);

  // Stops at the first positional argument when `stop_at_positional` (subcommand tools), so the
  // rest of argv is left for the subcommand.
  absl::StatusOr<std::vector<std::string>> Parse(int argc, char** argv,
                                                 bool stop_at_positional = false);
  absl::StatusOr<std::vector<std::string>> Parse(const std::vector<std::string>& args,
                                                 bool stop_at_positional = false);
  bool help_requested() const { return help_requested_; }

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

 private:
  struct Flag {
    std::string name;
    std::string metavar;  // empty for booleans
    std::string help;
    std::string default_text;
    std::function<absl::Status(std::string_view)> set;
    bool is_bool = false;
    bool* bool_value = nullptr;
    char short_name = 0;
  };
  const Flag* Find(std::string_view name) const;
  const Flag* FindShort(char letter) const;
  // Sets `flag` from `value`, naming it as `spelled` in errors.
  static absl::Status Set(const Flag& flag, std::string_view spelled, std::string_view value);

  std::string program_;
  std::string usage_;
  std::vector<Flag> flags_;
  bool help_requested_ = false;
  bool config_file_flag_ = false;
  bool version_requested_ = false;
};

// For command lines parsed by hand in GNU style (ardma-cp, ardma-mount): whether `arg` is the long
// option `name` ("--name" or "--name=VALUE"), and its value — after '=' or the next argument, in
// which case `i` moves past it; INVALID_ARGUMENT "option '--name' requires an argument".
bool IsLongOption(std::string_view arg, std::string_view name);
absl::StatusOr<std::string> LongOptionValue(int argc, char** argv, int& i, std::string_view name);

// The clients' --auth-file FILE flag (docs/SECURITY.md): declares it on `flags`.
void AuthFileFlag(FlagSet& flags, std::string* path);
// Checks FILE (a private file with a NAME SECRET line) and makes it the credentials of every
// client this process opens, as $ARDMA_AUTH_FILE does; nothing for an empty path.
absl::Status UseAuthFile(const std::string& path);

}  // namespace ardma

#endif  // ARDMA_CORE_CLI_FLAG_SET_H_
