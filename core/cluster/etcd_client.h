// EtcdClient: the few calls of etcd's v3 API the cluster needs — keys, leases and compare-and-put
// transactions — over etcd's JSON gateway (HTTP/1.1 POST to /v3/..., http_client.h; keys, values
// and lease ids as etcd's JSON encodes them: bytes in base64, 64-bit numbers as strings). Chosen
// over gRPC because Debian's etcd 3.4 serves the gateway on its client port and it needs no
// generated code. A watch (EtcdWatch) is the gateway's stream of newline-separated JSON messages.
//
//   ARDMA_ASSIGN_OR_RETURN(auto etcd, EtcdClient::Connect("127.0.0.1:2379"));
//   ARDMA_RETURN_IF_ERROR(etcd->Put("/ardma/c1/members/7", "..."));
//
// Errors: UNAVAILABLE naming the endpoints when none answers; FAILED_PRECONDITION when what
// answers is not an etcd v3 gateway; etcd's own errors with their gRPC codes. Thread-safe.
#ifndef ARDMA_CORE_CLUSTER_ETCD_CLIENT_H_
#define ARDMA_CORE_CLUSTER_ETCD_CLIENT_H_

#include <cstdint>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ardma::cluster {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;  // the store's revision when the key last changed
  int64_t lease = 0;         // 0: none
};

class EtcdWatch;
class HttpConnection;

class EtcdClient {
 public:
  // `endpoints`: "HOST:PORT[,HOST:PORT...]", tried in order for every call until one answers.
  // With `probe`, checks that the first that answers is etcd (one read); without, the first call
  // finds out. `timeout` bounds each HTTP exchange.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(
      std::string_view endpoints, absl::Duration timeout = absl::Seconds(2), bool probe = true);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // The key, or nullopt when it does not exist.
  absl::StatusOr<std::optional<KeyValue>> Get(std::string_view key);
  // Every key that starts with `prefix`, in key order; *revision (if given) gets the store's
  // revision the answer reflects.
  absl::StatusOr<std::vector<KeyValue>> GetPrefix(std::string_view prefix,
                                                  int64_t* revision = nullptr);
  // Puts unconditionally; `lease` 0: the key lives until deleted.
  absl::Status Put(std::string_view key, std::string_view value, int64_t lease = 0);
  // Puts only if the key's mod_revision is still `expected` (0: only if the key does not exist),
  // in one etcd transaction: false, with nothing written, when it was not.
  absl::StatusOr<bool> PutIf(std::string_view key, int64_t expected, std::string_view value,
                             int64_t lease = 0);
  // The same, and only if no key that starts with `prefix` was put after store revision `since`
  // (a decision taken on a read at `since` of those keys still stands).
  struct Unchanged {
    std::string_view prefix;
    int64_t since = 0;
  };
  absl::StatusOr<bool> PutIf(std::string_view key, int64_t expected, std::string_view value,
                             const Unchanged& unchanged);
  absl::Status Delete(std::string_view key);

  // A lease of `ttl` (whole seconds, at least 1; etcd raises it to its minimum, 2 s with default
  // settings): its id.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  // Renews the lease: its TTL again. NOT_FOUND once it has expired (its keys are gone).
  absl::StatusOr<absl::Duration> KeepAlive(int64_t lease);
  // What is left of the lease's TTL, without renewing it; NOT_FOUND once it has expired.
  absl::StatusOr<absl::Duration> TimeToLive(int64_t lease);
  absl::Status RevokeLease(int64_t lease);

  // Watches the keys that start with `prefix`, from store revision `from` on (so nothing after a
  // read at revision from - 1 is missed), on the endpoint that answered last.
  absl::StatusOr<std::unique_ptr<EtcdWatch>> Watch(std::string_view prefix, int64_t from);

  const std::string& endpoints() const { return endpoints_text_; }

 private:
  EtcdClient(std::vector<std::string> endpoints, std::string text, absl::Duration timeout);
  // POSTs `body` (JSON) to `path` on the first endpoint that answers: the parsed JSON text of a
  // 200 answer, or the error.
  absl::StatusOr<std::string> Call(std::string_view path, const std::string& body);
  // Runs the transaction `txn` (JSON): whether its comparisons held (and its puts were made).
  absl::StatusOr<bool> Transact(const std::string& txn);

  const std::vector<std::string> endpoints_;
  const std::string endpoints_text_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  std::unique_ptr<HttpConnection> http_ ABSL_GUARDED_BY(mu_);  // kept between calls
  size_t preferred_ ABSL_GUARDED_BY(mu_) = 0;        // the endpoint that answered last
};

// A watch's stream. One thread waits in Next; any thread may Wake it.
class EtcdWatch {
 public:
  ~EtcdWatch();
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;

  // Waits up to `timeout` for changes: the store revision of the last change seen, or 0 if none
  // came in that time (or Wake was called). UNAVAILABLE once the stream has ended (etcd went away,
  // or compacted the revision watched from): start over from a fresh read.
  absl::StatusOr<int64_t> Next(absl::Duration timeout);
  void Wake();

 private:
  friend class EtcdClient;
  explicit EtcdWatch(std::string endpoint);
  // Takes the complete messages out of buffer_: the revision of the last change, 0 if none.
  absl::StatusOr<int64_t> TakeMessages();

  const std::string endpoint_;
  std::unique_ptr<HttpConnection> http_;
  std::string buffer_;             // the stream's bytes not parsed yet
  int wake_[2] = {-1, -1};         // a pipe: Wake writes, Next waits on it with the stream
  std::atomic<bool> woken_{false};
};

}  // namespace ardma::cluster

#endif  // ARDMA_CORE_CLUSTER_ETCD_CLIENT_H_
