// The flags every client tool shares, declared once so that each spells and documents them alike:
//   --server HOST:PORT   the ardmad (also unix:PATH, tls://HOST:PORT, ucx://HOST:PORT)
//   --auth-file FILE     who to authenticate as (docs/SECURITY.md)
//   --tls-ca, --tls-cert, --tls-key FILE   trust and identity for tls:// addresses
// and, for the file-system tools, --fs NAME and --mode active|rdma (DfsFlags).
//
//   ClientFlags client;
//   client.Declare(flags);
//   ... flags.Parse ...
//   ARDMA_ASSIGN_OR_RETURN(ClientOptions options, client.ConnectOptions());
//   ARDMA_ASSIGN_OR_RETURN(auto c, Client::Connect(client.server, options));
#ifndef ARDMA_CORE_CLI_CLIENT_FLAGS_H_
#define ARDMA_CORE_CLI_CLIENT_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/cli/flag_set.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/host_port.h"

namespace ardma {

struct ClientFlags {
  std::string server = DefaultServerAddress();
  std::string auth_file;  // empty: $ARDMA_AUTH_FILE
  TlsOptions tls;         // empty fields: $ARDMA_TLS_CA, $ARDMA_TLS_CERT, $ARDMA_TLS_KEY

  // Declares --server and the credentials' flags.
  void Declare(FlagSet& flags);
  // Declares only the credentials' flags, for a tool that names its servers otherwise.
  void DeclareCredentials(FlagSet& flags);

  // `options` with these credentials and TLS files; INVALID_ARGUMENT naming --auth-file for a
  // file that is not a private NAME SECRET file.
  absl::StatusOr<ClientOptions> ConnectOptions(ClientOptions options = {}) const;
  // For tools whose clients are opened by libraries with default options: makes these the
  // credentials and TLS files of every client this process opens, as the environment variables
  // do. Checks the auth file first.
  absl::Status Export() const;
};

// The file-system tools' flags (ardma-grep, -find, -cp, -mount, ardma fs): the client's, the file
// system and where its code runs.
struct DfsFlags : ClientFlags {
  std::string fs = "default";
  Mode mode = Mode::kActive;

  // Declares ClientFlags' flags, --fs and --mode.
  void Declare(FlagSet& flags);
};

// --json: "print `what`" (in JSON).
void JsonFlag(FlagSet& flags, bool* json, std::string_view what);

}  // namespace ardma

#endif  // ARDMA_CORE_CLI_CLIENT_FLAGS_H_
