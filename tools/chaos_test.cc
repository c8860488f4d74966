// Chaos against the real ardmad (issue 22), bounded for CI (the soak is soak_test.cc):
//  - SIGKILL in the middle of hash-table puts, file writes and lock hand-offs, three times over
//    one memory file: after each restart every acknowledged put and write is there, the lock is
//    granted again within its lease, and the heap's own check finds no error.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/memory/heap.h"
#include "core/testing/server_process.h"
#include "core/testing/wait_until.h"
#include "gtest/gtest.h"
#include "services/dfs/dfs_client.h"
#include "services/dht/dht_client.h"
#include "services/lock/lock_client.h"

namespace ardma {
namespace {

using testing::StatOf;

using lock::Grant;
using lock::LockClient;
using lock::LockMode;

// SIGKILL while puts, writes and lock hand-offs are in flight; restart on the same memory file.
TEST(ChaosTest, SigkillMidOperationLosesNoAcknowledgedWrite) {
  std::string file = testing::TempPath("chaos.mem");
  std::filesystem::remove(file);
  std::map<std::string, std::string> puts, files;  // acknowledged: key/path -> value
  std::mutex acked_mu;
  uint64_t grants = 0;
  for (int round = 0; round < 3; ++round) {
    testing::ServerProcess daemon({"--memory", "64M", "--memory-file", file, "--ucx", "off"});
    ASSERT_FALSE(daemon.address().empty()) << "round " << round << ": ardmad did not (re)start";
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> round_grants{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t) {
      threads.emplace_back([&, t] {
        ClientOptions options;
        options.timeout = absl::Seconds(5);
        options.connect_attempts = 1;
        auto client = Client::Connect(daemon.address(), options);
        if (!client.ok()) return;
        Mode mode = t % 2 == 0 ? Mode::kActive : Mode::kRdma;
        for (uint64_t i = 0; !stop.load(); ++i) {
          std::string key = absl::StrCat("r", round, "-t", t, "-", i);
          std::string value = absl::StrCat("acknowledged ", key);
          if (t < 2) {
            dht::DhtClient dht(client->get(), mode);
            if (!dht.Put("chaos", key, value).ok()) return;
            std::lock_guard<std::mutex> lock(acked_mu);
            puts[key] = value;
          } else if (t < 4) {
            dfs::DfsClient dfs(client->get(), mode);
            std::string path = "/" + key;
            if (!dfs.Create(path).ok() || !dfs.Write(path, 0, value).ok()) return;
            std::lock_guard<std::mutex> lock(acked_mu);
            files[path] = value;
          } else {
            LockClient locks(client->get(), mode);
            absl::StatusOr<Grant> grant =
                locks.Acquire("chaos", LockMode::kExclusive, absl::Seconds(4), absl::Seconds(1));
            // Waiting behind holders the last kill left (their leases run out one after the
            // other) may take longer than one attempt on a loaded machine: ask again.
            if (absl::IsDeadlineExceeded(grant.status())) continue;
            if (!grant.ok()) {
              if (!stop.load()) std::cout << "lock thread " << t << ": " << grant.status() << "\n";
              return;
            }
            ++round_grants;
            if (absl::Status s = locks.Release(*grant); !s.ok()) {
              if (!stop.load()) std::cout << "lock thread " << t << ": " << s << "\n";
              return;
            }
          }
        }
      });
    }
    // Longer than the lease, so that the holders the last kill left are replaced this round; on a
    // loaded machine wait (boundedly) until the lock has been granted at least once.
    absl::SleepFor(absl::Milliseconds(2500));  // under test: longer than the lease
    testing::WaitUntil([&] { return round_grants.load() > 0; }, absl::Seconds(30));
    daemon.Kill(SIGKILL);
    stop = true;
    for (std::thread& t : threads) t.join();
    grants += round_grants.load();
    std::cout << "round " << round << ": killed with " << puts.size() << " puts, " << files.size()
              << " files and " << grants << " lock grants acknowledged so far\n";
    ASSERT_GT(round_grants.load(), 0u);
  }
  testing::ServerProcess daemon({"--memory-file", file, "--ucx", "off"});
  ASSERT_FALSE(daemon.address().empty());
  auto client = Client::Connect(daemon.address());
  ASSERT_TRUE(client.ok());
  for (Mode mode : {Mode::kActive, Mode::kRdma}) {
    dht::DhtClient dht(client->get(), mode);
    dfs::DfsClient dfs(client->get(), mode);
    for (const auto& [key, value] : puts) {
      absl::StatusOr<std::string> got = dht.Get("chaos", key);
      ASSERT_TRUE(got.ok()) << key << ": " << got.status();
      EXPECT_EQ(*got, value);
    }
    for (const auto& [path, value] : files) {
      absl::StatusOr<std::string> got = dfs.Read(path, 0, value.size());
      ASSERT_TRUE(got.ok()) << path << ": " << got.status();
      EXPECT_EQ(*got, value);
    }
  }
  // The lock's last holders died with the server: their leases (1 s) run out and it is granted.
  LockClient locks(client->get(), Mode::kActive);
  absl::StatusOr<Grant> grant =
      locks.Acquire("chaos", LockMode::kExclusive, absl::Seconds(20), absl::Seconds(1));
  ASSERT_TRUE(grant.ok()) << grant.status();
  EXPECT_TRUE(locks.Release(*grant).ok());
  EXPECT_EQ(StatOf(**client, "heap.errors"), 0u);
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace ardma
