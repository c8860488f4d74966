// Parsing of "HOST:PORT" addresses as given to --listen and --server ("127.0.0.1:15712",
// "localhost:0", "[::1]:15712"). Pure functions.
#ifndef ARDMA_CORE_HOST_PORT_H_
#define ARDMA_CORE_HOST_PORT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ardma {

struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string ToString() const;
};

// InvalidArgument for anything that is not HOST:PORT with a port in 0..65535.
absl::StatusOr<HostPort> ParseHostPort(std::string_view text);

// The server address a client tool uses when given none: $ARDMA_SERVER, else $ARDMA_CLUSTER (a
// cluster's etcd://HOST:PORT/NAME), else 127.0.0.1:15712.
std::string DefaultServerAddress();

}  // namespace ardma

#endif  // ARDMA_CORE_HOST_PORT_H_
