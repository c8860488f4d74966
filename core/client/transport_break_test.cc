// Every transport breaks alike (core/client/call_table.h): with synchronous and asynchronous calls
// in flight, a transport that breaks — closed by its owner, or its server gone — fails every one
// of them with UNAVAILABLE, at once, and every later call too.
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/active/testdata/test_library.h"
#include "core/client/client.h"
#include "core/client/connection.h"
#include "core/client/invoke.h"
#include "core/client/ucx_connection.h"
#include "core/server/server.h"
#include "core/testing/test_certificates.h"
#include "core/testing/test_server.h"
#include "core/testing/wait_until.h"
#include "core/wire/messages.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

enum class BreakBy { kOwnerCloses, kServerStops };

struct Case {
  std::string transport;  // tcp, unix, tls, ucx, ucx_tcp
  BreakBy by;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return info.param.transport +
         (info.param.by == BreakBy::kOwnerCloses ? "_OwnerCloses" : "_ServerStops");
}

OutgoingRequest Park(const std::string& key) {
  std::string payload;
  wire::EncodeExecuteRequest({.function = "test.park", .args = key}, &payload);
  return {wire::Op::kExecute, std::move(payload)};
}

class TransportBreakTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const std::string& t = GetParam().transport;
    if (t == "ucx") ::setenv("UCX_TLS", "shm,self", /*overwrite=*/1);
    if (t == "ucx_tcp") ::setenv("UCX_TLS", "tcp,self", /*overwrite=*/1);
    ServerOptions options = testing::TestServerOptions();
    options.ucx = t.starts_with("ucx") ? ServerOptions::Ucx::kOn : ServerOptions::Ucx::kOff;
    if (t == "unix") options.unix_socket = absl::StrCat("/tmp/ardma_break.", ::getpid(), ".sock");
    if (t == "tls") {
      ASSERT_TRUE(testing::TestCertificates::Get().ok()) << "openssl failed";
      options.tls_cert = testing::TestCertificates::Get().Path("server.pem");
      options.tls_key = testing::TestCertificates::Get().Path("server.key");
    }
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    // The parking code, loaded over a client of the same transport.
    ClientOptions client_options;
    if (t == "tls") client_options.tls.ca_file = testing::TestCertificates::Get().Path("ca.pem");
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(Address(), client_options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());

    absl::Duration timeout = absl::Seconds(5);
    if (t.starts_with("ucx")) {
      absl::StatusOr<std::shared_ptr<UcxConnection>> ucx =
          UcxConnection::Open(server_->address(), timeout, limits_, &counters_);
      ASSERT_TRUE(ucx.ok()) << ucx.status();
      transport_ = *ucx;
    } else {
      TlsOptions tls;
      tls.ca_file = testing::TestCertificates::Get().Path("ca.pem");
      absl::StatusOr<std::shared_ptr<Connection>> c =
          Connection::Open(Address(), timeout, limits_, &counters_, nullptr, tls);
      ASSERT_TRUE(c.ok()) << c.status();
      transport_ = *c;
    }
  }
  void TearDown() override {
    if (transport_ != nullptr) transport_->Close();
    client_.reset();
    server_.reset();
  }

  std::string Address() const {
    const std::string& t = GetParam().transport;
    if (t == "unix") return "unix:" + server_->unix_socket();
    if (t == "tls") return "tls://" + server_->address();
    if (t.starts_with("ucx")) return "ucx://" + server_->address();
    return server_->address();
  }

  uint64_t Parked() {
    absl::StatusOr<uint64_t> n = testing::StatValue(*client_, "parked.now");
    return n.ok() ? *n : 0;
  }

  wire::WireLimits limits_;
  ClientCounters counters_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
  std::shared_ptr<Transport> transport_;
};

TEST_P(TransportBreakTest, BreakFailsEveryPendingCallWithUnavailable) {
  constexpr int kAsync = 3;
  const absl::Time far = absl::Now() + absl::Seconds(60);
  std::vector<std::promise<ResponsePayload>> answers(kAsync);
  std::vector<std::future<ResponsePayload>> async;
  for (int i = 0; i < kAsync; ++i) {
    async.push_back(answers[i].get_future());
    transport_->Async(Park("async" + std::to_string(i)), 100 + i, 7, far,
                      [&answers, i](ResponsePayload r) { answers[i].set_value(std::move(r)); });
  }
  auto sync = std::async(std::launch::async,
                         [&] { return transport_->RoundTripOne(Park("sync"), 1, 7, far); });
  // Every call reached the server and waits there.
  ASSERT_TRUE(testing::WaitUntil([&] { return Parked() == kAsync + 1; })) << Parked();

  const absl::Time broken_at = absl::Now();
  if (GetParam().by == BreakBy::kOwnerCloses) {
    transport_->Close();
  } else {
    client_.reset();
    server_.reset();
  }
  // Everyone hears of it, with UNAVAILABLE, long before their deadline.
  ASSERT_EQ(sync.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  absl::StatusOr<std::string> got = sync.get();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  for (int i = 0; i < kAsync; ++i) {
    ASSERT_EQ(async[i].wait_for(std::chrono::seconds(10)), std::future_status::ready) << i;
    ResponsePayload r = async[i].get();
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << i << ": " << r.status();
  }
  EXPECT_LT(absl::Now() - broken_at, absl::Seconds(10));
  EXPECT_TRUE(transport_->broken());

  // And so does every later call, at once.
  absl::StatusOr<std::string> later = transport_->RoundTripOne({wire::Op::kPing, ""}, 2, 7, far);
  EXPECT_EQ(later.status().code(), absl::StatusCode::kUnavailable) << later.status();
  std::promise<ResponsePayload> late_answer;
  transport_->Async({wire::Op::kPing, ""}, 3, 7, far,
                    [&](ResponsePayload r) { late_answer.set_value(std::move(r)); });
  auto late = late_answer.get_future();
  ASSERT_EQ(late.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_EQ(late.get().status().code(), absl::StatusCode::kUnavailable);
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportBreakTest,
                         ::testing::ValuesIn(std::vector<Case>{
                             {"tcp", BreakBy::kOwnerCloses},
                             {"tcp", BreakBy::kServerStops},
                             {"unix", BreakBy::kOwnerCloses},
                             {"unix", BreakBy::kServerStops},
                             {"tls", BreakBy::kOwnerCloses},
                             {"tls", BreakBy::kServerStops},
                             {"ucx", BreakBy::kOwnerCloses},
                             {"ucx", BreakBy::kServerStops},
                             {"ucx_tcp", BreakBy::kOwnerCloses},
                             {"ucx_tcp", BreakBy::kServerStops},
                         }),
                         CaseName);

}  // namespace
}  // namespace ardma
