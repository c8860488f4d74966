// The soak against the real ardmad (issue 22): 64 connections of mixed operations (one-sided ops,
// hash table, file system, locks; active and RDMA mode) for ARDMA_SOAK_SECONDS (60): no errors,
// resident memory outside the memory region flat after warm-up. Labelled `soak`: scripts/test.sh
// runs it after the unit tests, alone, so a loaded machine does not decide its memory figure.
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/client/client.h"
#include "core/client/remote_context.h"
#include "core/memory/heap.h"
#include "core/testing/server_process.h"
#include "gtest/gtest.h"
#include "services/dfs/dfs_client.h"
#include "services/dht/dht_client.h"
#include "services/lock/lock_client.h"

namespace ardma {
namespace {

using testing::LargestGrowth;
using testing::ResidentByMapping;
using testing::StatOf;

using lock::Grant;
using lock::LockClient;
using lock::LockMode;

constexpr uint64_t kRegionBytes = 128u << 20;  // --memory

// The server's resident bytes in its memory region (its one mapping of kRegionBytes), and outside
// it. The region's pages become resident as its heap first touches them — freed blocks are reused
// once the fresh pages are used up — so they grow under churn up to --memory: bounded by the flag,
// not a leak. A leak grows what is outside.
uint64_t MappingBytes(const std::string& mapping) {
  uint64_t start = 0, end = 0;
  std::sscanf(mapping.c_str(), "%" SCNx64 "-%" SCNx64, &start, &end);
  return end - start;
}
uint64_t Region(const std::map<std::string, uint64_t>& mappings) {
  uint64_t bytes = 0;
  for (const auto& [name, resident] : mappings) {
    if (MappingBytes(name) == kRegionBytes) bytes += resident;
  }
  return bytes;
}
uint64_t Outside(const std::map<std::string, uint64_t>& mappings) {
  uint64_t bytes = 0;
  for (const auto& [name, resident] : mappings) bytes += resident;
  return bytes - Region(mappings);
}

int SoakSeconds() {
  const char* s = std::getenv("ARDMA_SOAK_SECONDS");
  return s != nullptr ? std::max(1, std::atoi(s)) : 60;
}

TEST(ChaosTest, SixtyFourConnectionsOfMixedOperationsStayErrorFreeWithFlatMemory) {
  testing::ServerProcess daemon({"--memory", "128M", "--ucx", "off"});
  static_assert(kRegionBytes == 128u << 20, "the --memory above");
  ASSERT_FALSE(daemon.address().empty());
  constexpr int kConnections = 64;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> ops{0}, errors{0};
  std::mutex first_error_mu;
  std::string first_error;
  auto failed = [&](const absl::Status& s, const char* what) {
    if (s.ok()) return false;
    if (errors.fetch_add(1) == 0) {
      std::lock_guard<std::mutex> lock(first_error_mu);
      first_error = absl::StrCat(what, ": ", s.ToString());
    }
    return true;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kConnections; ++t) {
    threads.emplace_back([&, t] {
      auto client = Client::Connect(daemon.address());
      if (failed(client.status(), "connect")) return;
      Mode mode = t % 2 == 0 ? Mode::kActive : Mode::kRdma;
      dht::DhtClient dht(client->get(), mode);
      dfs::DfsClient dfs(client->get(), mode);
      LockClient locks(client->get(), mode);
      // Its own 4 KiB for raw reads, writes and FETCH_ADDs: allocated, so that nothing else the
      // server keeps can be placed there (a fixed address in the heap once was).
      RemoteContext ctx(client->get(), {});
      absl::StatusOr<uint64_t> scratch = heap::Allocate(ctx, 4096);
      if (failed(scratch.status(), "allocate")) return;
      const uint64_t mine = *scratch;
      std::string file = absl::StrCat("/soak-", t);
      if (failed(dfs.Create(file, 0644, false).status(), "create")) return;
      for (uint64_t i = 0; !stop.load(); ++i) {
        std::string value = absl::StrCat("value-", t, "-", i);
        switch (i % 6) {
          case 0:
            failed((*client)->Write(mine, value), "write");
            break;
          case 1: {
            absl::StatusOr<std::string> back = (*client)->Read(mine, value.size());
            if (!failed(back.status(), "read") && back->rfind("value-", 0) != 0) {
              failed(absl::DataLossError(*back), "read back");
            }
            break;
          }
          case 2:
            failed((*client)->FetchAdd(mine + 2048, 1).status(), "fetch_add");
            break;
          case 3:
            if (!failed(dht.Put("soak", absl::StrCat("k", t, "-", i % 64), value).status(),
                        "dht put")) {
              absl::StatusOr<std::string> got = dht.Get("soak", absl::StrCat("k", t, "-", i % 64));
              if (!failed(got.status(), "dht get") && *got != value) {
                failed(absl::DataLossError(*got), "dht get value");
              }
            }
            break;
          case 4:
            if (!failed(dfs.Write(file, (i % 16) * 64, value).status(), "dfs write")) {
              failed(dfs.Read(file, 0, 1024).status(), "dfs read");
            }
            break;
          default: {
            absl::StatusOr<Grant> grant = locks.Acquire(absl::StrCat("soak-", t % 4),
                                                        LockMode::kExclusive, absl::Seconds(30));
            if (!failed(grant.status(), "lock")) failed(locks.Release(*grant), "unlock");
            break;
          }
        }
        ops.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  int seconds = SoakSeconds();
  // Under test, with the next: the soak's warm-up and its measured span.
  absl::SleepFor(absl::Seconds(std::min(10, seconds / 3)));
  std::map<std::string, uint64_t> warm = ResidentByMapping(daemon.pid());
  uint64_t warm_ops = ops.load();
  absl::SleepFor(absl::Seconds(seconds - std::min(10, seconds / 3)));
  std::map<std::string, uint64_t> end = ResidentByMapping(daemon.pid());
  stop = true;
  for (std::thread& t : threads) t.join();
  auto mib = [](uint64_t bytes) { return absl::StrCat(bytes >> 20, " MiB"); };
  std::cout << "soak: " << kConnections << " connections, " << ops.load() << " operations in "
            << seconds << " s (" << (ops.load() - warm_ops) / (seconds - std::min(10, seconds / 3))
            << "/s after warm-up), " << errors.load() << " errors; resident outside the region "
            << mib(Outside(warm)) << " after warm-up, " << mib(Outside(end))
            << " at the end; the region's " << mib(Region(warm)) << " -> " << mib(Region(end))
            << " (" << LargestGrowth(warm, end) << ")\n";
  EXPECT_EQ(errors.load(), 0u) << first_error;
  EXPECT_GT(ops.load(), 1000u);
  EXPECT_LT(Outside(end), Outside(warm) + (16u << 20))
      << "resident memory grew under a steady load: " << LargestGrowth(warm, end);
  auto check = Client::Connect(daemon.address());
  ASSERT_TRUE(check.ok());
  EXPECT_EQ(StatOf(**check, "heap.errors"), 0u);
}

}  // namespace
}  // namespace ardma
