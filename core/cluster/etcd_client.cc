#include "core/cluster/etcd_client.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/cluster/http_client.h"
#include "core/status_macros.h"

namespace ardma::cluster {
namespace {

using Json = nlohmann::json;

std::string B64(std::string_view bytes) { return absl::Base64Escape(ToAbsl(bytes)); }

// etcd's JSON writes 64-bit numbers as strings (and leaves zeros out).
int64_t Int(const Json& object, const char* field) {
  auto it = object.find(field);
  if (it == object.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  int64_t n = 0;
  if (it->is_string() && absl::SimpleAtoi(it->get<std::string>(), &n)) return n;
  return 0;
}

// The end of the range of keys that start with `prefix` (etcd's range_end).
std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      ++end.back();
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

absl::StatusOr<KeyValue> ToKeyValue(const Json& kv) {
  KeyValue out;
  std::string key, value;
  if (!absl::Base64Unescape(kv.value("key", ""), &key) ||
      !absl::Base64Unescape(kv.value("value", ""), &value)) {
    return absl::DataLossError("etcd answered a key or value that is not base64");
  }
  out.key = std::move(key);
  out.value = std::move(value);
  out.create_revision = Int(kv, "create_revision");
  out.mod_revision = Int(kv, "mod_revision");
  out.lease = Int(kv, "lease");
  return out;
}

}  // namespace

EtcdClient::EtcdClient(std::vector<std::string> endpoints, std::string text,
                       absl::Duration timeout)
    : endpoints_(std::move(endpoints)), endpoints_text_(std::move(text)), timeout_(timeout) {}

EtcdClient::~EtcdClient() = default;

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(std::string_view endpoints,
                                                                absl::Duration timeout,
                                                                bool probe) {
  std::vector<std::string> list = absl::StrSplit(ToAbsl(endpoints), ',', absl::SkipEmpty());
  if (list.empty()) return absl::InvalidArgumentError("no etcd endpoint given");
  for (const std::string& e : list) {
    if (e.find(':') == std::string::npos || e.find('/') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoint '", e, "' is not HOST:PORT"));
    }
  }
  std::unique_ptr<EtcdClient> client(
      new EtcdClient(std::move(list), std::string(endpoints), timeout));
  // A read of a key nobody writes: only etcd answers it with a header.
  if (probe) ARDMA_RETURN_IF_ERROR(client->Get("\x01" "ardma-probe").status());
  return client;
}

absl::StatusOr<std::string> EtcdClient::Call(std::string_view path, const std::string& body) {
  absl::MutexLock lock(&mu_);
  std::string last_error;
  for (size_t attempt = 0; attempt < endpoints_.size(); ++attempt) {
    size_t index = (preferred_ + attempt) % endpoints_.size();
    const std::string& endpoint = endpoints_[index];
    if (http_ == nullptr || http_->endpoint() != endpoint) {
      http_ = std::make_unique<HttpConnection>(endpoint);
    }
    absl::StatusOr<HttpAnswer> answer = http_->Post(path, body, absl::Now() + timeout_);
    if (absl::IsUnavailable(answer.status()) || absl::IsDeadlineExceeded(answer.status()) ||
        absl::IsInvalidArgument(answer.status())) {
      last_error = std::string(answer.status().message());
      continue;  // the next endpoint
    }
    if (!answer.ok()) {  // something answered, not in HTTP
      return absl::FailedPreconditionError(
          absl::StrCat(endpoint, " does not answer as etcd's v3 JSON gateway (",
                       answer.status().message(), ")"));
    }
    preferred_ = index;
    Json json = Json::parse(answer->body, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded() || !json.is_object()) {
      return absl::FailedPreconditionError(absl::StrCat(
          endpoint, " does not answer as etcd's v3 JSON gateway (HTTP ", answer->status, ")"));
    }
    if (answer->status != 200) {
      int code = json.value("code", 2);
      std::string message = json.value("message", json.value("error", std::string("no message")));
      if (code <= 0 || code > 16) code = 2;
      return absl::Status(static_cast<absl::StatusCode>(code),
                          absl::StrCat("etcd at ", endpoint, ": ", message));
    }
    if (!json.contains("header") && !(json.contains("result") && json["result"].is_object())) {
      return absl::FailedPreconditionError(
          absl::StrCat(endpoint, " does not answer as etcd's v3 JSON gateway"));
    }
    return std::move(answer->body);
  }
  return absl::UnavailableError(
      absl::StrCat("etcd at ", endpoints_text_, " is unreachable (", last_error, ")"));
}

absl::StatusOr<std::optional<KeyValue>> EtcdClient::Get(std::string_view key) {
  ARDMA_ASSIGN_OR_RETURN(std::string answer, Call("/v3/kv/range", Json{{"key", B64(key)}}.dump()));
  Json json = Json::parse(answer);
  if (!json.contains("kvs") || json["kvs"].empty()) return std::nullopt;
  ARDMA_ASSIGN_OR_RETURN(KeyValue kv, ToKeyValue(json["kvs"][0]));
  return kv;
}

absl::StatusOr<std::vector<KeyValue>> EtcdClient::GetPrefix(std::string_view prefix,
                                                            int64_t* revision) {
  ARDMA_ASSIGN_OR_RETURN(
      std::string answer,
      Call("/v3/kv/range", Json{{"key", B64(prefix)}, {"range_end", B64(PrefixEnd(prefix))}}.dump()));
  Json json = Json::parse(answer);
  if (revision != nullptr) *revision = Int(json["header"], "revision");
  std::vector<KeyValue> out;
  if (json.contains("kvs")) {
    for (const Json& kv : json["kvs"]) {
      ARDMA_ASSIGN_OR_RETURN(KeyValue one, ToKeyValue(kv));
      out.push_back(std::move(one));
    }
  }
  return out;
}

namespace {

Json PutRequest(std::string_view key, std::string_view value, int64_t lease) {
  Json put{{"key", B64(key)}, {"value", B64(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
  return put;
}

// etcd's comparison of `key`'s revision with `expected` (0: the key does not exist).
Json RevisionIs(std::string_view key, int64_t expected) {
  Json compare{{"key", B64(key)}, {"result", "EQUAL"}};
  if (expected == 0) {
    compare["target"] = "CREATE";  // create_revision 0: the key does not exist
    compare["create_revision"] = "0";
  } else {
    compare["target"] = "MOD";
    compare["mod_revision"] = std::to_string(expected);
  }
  return compare;
}

// A transaction that makes `put` if every one of `compares` holds.
std::string PutTxn(Json compares, Json put) {
  return Json{{"compare", std::move(compares)},
              {"success", Json::array({Json{{"request_put", std::move(put)}}})}}
      .dump();
}

}  // namespace

absl::Status EtcdClient::Put(std::string_view key, std::string_view value, int64_t lease) {
  return Call("/v3/kv/put", PutRequest(key, value, lease).dump()).status();
}

absl::StatusOr<bool> EtcdClient::PutIf(std::string_view key, int64_t expected,
                                       std::string_view value, int64_t lease) {
  return Transact(PutTxn(Json::array({RevisionIs(key, expected)}), PutRequest(key, value, lease)));
}

absl::StatusOr<bool> EtcdClient::PutIf(std::string_view key, int64_t expected,
                                       std::string_view value, const Unchanged& unchanged) {
  // Every key of the range last modified before since + 1 (a range compare holds for each key).
  Json untouched{{"key", B64(unchanged.prefix)},
                 {"range_end", B64(PrefixEnd(unchanged.prefix))},
                 {"target", "MOD"},
                 {"result", "LESS"},
                 {"mod_revision", std::to_string(unchanged.since + 1)}};
  return Transact(PutTxn(Json::array({RevisionIs(key, expected), untouched}),
                         PutRequest(key, value, 0)));
}

absl::StatusOr<bool> EtcdClient::Transact(const std::string& txn) {
  ARDMA_ASSIGN_OR_RETURN(std::string answer, Call("/v3/kv/txn", txn));
  return Json::parse(answer).value("succeeded", false);
}

absl::Status EtcdClient::Delete(std::string_view key) {
  return Call("/v3/kv/deleterange", Json{{"key", B64(key)}}.dump()).status();
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl) {
  int64_t seconds = std::max<int64_t>(1, absl::ToInt64Seconds(ttl));
  ARDMA_ASSIGN_OR_RETURN(std::string answer,
                         Call("/v3/lease/grant", Json{{"TTL", seconds}}.dump()));
  Json json = Json::parse(answer);
  if (json.contains("error") && !json["error"].get<std::string>().empty()) {
    return absl::UnavailableError(absl::StrCat("etcd refused a lease: ", json["error"].dump()));
  }
  int64_t id = Int(json, "ID");
  if (id == 0) return absl::InternalError("etcd granted a lease without an id");
  return id;
}

absl::StatusOr<absl::Duration> EtcdClient::KeepAlive(int64_t lease) {
  ARDMA_ASSIGN_OR_RETURN(std::string answer, Call("/v3/lease/keepalive",
                                                  Json{{"ID", std::to_string(lease)}}.dump()));
  Json json = Json::parse(answer);
  int64_t ttl = json.contains("result") ? Int(json["result"], "TTL") : 0;
  if (ttl <= 0) return absl::NotFoundError(absl::StrCat("etcd lease ", lease, " has expired"));
  return absl::Seconds(ttl);
}

absl::StatusOr<absl::Duration> EtcdClient::TimeToLive(int64_t lease) {
  ARDMA_ASSIGN_OR_RETURN(std::string answer, Call("/v3/lease/timetolive",
                                                  Json{{"ID", std::to_string(lease)}}.dump()));
  int64_t ttl = Int(Json::parse(answer), "TTL");
  if (ttl < 0) return absl::NotFoundError(absl::StrCat("etcd lease ", lease, " has expired"));
  return absl::Seconds(ttl);
}

absl::Status EtcdClient::RevokeLease(int64_t lease) {
  absl::StatusOr<std::string> answer =
      Call("/v3/lease/revoke", Json{{"ID", std::to_string(lease)}}.dump());
  if (absl::IsNotFound(answer.status())) return absl::OkStatus();  // expired already
  return answer.status();
}

// ---- Watch ----

absl::StatusOr<std::unique_ptr<EtcdWatch>> EtcdClient::Watch(std::string_view prefix,
                                                             int64_t from) {
  Json create{{"key", B64(prefix)}, {"range_end", B64(PrefixEnd(prefix))}};
  if (from > 0) create["start_revision"] = std::to_string(from);
  std::string endpoint;
  {
    absl::MutexLock lock(&mu_);
    endpoint = endpoints_[preferred_];
  }
  std::unique_ptr<EtcdWatch> watch(new EtcdWatch(endpoint));
  if (::pipe2(watch->wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError("no pipe for a watch");
  }
  const std::string body = Json{{"create_request", create}}.dump();
  ARDMA_ASSIGN_OR_RETURN(int status,
                         watch->http_->StartStream("/v3/watch", body, absl::Now() + timeout_));
  if (status != 200) {
    return absl::UnavailableError(
        absl::StrCat("etcd at ", endpoint, " refused a watch (HTTP ", status, ")"));
  }
  return watch;
}

EtcdWatch::EtcdWatch(std::string endpoint)
    : endpoint_(endpoint), http_(std::make_unique<HttpConnection>(std::move(endpoint))) {}

EtcdWatch::~EtcdWatch() {
  for (int fd : wake_) {
    if (fd >= 0) ::close(fd);
  }
}

void EtcdWatch::Wake() {
  woken_ = true;
  char one = 1;
  (void)!::write(wake_[1], &one, 1);
}

absl::StatusOr<int64_t> EtcdWatch::TakeMessages() {
  int64_t revision = 0;
  for (size_t end = buffer_.find('\n'); end != std::string::npos; end = buffer_.find('\n')) {
    Json message = Json::parse(buffer_.substr(0, end), nullptr, /*allow_exceptions=*/false);
    buffer_.erase(0, end + 1);
    if (message.is_discarded() || !message.contains("result")) {
      return absl::UnavailableError(
          absl::StrCat("etcd at ", endpoint_, " ended the watch: ", message.dump()));
    }
    const Json& result = message["result"];
    if (result.value("canceled", false)) {
      return absl::UnavailableError(absl::StrCat("etcd at ", endpoint_, " canceled the watch"));
    }
    if (result.contains("events") && !result["events"].empty()) {
      revision = std::max(revision, Int(result["header"], "revision"));
    }
  }
  return revision;
}

absl::StatusOr<int64_t> EtcdWatch::Next(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    absl::StatusOr<bool> open = http_->ReadStream(&buffer_, deadline, wake_[0]);
    if (!open.ok()) {
      return absl::UnavailableError(absl::StrCat("the watch on etcd at ", endpoint_,
                                                 " ended: ", open.status().message()));
    }
    ARDMA_ASSIGN_OR_RETURN(int64_t revision, TakeMessages());
    if (revision != 0) return revision;
    if (!*open) {
      return absl::UnavailableError(absl::StrCat("the watch on etcd at ", endpoint_, " ended"));
    }
    if (woken_.exchange(false)) {
      char drain[64];
      while (::read(wake_[0], drain, sizeof(drain)) > 0) {
      }
      return 0;
    }
    if (absl::Now() >= deadline) return 0;
  }
}

}  // namespace ardma::cluster
