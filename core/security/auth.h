// Shared-secret authentication and per-secret permissions (docs/SECURITY.md).
//
// The server reads an auth file (`ardmad --auth-file FILE`): one secret per line,
//
//   # NAME SECRET PERM[,PERM...]
//   app     4f1c...e2   exec
//   monitor 9a0b...77   read:1
//   admin   c3d2...10   read,write,exec,load,admin
//   cluster 5e6f...a8   exec,peer
//
// and refuses a file that group or others may read. A client reads `NAME SECRET` from the first
// line that is not blank or a comment of its own file (`--auth-file FILE` or $ARDMA_AUTH_FILE).
//
// The handshake proves knowledge of the secret without sending it, over a nonce the server picked
// for this connection, so a recorded exchange is worthless on any other connection:
//
//   server -> client  HELLO  server_nonce (32 random bytes), "authentication required"
//   client -> server  AUTH   name, client_nonce, Proof(secret, kClient, server_nonce, client_nonce, name)
//   server -> client  OK     Proof(secret, kServer, ...)   (the client checks it: mutual)
//
// Proof is HMAC-SHA256; comparisons are constant-time. Pure functions and value types; thread-safe.
#ifndef ARDMA_CORE_SECURITY_AUTH_H_
#define ARDMA_CORE_SECURITY_AUTH_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace ardma::security {

// What a connection may do. A connection without authentication on a server without an auth file
// has every permission.
enum Permission : uint32_t {
  kRead = 1u << 0,   // one-sided READ
  kWrite = 1u << 1,  // one-sided WRITE, CAS, FETCH_ADD; REGISTER of its own memory
  kExec = 1u << 2,   // EXECUTE of loaded code (and HAS_CODE)
  kLoad = 1u << 3,   // LOAD: ship new code
  kAdmin = 1u << 4,  // STATS details, re-pointing names, shutdown
  kPeer = 1u << 5,   // EXECUTE as another member of the cluster (a server-to-server call)
};
// A connection to a server without an auth file holds them all.
inline constexpr uint32_t kAllPermissions = kRead | kWrite | kExec | kLoad | kAdmin | kPeer;

// "read,exec" and the like; "all" is every permission but `peer` (which says the holder is a member
// of the server's cluster, so it is given by name only). `read:1` / `write:0:2` limit that
// permission to the listed regions (several limits of one permission add up).
struct Grant {
  uint32_t permissions = 0;
  // Regions READ / WRITE are limited to; empty: every region.
  std::vector<uint32_t> read_regions;
  std::vector<uint32_t> write_regions;

  bool Has(Permission p) const { return (permissions & p) != 0; }
  bool MayRead(uint32_t region) const;
  bool MayWrite(uint32_t region) const;
  // "read:1,exec"
  std::string ToString() const;
};
absl::StatusOr<Grant> ParseGrant(std::string_view text);
Grant FullGrant();

inline constexpr size_t kNonceSize = 32;
inline constexpr size_t kProofSize = 32;
using Nonce = std::array<uint8_t, kNonceSize>;
using Proof = std::array<uint8_t, kProofSize>;

// Fresh random bytes from the operating system's generator.
Nonce RandomNonce();
uint64_t RandomU64();

// Which side computes a proof: each side's proof differs, so one cannot be reflected as the other.
enum class Role : uint8_t { kClient = 1, kServer = 2 };
Proof ComputeProof(std::string_view secret, Role role, const Nonce& server_nonce,
                   const Nonce& client_nonce, std::string_view name);
// Constant-time comparison.
bool ProofsEqual(const Proof& a, const Proof& b);

struct Credentials {
  std::string name;
  std::string secret;
};

// The server's secrets.
class AuthTable {
 public:
  struct Entry {
    std::string secret;
    Grant grant;
  };
  // Reads an auth file. FAILED_PRECONDITION if group or others may read it; INVALID_ARGUMENT
  // (naming the line) for a malformed line, an unknown permission or a name given twice.
  static absl::StatusOr<AuthTable> LoadFile(const std::string& path);
  static absl::StatusOr<AuthTable> Parse(std::string_view text, std::string_view origin);

  const Entry* Find(std::string_view name) const;
  size_t size() const { return entries_.size(); }
  // The credentials of the file's first secret granted `peer`: what a member of a cluster
  // authenticates with when it calls another member (every member reads the same file).
  const std::optional<Credentials>& peer() const { return peer_; }

 private:
  absl::flat_hash_map<std::string, Entry> entries_;
  std::optional<Credentials> peer_;
};

// A client's credentials from `path` (its first NAME SECRET line). FAILED_PRECONDITION if group or
// others may read it, INVALID_ARGUMENT if it holds no such line.
absl::StatusOr<Credentials> LoadCredentials(const std::string& path);
// From $ARDMA_AUTH_FILE when it is set and not empty; nullopt when it is not set.
absl::StatusOr<std::optional<Credentials>> CredentialsFromEnvironment();

}  // namespace ardma::security

#endif  // ARDMA_CORE_SECURITY_AUTH_H_
