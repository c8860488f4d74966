#include "core/security/auth.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <charconv>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

namespace ardma::security {
namespace {

constexpr size_t kMaxNameLength = 255;
constexpr size_t kMinSecretLength = 16;
constexpr size_t kMaxFileBytes = 1 << 20;

struct PermissionName {
  Permission permission;
  const char* name;
};
constexpr PermissionName kPermissionNames[] = {
    {kRead, "read"}, {kWrite, "write"}, {kExec, "exec"}, {kLoad, "load"}, {kAdmin, "admin"},
    {kPeer, "peer"}};

// `text` cut at every character of `separators`; empty pieces are kept unless `skip_empty`.
std::vector<std::string_view> Split(std::string_view text, std::string_view separators,
                                    bool skip_empty = false) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t end = text.find_first_of(separators, start);
    std::string_view piece = text.substr(start, end == std::string_view::npos ? end : end - start);
    if (!piece.empty() || !skip_empty) out.push_back(piece);
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

std::string_view Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::string Str(std::string_view s) { return std::string(s); }

bool Contains(const std::vector<uint32_t>& regions, uint32_t region) {
  return regions.empty() || std::find(regions.begin(), regions.end(), region) != regions.end();
}

// Reads a secrets file that only its owner may read.
absl::StatusOr<std::string> ReadPrivateFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: holds secrets but its mode is %04o; group and others must have no "
                        "access (chmod 600 %s)",
                        path, st.st_mode & 07777, path));
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxFileBytes) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": larger than 1 MiB"));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  text.resize(got);
  return text;
}

// The words of each line that is neither blank nor a comment, with its line number.
std::vector<std::pair<int, std::vector<std::string_view>>> Lines(std::string_view text) {
  std::vector<std::pair<int, std::vector<std::string_view>>> out;
  int number = 0;
  for (std::string_view line : Split(text, "\n")) {
    ++number;
    line = Trim(line);
    if (line.empty() || line[0] == '#') continue;
    out.emplace_back(number, Split(line, " \t", true));
  }
  return out;
}

absl::Status CheckNameAndSecret(std::string_view name, std::string_view secret) {
  if (name.size() > kMaxNameLength) {
    return absl::InvalidArgumentError(absl::StrCat("name longer than ", kMaxNameLength, " bytes"));
  }
  if (secret.size() < kMinSecretLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("the secret of '", Str(name), "' is shorter than ", kMinSecretLength,
                     " characters (make one with: openssl rand -hex 32)"));
  }
  return absl::OkStatus();
}

}  // namespace

bool Grant::MayRead(uint32_t region) const { return Has(kRead) && Contains(read_regions, region); }

bool Grant::MayWrite(uint32_t region) const {
  return Has(kWrite) && Contains(write_regions, region);
}

std::string Grant::ToString() const {
  std::vector<std::string> parts;
  for (const PermissionName& p : kPermissionNames) {
    if (!Has(p.permission)) continue;
    std::string part = p.name;
    const std::vector<uint32_t>* regions = p.permission == kRead    ? &read_regions
                                           : p.permission == kWrite ? &write_regions
                                                                    : nullptr;
    if (regions != nullptr && !regions->empty()) absl::StrAppend(&part, ":", absl::StrJoin(*regions, ":"));
    parts.push_back(std::move(part));
  }
  return parts.empty() ? "none" : absl::StrJoin(parts, ",");
}

Grant FullGrant() { return Grant{.permissions = kAllPermissions}; }

absl::StatusOr<Grant> ParseGrant(std::string_view text) {
  Grant grant;
  bool read_everywhere = false, write_everywhere = false;
  for (std::string_view item : Split(text, ",")) {
    if (item == "all") {  // every permission a client may hold: `peer` names a member
      grant.permissions |= kAllPermissions & ~kPeer;
      read_everywhere = write_everywhere = true;
      continue;
    }
    std::vector<std::string_view> parts = Split(item, ":");
    const PermissionName* found = nullptr;
    for (const PermissionName& p : kPermissionNames) {
      if (parts[0] == p.name) found = &p;
    }
    if (found == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown permission '", Str(item), "' (known: read, write, exec, load, admin, all)"));
    }
    grant.permissions |= found->permission;
    std::vector<uint32_t>* regions = found->permission == kRead    ? &grant.read_regions
                                     : found->permission == kWrite ? &grant.write_regions
                                                                   : nullptr;
    if (parts.size() == 1) {
      if (found->permission == kRead) read_everywhere = true;
      if (found->permission == kWrite) write_everywhere = true;
      continue;
    }
    if (regions == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", Str(item), "': only read and write can be limited to regions"));
    }
    for (size_t i = 1; i < parts.size(); ++i) {
      uint32_t region = 0;
      auto [end, ec] = std::from_chars(parts[i].data(), parts[i].data() + parts[i].size(), region);
      if (ec != std::errc() || end != parts[i].data() + parts[i].size() || parts[i].empty()) {
        return absl::InvalidArgumentError(absl::StrCat("'", Str(item), "': bad region '", Str(parts[i]), "'"));
      }
      regions->push_back(region);
    }
  }
  if (read_everywhere) grant.read_regions.clear();
  if (write_everywhere) grant.write_regions.clear();
  return grant;
}

Nonce RandomNonce() {
  Nonce n;
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) std::abort();  // no entropy: unsafe
  return n;
}

uint64_t RandomU64() {
  uint64_t v;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&v), sizeof v) != 1) std::abort();
  return v;
}

Proof ComputeProof(std::string_view secret, Role role, const Nonce& server_nonce,
                   const Nonce& client_nonce, std::string_view name) {
  std::string message;
  message.reserve(16 + 2 * kNonceSize + name.size());
  message.append("ardma-auth-v1");
  message.push_back(static_cast<char>(role));
  message.append(reinterpret_cast<const char*>(server_nonce.data()), server_nonce.size());
  message.append(reinterpret_cast<const char*>(client_nonce.data()), client_nonce.size());
  message.append(name);
  Proof proof{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), proof.data(), &len);
  return proof;
}

bool ProofsEqual(const Proof& a, const Proof& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

absl::StatusOr<AuthTable> AuthTable::Parse(std::string_view text, std::string_view origin) {
  AuthTable table;
  for (const auto& [number, words] : Lines(text)) {
    auto bad = [&, number = number](std::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(Str(origin), ":", number, ": ", Str(why)));
    };
    if (words.size() != 3) return bad("expected NAME SECRET PERM[,PERM...]");
    if (absl::Status s = CheckNameAndSecret(words[0], words[1]); !s.ok()) {
      return bad(FromAbsl(s.message()));
    }
    absl::StatusOr<Grant> grant = ParseGrant(words[2]);
    if (!grant.ok()) return bad(FromAbsl(grant.status().message()));
    auto [it, inserted] =
        table.entries_.try_emplace(Str(words[0]), Entry{std::string(words[1]), *grant});
    if (!inserted) return bad(absl::StrCat("'", Str(words[0]), "' is given twice"));
    if (grant->Has(kPeer) && !table.peer_.has_value()) {
      table.peer_ = Credentials{Str(words[0]), std::string(words[1])};
    }
  }
  if (table.entries_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(Str(origin), ": no secrets in it"));
  }
  return table;
}

absl::StatusOr<AuthTable> AuthTable::LoadFile(const std::string& path) {
  ARDMA_ASSIGN_OR_RETURN(std::string text, ReadPrivateFile(path));
  return Parse(text, path);
}

const AuthTable::Entry* AuthTable::Find(std::string_view name) const {
  auto it = entries_.find(ToAbsl(name));
  return it == entries_.end() ? nullptr : &it->second;
}

absl::StatusOr<Credentials> LoadCredentials(const std::string& path) {
  ARDMA_ASSIGN_OR_RETURN(std::string text, ReadPrivateFile(path));
  for (const auto& [number, words] : Lines(text)) {
    if (words.size() < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": expected NAME SECRET"));
    }
    if (absl::Status s = CheckNameAndSecret(words[0], words[1]); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", number, ": ", s.message()));
    }
    return Credentials{std::string(words[0]), std::string(words[1])};
  }
  return absl::InvalidArgumentError(absl::StrCat(path, ": no NAME SECRET line"));
}

absl::StatusOr<std::optional<Credentials>> CredentialsFromEnvironment() {
  const char* path = std::getenv("ARDMA_AUTH_FILE");
  if (path == nullptr || *path == '\0') return std::optional<Credentials>();
  ARDMA_ASSIGN_OR_RETURN(Credentials c, LoadCredentials(path));
  return std::optional<Credentials>(std::move(c));
}

}  // namespace ardma::security
