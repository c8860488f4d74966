// Uses the hash table, a lock and the example's own active code on an ardmad, in active mode:
//   consumer HOST:PORT
// Prints what it did; exits 1 on any error.
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>

#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/status_macros.h"
#include "services/dht/dht_client.h"
#include "services/lock/lock_client.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(counter);

namespace {

absl::Status Run(const std::string& server) {
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<ardma::Client> client, ardma::Client::Connect(server));

  ardma::dht::DhtClient dht(client.get(), ardma::Mode::kActive);
  ARDMA_RETURN_IF_ERROR(dht.Put("sessions", "alice", "token-1").status());
  ARDMA_ASSIGN_OR_RETURN(std::string token, dht.Get("sessions", "alice"));
  std::cout << "dht: alice -> " << token << "\n";

  ardma::lock::LockClient locks(client.get(), ardma::Mode::kActive);
  ARDMA_ASSIGN_OR_RETURN(ardma::lock::Grant grant,
                         locks.Acquire("report", ardma::lock::LockMode::kExclusive,
                                       absl::Seconds(5)));
  std::cout << "lock: held 'report' with token " << grant.token << "\n";
  ARDMA_RETURN_IF_ERROR(locks.Release(grant));

  uint64_t delta = 5;
  std::string args(reinterpret_cast<const char*>(&delta), 8);
  ARDMA_ASSIGN_OR_RETURN(std::string r, ardma::Invoke(*client, ardma::Mode::kActive,
                                                      ardma::active_libraries::counter(),
                                                      "counter.add", args));
  uint64_t now;
  std::memcpy(&now, r.data(), 8);
  std::cout << "counter: " << now << "\n";
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: consumer HOST:PORT\n";
    return 2;
  }
  absl::Status s = Run(argv[1]);
  if (!s.ok()) {
    std::cerr << "consumer: " << s << "\n";
    return 1;
  }
  return 0;
}
