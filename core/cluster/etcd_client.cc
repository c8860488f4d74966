#include "core/cluster/etcd_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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

size_t Append(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

}  // namespace

struct EtcdClient::Curl {
  Curl() : handle(curl_easy_init()) {}
  ~Curl() {
    if (handle != nullptr) curl_easy_cleanup(handle);
  }
  CURL* handle;
};

EtcdClient::EtcdClient(std::vector<std::string> endpoints, std::string text,
                       absl::Duration timeout)
    : endpoints_(std::move(endpoints)), endpoints_text_(std::move(text)), timeout_(timeout) {
  static CurlGlobal global;  // once per process, before the first handle
  curl_ = std::make_unique<Curl>();
}

EtcdClient::~EtcdClient() = default;

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(std::string_view endpoints,
                                                                absl::Duration timeout) {
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
  ARDMA_RETURN_IF_ERROR(client->Get("\x01" "ardma-probe").status());
  return client;
}

absl::StatusOr<std::string> EtcdClient::Call(std::string_view path, const std::string& body) {
  absl::MutexLock lock(&mu_);
  CURL* curl = curl_->handle;
  if (curl == nullptr) return absl::InternalError("libcurl could not make a handle");
  std::string last_error;
  for (size_t attempt = 0; attempt < endpoints_.size(); ++attempt) {
    size_t index = (preferred_ + attempt) % endpoints_.size();
    const std::string& endpoint = endpoints_[index];
    std::string url = absl::StrCat("http://", endpoint, ToAbsl(path));
    std::string answer;
    curl_easy_reset(curl);
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Append);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(absl::ToInt64Milliseconds(timeout_)));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_PROXY, "");  // never an $http_proxy for loopback etcd
    CURLcode rc = curl_easy_perform(curl);
    if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
        rc == CURLE_OPERATION_TIMEDOUT) {
      last_error = absl::StrCat(endpoint, ": ", curl_easy_strerror(rc));
      continue;  // the next endpoint
    }
    if (rc != CURLE_OK) {  // something answered, not in HTTP
      return absl::FailedPreconditionError(absl::StrCat(
          endpoint, " does not answer as etcd's v3 JSON gateway (", curl_easy_strerror(rc), ")"));
    }
    preferred_ = index;
    long http = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http);
    Json json = Json::parse(answer, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded() || !json.is_object()) {
      return absl::FailedPreconditionError(absl::StrCat(
          endpoint, " does not answer as etcd's v3 JSON gateway (HTTP ", http, ")"));
    }
    if (http != 200) {
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
    return answer;
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

}  // namespace

absl::Status EtcdClient::Put(std::string_view key, std::string_view value, int64_t lease) {
  return Call("/v3/kv/put", PutRequest(key, value, lease).dump()).status();
}

absl::StatusOr<bool> EtcdClient::PutIf(std::string_view key, int64_t expected,
                                       std::string_view value, int64_t lease) {
  Json compare{{"key", B64(key)}, {"result", "EQUAL"}};
  if (expected == 0) {
    compare["target"] = "CREATE";  // create_revision 0: the key does not exist
    compare["create_revision"] = "0";
  } else {
    compare["target"] = "MOD";
    compare["mod_revision"] = std::to_string(expected);
  }
  Json txn{{"compare", Json::array({compare})},
           {"success", Json::array({Json{{"request_put", PutRequest(key, value, lease)}}})}};
  ARDMA_ASSIGN_OR_RETURN(std::string answer, Call("/v3/kv/txn", txn.dump()));
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

struct EtcdWatch::Handles {
  CURLM* multi = curl_multi_init();
  CURL* easy = curl_easy_init();
  std::string body;
  std::atomic<bool> woken{false};
  ~Handles() {
    if (multi != nullptr && easy != nullptr) curl_multi_remove_handle(multi, easy);
    if (easy != nullptr) curl_easy_cleanup(easy);
    if (multi != nullptr) curl_multi_cleanup(multi);
  }
};

absl::StatusOr<std::unique_ptr<EtcdWatch>> EtcdClient::Watch(std::string_view prefix,
                                                             int64_t from) {
  Json create{{"key", B64(prefix)}, {"range_end", B64(PrefixEnd(prefix))}};
  if (from > 0) create["start_revision"] = std::to_string(from);
  std::string endpoint;
  {
    absl::MutexLock lock(&mu_);
    endpoint = endpoints_[preferred_];
  }
  std::unique_ptr<EtcdWatch> watch(
      new EtcdWatch(endpoint, Json{{"create_request", create}}.dump(), timeout_));
  if (watch->handles_->multi == nullptr || watch->handles_->easy == nullptr) {
    return absl::InternalError("libcurl could not make a handle");
  }
  return watch;
}

EtcdWatch::EtcdWatch(std::string endpoint, const std::string& body,
                     absl::Duration connect_timeout)
    : endpoint_(std::move(endpoint)), handles_(std::make_unique<Handles>()) {
  Handles& h = *handles_;
  if (h.multi == nullptr || h.easy == nullptr) return;
  h.body = body;
  std::string url = absl::StrCat("http://", endpoint_, "/v3/watch");
  curl_easy_setopt(h.easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h.easy, CURLOPT_POSTFIELDS, h.body.c_str());
  curl_easy_setopt(h.easy, CURLOPT_POSTFIELDSIZE, static_cast<long>(h.body.size()));
  curl_easy_setopt(h.easy, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(h.easy, CURLOPT_WRITEDATA, &buffer_);
  curl_easy_setopt(h.easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(connect_timeout)));
  curl_easy_setopt(h.easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h.easy, CURLOPT_PROXY, "");
  curl_multi_add_handle(h.multi, h.easy);
}

EtcdWatch::~EtcdWatch() = default;

void EtcdWatch::Wake() {
  handles_->woken = true;
  curl_multi_wakeup(handles_->multi);
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
  Handles& h = *handles_;
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    int running = 0;
    curl_multi_perform(h.multi, &running);
    ARDMA_ASSIGN_OR_RETURN(int64_t revision, TakeMessages());
    if (revision != 0) return revision;
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(h.multi, &left)) {
      if (msg->msg == CURLMSG_DONE) {
        return absl::UnavailableError(absl::StrCat("the watch on etcd at ", endpoint_, " ended: ",
                                                   curl_easy_strerror(msg->data.result)));
      }
    }
    if (running == 0) {
      return absl::UnavailableError(absl::StrCat("the watch on etcd at ", endpoint_, " ended"));
    }
    absl::Duration left_time = deadline - absl::Now();
    if (h.woken.exchange(false) || left_time <= absl::ZeroDuration()) return 0;
    int64_t ms = std::clamp<int64_t>(absl::ToInt64Milliseconds(left_time), 1, 1000);
    curl_multi_poll(h.multi, nullptr, 0, static_cast<int>(ms), nullptr);
  }
}

}  // namespace ardma::cluster
