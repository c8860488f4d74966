#include "core/cli/client_flags.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/security/auth.h"
#include "core/status_macros.h"

namespace ardma {
namespace {

// A flag that sets a string.
FlagSet::OnOption Store(std::string* value) {
  return [value](std::optional<std::string_view> v) {
    *value = std::string(v.value_or(""));
    return absl::OkStatus();
  };
}

}  // namespace

void ClientFlags::Declare(FlagSet& flags) {
  flags.Option("server", 0, FlagSet::Argument::kRequired, "HOST:PORT",
               "the ardmad: HOST:PORT, unix:PATH, tls://HOST:PORT or ucx://HOST:PORT; or,\n"
               "for the tools that work on a cluster, its etcd://HOST:PORT/NAME\n"
               "(default: $ARDMA_SERVER, else $ARDMA_CLUSTER, else 127.0.0.1:15712)",
               Store(&server));
  DeclareCredentials(flags);
}

void ClientFlags::DeclareCredentials(FlagSet& flags) {
  flags.Option("auth-file", 0, FlagSet::Argument::kRequired, "FILE",
               "authenticate as the NAME SECRET on FILE's first line\n"
               "(mode 0600; default: $ARDMA_AUTH_FILE)",
               Store(&auth_file));
  flags.Option("tls-ca", 0, FlagSet::Argument::kRequired, "FILE",
               "tls://: trust the certificates in FILE (default: $ARDMA_TLS_CA)",
               Store(&tls.ca_file));
  flags.Option("tls-cert", 0, FlagSet::Argument::kRequired, "FILE",
               "tls://: present this certificate (mutual TLS; default: $ARDMA_TLS_CERT)",
               Store(&tls.cert_file));
  flags.Option("tls-key", 0, FlagSet::Argument::kRequired, "FILE",
               "tls://: the private key of --tls-cert (default: $ARDMA_TLS_KEY)",
               Store(&tls.key_file));
}

absl::StatusOr<ClientOptions> ClientFlags::ConnectOptions(ClientOptions options) const {
  ARDMA_ASSIGN_OR_RETURN(options, OptionsWithAuthFile(auth_file, std::move(options)));
  if (!tls.ca_file.empty()) options.tls.ca_file = tls.ca_file;
  if (!tls.cert_file.empty()) options.tls.cert_file = tls.cert_file;
  if (!tls.key_file.empty()) options.tls.key_file = tls.key_file;
  return options;
}

absl::Status ClientFlags::Export() const {
  if (!auth_file.empty()) {
    if (absl::Status s = security::LoadCredentials(auth_file).status(); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("--auth-file: ", s.message()));
    }
    ::setenv("ARDMA_AUTH_FILE", auth_file.c_str(), 1);
  }
  if (!tls.ca_file.empty()) ::setenv("ARDMA_TLS_CA", tls.ca_file.c_str(), 1);
  if (!tls.cert_file.empty()) ::setenv("ARDMA_TLS_CERT", tls.cert_file.c_str(), 1);
  if (!tls.key_file.empty()) ::setenv("ARDMA_TLS_KEY", tls.key_file.c_str(), 1);
  return absl::OkStatus();
}

void DfsFlags::Declare(FlagSet& flags) {
  ClientFlags::Declare(flags);
  flags.Option("fs", 0, FlagSet::Argument::kRequired, "NAME", "the file system (default: default)",
               Store(&fs));
  flags.Option("mode", 0, FlagSet::Argument::kRequired, "active|rdma",
               "run the file system's code on the server (active, the default) or\n"
               "here over one-sided operations (rdma)",
               [this](std::optional<std::string_view> v) -> absl::Status {
                 ARDMA_ASSIGN_OR_RETURN(mode, ParseMode(v.value_or("")));
                 return absl::OkStatus();
               });
}

void JsonFlag(FlagSet& flags, bool* json, std::string_view what) {
  flags.Bool("json", json, absl::StrCat("print ", ToAbsl(what)));
}

}  // namespace ardma
