#include "core/host_port.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace ardma {

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<HostPort> ParseHostPort(std::string_view text) {
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat("bad address '", ToAbsl(text),
                                                   "' (expected HOST:PORT, e.g. 127.0.0.1:15712)"));
  };
  if (text.starts_with("etcd://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", ToAbsl(text),
        "' names a cluster, not one server: this takes one server's HOST:PORT (the DHT, lock and "
        "list clients and commands take a cluster; docs/cluster.md)"));
  }
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return bad();
  std::string_view host = text.substr(0, colon);
  std::string_view port_text = text.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return bad();
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return bad();  // bare IPv6 needs brackets
  }
  uint32_t port;
  if (!absl::SimpleAtoi(ToAbsl(port_text), &port) || port > 65535) return bad();
  return HostPort{std::string(host), static_cast<uint16_t>(port)};
}

std::string DefaultServerAddress() {
  const char* env = std::getenv("ARDMA_SERVER");
  if (env != nullptr && env[0] != '\0') return env;
  env = std::getenv("ARDMA_CLUSTER");  // etcd://HOST:PORT/NAME: the tools that take a cluster
  if (env != nullptr && env[0] != '\0') return env;
  return "127.0.0.1:15712";
}

}  // namespace ardma
