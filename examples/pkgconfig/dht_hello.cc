// A program built with pkg-config instead of CMake, against an installed toolkit:
//   export PKG_CONFIG_PATH=/opt/ardma/lib/pkgconfig
//   g++ dht_hello.cc $(pkg-config --cflags --libs --static ardma-dht_client) -o dht_hello
//   ./dht_hello 127.0.0.1:15712          # prints: hello -> world
#include <iostream>
#include <string>

#include "core/client/client.h"
#include "services/dht/dht_client.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: dht_hello HOST:PORT\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<ardma::Client>> client = ardma::Client::Connect(argv[1]);
  if (!client.ok()) {
    std::cerr << "dht_hello: " << client.status() << "\n";
    return 1;
  }
  ardma::dht::DhtClient dht(client->get(), ardma::Mode::kActive);
  absl::StatusOr<std::string> value =
      dht.Put("greetings", "hello", "world").ok() ? dht.Get("greetings", "hello")
                                                  : absl::StatusOr<std::string>(absl::UnknownError("put"));
  if (!value.ok()) {
    std::cerr << "dht_hello: " << value.status() << "\n";
    return 1;
  }
  std::cout << "hello -> " << *value << "\n";
  return 0;
}
