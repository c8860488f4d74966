// The hash table service against a real server, in both modes — and, registered with TRANSPORTS
// cluster, against a 3-server cluster (core/testing/service_fixture.h).
#include <atomic>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/client/remote_context.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "core/testing/service_fixture.h"
#include "core/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/dht/dht_client.h"
#include "services/dht/dht_table.h"
#include "services/stable_hash.h"

namespace ardma::dht {
namespace {

// A server (or cluster), a first client and a DhtClient over it in mode().
template <typename Base>
class DhtFixture : public testing::ServiceFixture<Base> {
 protected:
  virtual Mode mode() const = 0;
  void SetUp() override { Start(testing::TestServerOptions()); }
  void Start(const ServerOptions& options) {
    this->StartServices(options);
    dht_ = std::make_unique<DhtClient>(this->servers(), mode());
  }
  uint64_t RoundTrips() { return testing::RoundTrips(*this->servers()); }
  // log2 of the table's bucket count, read straight from its header.
  int Log2Buckets(std::string_view table) {
    RemoteContext ctx(this->client_.get(), {});
    auto header = heap::GetRoot(ctx, absl::StrCat("dht:", ToAbsl(table)));
    EXPECT_TRUE(header.ok()) << header.status();
    auto geometry = ctx.ReadU64(*header + 16);
    EXPECT_TRUE(geometry.ok()) << geometry.status();
    return static_cast<int>((*geometry >> 48) & 63);
  }

  std::unique_ptr<DhtClient> dht_;
};

// Tests of one mode, run for each.
class DhtTest : public DhtFixture<::testing::TestWithParam<Mode>> {
 protected:
  Mode mode() const override { return GetParam(); }
};

// Tests that mix both modes themselves, run once.
class DhtMixedTest : public DhtFixture<::testing::Test> {
 protected:
  Mode mode() const override { return Mode::kActive; }
};

INSTANTIATE_TEST_SUITE_P(Modes, DhtTest, ::testing::Values(Mode::kActive, Mode::kRdma),
                         [](const auto& info) { return std::string(ModeName(info.param)); });

TEST_P(DhtTest, PutGetContainsRemoveSize) {
  EXPECT_EQ(*dht_->Put("t", "alice", "1"), true);
  EXPECT_EQ(*dht_->Put("t", "bob", "2"), true);
  EXPECT_EQ(*dht_->Put("t", "alice", "3"), false);  // replaced
  EXPECT_EQ(*dht_->Get("t", "alice"), "3");
  EXPECT_EQ(*dht_->Get("t", "bob"), "2");
  EXPECT_EQ(dht_->Get("t", "carol").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(*dht_->Contains("t", "bob"));
  EXPECT_FALSE(*dht_->Contains("t", "carol"));
  EXPECT_EQ(*dht_->Size("t"), 2u);
  EXPECT_TRUE(*dht_->Remove("t", "bob"));
  EXPECT_FALSE(*dht_->Remove("t", "bob"));
  EXPECT_EQ(dht_->Get("t", "bob").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*dht_->Size("t"), 1u);
  // Tables are independent.
  EXPECT_TRUE(*dht_->Put("u", "alice", "other"));
  EXPECT_EQ(*dht_->Get("t", "alice"), "3");
  EXPECT_EQ(*dht_->Get("u", "alice"), "other");
}

TEST_P(DhtTest, AReaderThatCachedAnEntrySeesEveryLaterWriteOfOthers) {
  // The reader (RDMA mode) reads a key from where it last found it, in one READ; a writer that
  // replaces or removes the entry retires it before it answers, so the reader never takes the
  // old entry for current. Each round: the reader caches the key, the writer (this test's mode)
  // changes it, the reader must see the change.
  std::unique_ptr<Servers> other = NewServers();
  DhtClient reader(other.get(), Mode::kRdma);
  ASSERT_TRUE(dht_->Put("c", "k", "v0").ok());
  for (int round = 1; round <= 6; ++round) {
    ASSERT_EQ(*reader.Get("c", "k"), absl::StrCat("v", round - 1));
    ASSERT_EQ(*reader.Get("c", "k"), absl::StrCat("v", round - 1));  // from its cache
    ASSERT_TRUE(dht_->Put("c", "k", absl::StrCat("v", round)).ok());
    EXPECT_EQ(*reader.Get("c", "k"), absl::StrCat("v", round)) << "round " << round;
  }
  ASSERT_TRUE(*reader.Contains("c", "k"));
  ASSERT_TRUE(*dht_->Remove("c", "k"));
  EXPECT_EQ(reader.Get("c", "k").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(*reader.Contains("c", "k"));
  // Back, with the value it had when the reader first cached it.
  ASSERT_TRUE(dht_->Put("c", "k", "v0").ok());
  EXPECT_EQ(*reader.Get("c", "k"), "v0");
}

TEST_P(DhtTest, CachedReadsNeverGoBackInTime) {
  // A writer (this test's mode) counts a key up; a caching RDMA-mode reader, concurrently, must
  // never read a value older than the last one whose write had been answered before its read.
  std::unique_ptr<Servers> other = NewServers();
  DhtClient reader(other.get(), Mode::kRdma);
  ASSERT_TRUE(dht_->Put("mono", "k", "0").ok());
  constexpr int kWrites = 300;
  std::atomic<int> answered{0};
  std::thread writer([&] {
    for (int i = 1; i <= kWrites; ++i) {
      ASSERT_TRUE(dht_->Put("mono", "k", absl::StrCat(i)).ok());
      answered.store(i, std::memory_order_release);
    }
  });
  int reads = 0, stale = 0;
  while (answered.load(std::memory_order_acquire) < kWrites) {
    int floor = answered.load(std::memory_order_acquire);
    absl::StatusOr<std::string> got = reader.Get("mono", "k");
    ASSERT_TRUE(got.ok()) << got.status();
    int value = std::stoi(*got);
    if (value < floor) ++stale;
    ++reads;
  }
  writer.join();
  EXPECT_EQ(stale, 0) << "of " << reads << " reads";
  EXPECT_EQ(*reader.Get("mono", "k"), absl::StrCat(kWrites));
}

TEST_P(DhtTest, TwoWritesOfTheSameValueAreDifferentEntries) {
  // A reader's cache names an entry by its checksum; if a later write of the same key and value
  // made the same bytes at the same address, a reader could take a write not yet published (or
  // never to be) for the one it cached. Every write's nonce makes its checksum its own.
  if (servers()->All()->size() > 1) {
    GTEST_SKIP() << "reads the first server; the key may be elsewhere";
  }
  RemoteContext ctx(client_.get(), {});
  ASSERT_TRUE(dht_->Put("n", "k", "same").ok());
  auto ref_of = [&]() -> EntryRef {
    auto header = heap::GetRoot(ctx, "dht:n");
    EXPECT_TRUE(header.ok()) << header.status();
    Target target{.name = "n", .header = *header};
    EntryRef ref;
    absl::StatusOr<Found> found = ReadKey(ctx, target, "k", nullptr, &ref);
    EXPECT_TRUE(found.ok() && found->present) << found.status();
    return ref;
  };
  EntryRef first = ref_of();
  std::set<uint64_t> checksums = {first.checksum};
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(dht_->Put("n", "k", "other").ok());
    ASSERT_TRUE(dht_->Put("n", "k", "same").ok());
    EntryRef again = ref_of();
    EXPECT_EQ(again.size, first.size);
    EXPECT_TRUE(checksums.insert(again.checksum).second) << "write " << i << " repeated a checksum";
  }
}

TEST_P(DhtTest, InsertOnlyWhenAbsentAndExactlyOneRacerWins) {
  EXPECT_EQ(*dht_->Insert("t", "k", "first"), std::nullopt);
  EXPECT_EQ(*dht_->Insert("t", "k", "second"), "first");  // left alone
  EXPECT_EQ(*dht_->Get("t", "k"), "first");
  EXPECT_EQ(*dht_->Size("t"), 1u);
  // Eight clients (both modes) insert the same 50 keys; each key is inserted exactly once and
  // everyone sees the winner's value.
  constexpr int kClients = 8, kKeys = 50;
  std::vector<std::unique_ptr<Servers>> clients;
  for (int c = 0; c < kClients; ++c) clients.push_back(NewServers());
  std::vector<std::vector<std::string>> seen(kClients);
  std::vector<int> wins(kClients, 0);
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      DhtClient dht(clients[c].get(), c % 2 == 0 ? Mode::kActive : Mode::kRdma);
      for (int k = 0; k < kKeys; ++k) {
        std::string mine = absl::StrCat("client", c);
        absl::StatusOr<std::optional<std::string>> r = dht.Insert("race", absl::StrCat(k), mine);
        ASSERT_TRUE(r.ok()) << r.status();
        if (!r->has_value()) ++wins[c];
        seen[c].push_back(r->has_value() ? **r : mine);
      }
    });
  }
  for (auto& t : threads) t.join();
  int total = 0;
  for (int w : wins) total += w;
  EXPECT_EQ(total, kKeys);
  for (int k = 0; k < kKeys; ++k) {
    std::string value = *dht_->Get("race", absl::StrCat(k));
    for (int c = 0; c < kClients; ++c) EXPECT_EQ(seen[c][k], value) << "key " << k;
  }
}

TEST_P(DhtTest, KeysAndValuesOfZeroOneAndOneMebibyte) {
  std::string mib(1 << 20, '\0');
  for (size_t i = 0; i < mib.size(); ++i) mib[i] = static_cast<char>(i * 31 + i / 4099);
  std::string mib2 = mib;
  mib2[12345] ^= 1;
  const std::vector<std::string> keys = {"", "k", mib, mib2};
  const std::vector<std::string> values = {"", "v", mib};
  for (size_t k = 0; k < keys.size(); ++k) {
    ASSERT_TRUE(dht_->Put("s", keys[k], values[k % values.size()]).ok()) << k;
  }
  for (size_t k = 0; k < keys.size(); ++k) {
    auto got = dht_->Get("s", keys[k]);
    ASSERT_TRUE(got.ok()) << k << " " << got.status();
    EXPECT_EQ(*got, values[k % values.size()]) << k;
  }
  EXPECT_EQ(*dht_->Size("s"), 4u);
  ASSERT_TRUE(dht_->Put("s", "", mib).ok());
  EXPECT_EQ(*dht_->Get("s", ""), mib);
}

TEST_P(DhtTest, Errors) {
  EXPECT_EQ(dht_->Put("", "k", "v").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dht_->Put(std::string(44, 't'), "k", "v").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(dht_->Put(std::string(43, 't'), "k", "v").ok());
  EXPECT_EQ(dht_->Put("t", std::string(kMaxKeyBytes + 1, 'k'), "v").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dht_->Put("t", "k", std::string(kMaxValueBytes + 1, 'v')).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dht_->Get("never", "k").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(dht_->Size("never").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(dht_->Remove("never", "k").status().code(), absl::StatusCode::kNotFound);
  auto raw = Invoke(*client_, GetParam(), active_libraries::dht(), "dht.get", "\x01\x02");
  EXPECT_EQ(raw.status().code(), absl::StatusCode::kInvalidArgument) << raw.status();
}

TEST_P(DhtTest, MatchesModelUnderRandomOperationsThroughSeveralResizes) {
  std::mt19937_64 rng(42);
  std::map<std::string, std::string> model;
  for (int step = 0; step < 4000; ++step) {
    std::string key = absl::StrCat("key-", rng() % 2500);
    int op = static_cast<int>(rng() % 10);
    if (op < 5) {
      std::string value = absl::StrCat("v", step, std::string(rng() % 64, 'x'));
      auto created = dht_->Put("m", key, value);
      ASSERT_TRUE(created.ok()) << created.status();
      EXPECT_EQ(*created, !model.contains(key)) << step;
      model[key] = value;
    } else if (op < 8) {
      auto got = dht_->Get("m", key);
      if (model.contains(key)) {
        ASSERT_TRUE(got.ok()) << step << " " << got.status();
        EXPECT_EQ(*got, model[key]) << step;
      } else {
        EXPECT_TRUE(absl::IsNotFound(got.status())) << step << " " << got.status();
      }
    } else {
      auto removed = dht_->Remove("m", key);
      ASSERT_TRUE(removed.ok()) << removed.status();
      EXPECT_EQ(*removed, model.erase(key) == 1) << step;
    }
  }
  EXPECT_EQ(*dht_->Size("m"), model.size());
  for (const auto& [k, v] : model) EXPECT_EQ(*dht_->Get("m", k), v);
  // Grew from 16 buckets at least four times (on one server; a third of the keys on each of three).
  EXPECT_GE(Log2Buckets("m"), testing::OnCluster() ? 4 + 2 : 4 + 4);
}

// Reads go without the client's id (CallOptions::idempotent): the server keeps no record of them
// for retries (a retried read just runs again); writes keep theirs.
TEST_F(DhtMixedTest, ReadsLeaveNoRetryRecordWritesDo) {
  if (servers()->All()->size() != 1) GTEST_SKIP() << "counts one server's records";
  auto entries = [&] {
    absl::StatusOr<std::vector<wire::StatsEntry>> stats = client_->Stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    for (const auto& [name, value] : stats.ok() ? *stats : std::vector<wire::StatsEntry>()) {
      if (name == "dedup.entries") return value;
    }
    ADD_FAILURE() << "no dedup.entries";
    return uint64_t{0};
  };
  ASSERT_TRUE(dht_->Put("dd", "k", "v").ok());
  const uint64_t before = entries();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(dht_->Get("dd", "k").ok());
    ASSERT_TRUE(*dht_->Contains("dd", "k"));
  }
  EXPECT_EQ(entries(), before);
  ASSERT_TRUE(dht_->Put("dd", "k", "w").ok());
  EXPECT_EQ(entries(), before + 1);
}

TEST_P(DhtTest, RoundTripsPerOperation) {
  // Ships the library, caches the geometry, and (on a cluster) makes the table on every server.
  for (int i = 0; i < 32; ++i) ASSERT_TRUE(dht_->Put("rt", absl::StrCat("warm", i), "up").ok());
  ASSERT_TRUE(dht_->Put("rt", "warm", "up").ok());
  const uint64_t server_count = servers()->All()->size();  // Size asks each once
  auto cost = [&](auto op) {
    uint64_t before = RoundTrips();
    op();
    return RoundTrips() - before;
  };
  uint64_t first_get = cost([&] { EXPECT_EQ(*dht_->Get("rt", "warm"), "up"); });
  uint64_t get = cost([&] { EXPECT_EQ(*dht_->Get("rt", "warm"), "up"); });
  uint64_t contains_found = cost([&] { EXPECT_TRUE(*dht_->Contains("rt", "warm")); });
  uint64_t miss = cost([&] { EXPECT_FALSE(dht_->Get("rt", "nope").ok()); });
  uint64_t put = cost([&] { EXPECT_TRUE(dht_->Put("rt", "k", "v").ok()); });
  uint64_t replace = cost([&] { EXPECT_TRUE(dht_->Put("rt", "k", "w").ok()); });
  uint64_t contains = cost([&] { EXPECT_TRUE(*dht_->Contains("rt", "k")); });
  uint64_t remove = cost([&] { EXPECT_TRUE(*dht_->Remove("rt", "k")); });
  uint64_t size = cost([&] { EXPECT_EQ(*dht_->Size("rt"), 33u); });
  if (GetParam() == Mode::kActive) {
    for (uint64_t c : {first_get, get, contains_found, miss, put, replace, contains, remove}) {
      EXPECT_EQ(c, 1u);
    }
    EXPECT_EQ(size, server_count);
  } else {
    EXPECT_EQ(first_get, 2u);  // neighbourhood, then entry
    EXPECT_EQ(get, 1u);        // the entry where it was found (dht::ReadCached)
    EXPECT_EQ(contains_found, 1u);
    EXPECT_LE(miss, 2u);  // neighbourhood (+ an entry on a fingerprint collision)
    EXPECT_EQ(contains, 2u);  // its entry was replaced by this client: not read from the cache
    EXPECT_EQ(size, server_count);
    // Writes lock, allocate, publish and free: reported, not a target.
    RecordProperty("rdma_put_round_trips", static_cast<int>(put));
    RecordProperty("rdma_replace_round_trips", static_cast<int>(replace));
    RecordProperty("rdma_remove_round_trips", static_cast<int>(remove));
    EXPECT_LE(put, 12u);
  }
}

TEST_P(DhtTest, OutOfMemoryLeavesTheTableUsable) {
  ServerOptions options = testing::TestServerOptions();
  options.memory_size = 4 << 20;
  Start(options);
  std::map<std::string, std::string> stored;
  absl::Status status;
  for (int i = 0; status.ok(); ++i) {
    std::string key = absl::StrCat("k", i), value(i % 7 == 0 ? 100000 : 2000, 'a' + i % 26);
    auto put = dht_->Put("oom", key, value);
    status = put.status();
    if (put.ok()) stored[key] = value;
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_GT(stored.size(), 100u);
  EXPECT_EQ(*dht_->Size("oom"), stored.size());
  for (const auto& [k, v] : stored) ASSERT_EQ(*dht_->Get("oom", k), v) << k;
  // Freeing makes room again.
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(*dht_->Remove("oom", absl::StrCat("k", i)));
  EXPECT_TRUE(dht_->Put("oom", "again", std::string(2000, 'z')).ok());
  EXPECT_EQ(*dht_->Get("oom", "again"), std::string(2000, 'z'));
}

// SCAN's guarantee: going through the table a few keys at a time while keys are put, removed
// and put back between the steps and the table grows several times, every key present for the
// whole scan comes (with its value), nothing that was never put does; a scan with nothing
// changing returns exactly the keys there are.
// SCAN's guarantee, checked on what a scan returned (`seen`): every key of `stable` (present for
// the whole scan) came, with its value; anything else that came is a key `written_meanwhile`.
template <typename WrittenMeanwhile>
void ExpectScanned(const std::map<std::string, std::string>& stable,
                   const std::map<std::string, std::string>& seen,
                   WrittenMeanwhile written_meanwhile) {
  for (const auto& [k, v] : stable) {
    auto it = seen.find(k);
    ASSERT_NE(it, seen.end()) << k << " was present throughout but not returned";
    EXPECT_EQ(it->second, v) << k;
  }
  for (const auto& [k, v] : seen) {
    EXPECT_TRUE(stable.contains(k) || written_meanwhile(k, v)) << "never put: " << k << "=" << v;
  }
}

TEST_P(DhtTest, ScanReturnsEveryKeyPresentThroughoutWhileTheTableGrows) {
  std::map<std::string, std::string> stable;
  for (int i = 0; i < 60; ++i) stable[absl::StrCat("stable-", i)] = absl::StrCat("value-", i);
  // And ten keys whose hashes share their low 12 bits: one home bucket up to 4096 buckets, so
  // some of them live in the bucket after it (its neighbourhood's second half).
  for (int i = 0; stable.size() < 70; ++i) {
    std::string key = absl::StrCat("crowded-", i);
    if ((StableHash(key, kKeyHashSeed) & 4095) == 42) stable[key] = absl::StrCat("crowd-", i);
  }
  for (const auto& [k, v] : stable) ASSERT_TRUE(dht_->Put("scan", k, v).ok()) << k;
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(dht_->Put("scan", absl::StrCat("volatile-", i), "v").ok());
  const int log2_before = Log2Buckets("scan");
  std::map<std::string, std::string> seen;
  uint64_t cursor = 0;
  int steps = 0, added = 0;
  do {
    absl::StatusOr<DhtClient::Page> page = dht_->Scan("scan", cursor, 3);
    ASSERT_TRUE(page.ok()) << page.status();
    for (auto& [k, v] : page->items) seen[k] = v;
    cursor = page->next;
    // Between steps: grow the table (over the first 30 steps), and take keys away and put them
    // back.
    for (int j = 0; j < 25 && steps < 30; ++j, ++added) {
      ASSERT_TRUE(dht_->Put("scan", absl::StrCat("new-", added), "n").ok());
    }
    std::string flip = absl::StrCat("volatile-", steps % 20);
    ASSERT_TRUE(dht_->Remove("scan", flip).ok());
    ASSERT_TRUE(dht_->Put("scan", flip, "v").ok());
    ASSERT_LT(++steps, 100000);
  } while (cursor != 0);
  EXPECT_GT(Log2Buckets("scan"), log2_before + 1) << "the table did not grow during the scan";
  ExpectScanned(stable, seen, [](const std::string& k, const std::string&) {
    return k.rfind("volatile-", 0) == 0 || k.rfind("new-", 0) == 0;
  });

  // Nothing changing: exactly the keys there are, each once.
  std::map<std::string, int> times;
  cursor = 0;
  do {
    absl::StatusOr<DhtClient::Page> page = dht_->Scan("scan", cursor, 50);
    ASSERT_TRUE(page.ok()) << page.status();
    for (auto& [k, v] : page->items) ++times[k];
    cursor = page->next;
  } while (cursor != 0);
  EXPECT_EQ(times.size(), *dht_->Size("scan"));
  EXPECT_EQ(times.size(), stable.size() + 20 + static_cast<size_t>(added));
  for (const auto& [k, n] : times) EXPECT_EQ(n, 1) << k;

  EXPECT_EQ(dht_->Scan("no-such-table", 0).status().code(), absl::StatusCode::kNotFound);
}

// The same guarantee with the writes racing the scan's own steps: another client grows the table
// (through at least two doublings) and removes and puts keys back while each step runs.
TEST_P(DhtTest, ScanReturnsEveryKeyPresentThroughoutWhileAnotherClientWrites) {
  std::map<std::string, std::string> stable;
  for (int i = 0; i < 80; ++i) stable[absl::StrCat("stable-", i)] = absl::StrCat("value-", i);
  for (const auto& [k, v] : stable) ASSERT_TRUE(dht_->Put("race", k, v).ok()) << k;
  const int log2_before = Log2Buckets("race");
  std::unique_ptr<Servers> other = this->NewServers();
  std::atomic<bool> stop{false};
  std::atomic<int> written{0};
  std::thread writer([&] {
    DhtClient dht(other.get(), GetParam() == Mode::kActive ? Mode::kRdma : Mode::kActive);
    for (int i = 0; !stop && i < 5000; ++i) {
      std::string key = absl::StrCat("new-", i);
      if (absl::Status s = dht.Put("race", key, "n").status(); !s.ok()) {
        ADD_FAILURE() << "put " << key << ": " << s;
        return;
      }
      if (i % 3 == 0 && !dht.Remove("race", absl::StrCat("new-", i / 2)).ok()) return;
      written = i + 1;
    }
  });
  // Start scanning once the writer runs, keep each step small, and let the writer get ahead by
  // ten writes before each next step: writes land inside steps and between them, and the table
  // doubles more than once before the scan ends.
  ASSERT_TRUE(testing::WaitUntil([&] { return written > 0; }, absl::Seconds(30)));
  std::map<std::string, std::string> seen;
  uint64_t cursor = 0;
  int steps = 0;
  do {
    absl::StatusOr<DhtClient::Page> page = dht_->Scan("race", cursor, 2);
    ASSERT_TRUE(page.ok()) << page.status();
    for (auto& [k, v] : page->items) seen[k] = v;
    cursor = page->next;
    ASSERT_LT(++steps, 1000000);
    const int before = written;
    testing::WaitUntil([&] { return written >= before + 10 || written == 5000; },
                       absl::Seconds(10));
  } while (cursor != 0);
  const int writes_during_scan = written;
  stop = true;
  writer.join();
  EXPECT_GT(writes_during_scan, 100) << "the writer hardly ran during the scan";
  EXPECT_GT(Log2Buckets("race"), log2_before + 1) << "the table did not grow during the scan";
  ExpectScanned(stable, seen, [](const std::string& k, const std::string& v) {
    return k.rfind("new-", 0) == 0 && v == "n";
  });
}

// A value that names its key and version and repeats a pattern, so a reader can tell a torn or
// mixed-up value from one a writer put.
std::string VersionedValue(const std::string& key, uint64_t version, size_t size) {
  std::string v = absl::StrCat(key, "#", version, "#");
  while (v.size() < size) v.push_back(static_cast<char>('a' + (version + v.size()) % 26));
  return v;
}
bool IsVersionedValue(const std::string& key, const std::string& v) {
  size_t first = v.find('#'), second = v.find('#', first + 1);
  if (first == std::string::npos || second == std::string::npos) return false;
  if (v.substr(0, first) != key) return false;
  uint64_t version = std::stoull(v.substr(first + 1, second - first - 1));
  return v == VersionedValue(key, version, v.size());
}

// Clients in both modes at once: writers with their own keys (checked against their own models
// at the end), writers fighting over shared keys, and readers that must only ever see whole
// values, while the table grows.
TEST_F(DhtMixedTest, ConcurrentClientsInBothModesStayCorrect) {
  constexpr int kWriters = 4, kOps = 400;
  std::vector<std::unique_ptr<Servers>> clients;
  for (int i = 0; i < kWriters + 2; ++i) clients.push_back(NewServers());
  std::vector<std::map<std::string, std::string>> models(kWriters);
  std::atomic<bool> stop{false}, failed{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      DhtClient dht(clients[w].get(), w % 2 ? Mode::kActive : Mode::kRdma);
      std::mt19937_64 rng(w);
      for (int i = 0; i < kOps && !failed; ++i) {
        std::string own = absl::StrCat("w", w, "-", rng() % 200);
        std::string shared = absl::StrCat("shared-", rng() % 8);
        size_t size = rng() % 4 == 0 ? 20000 : 40;  // some entries take the long read path
        if (rng() % 4 == 0) {
          if (absl::Status s = dht.Remove("c", own).status(); !s.ok()) {
            ADD_FAILURE() << "remove " << own << ": " << s;
            failed = true;
          }
          models[w].erase(own);
        } else {
          std::string v = VersionedValue(own, i, size);
          if (absl::Status s = dht.Put("c", own, v).status(); !s.ok()) {
            ADD_FAILURE() << "put " << own << ": " << s;
            failed = true;
          }
          models[w][own] = v;
        }
        if (absl::Status s = dht.Put("c", shared, VersionedValue(shared, i, size)).status();
            !s.ok()) {
          ADD_FAILURE() << "put " << shared << ": " << s;
          failed = true;
        }
      }
    });
  }
  std::atomic<int> reads{0};
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      DhtClient dht(clients[kWriters + r].get(), r == 0 ? Mode::kRdma : Mode::kActive);
      std::mt19937_64 rng(100 + r);
      while (!stop && !failed) {
        std::string key = absl::StrCat("shared-", rng() % 8);
        auto got = dht.Get("c", key);
        if (got.ok()) {
          if (!IsVersionedValue(key, *got)) {
            ADD_FAILURE() << "torn value for " << key;
            failed = true;
          }
          ++reads;
        } else if (!absl::IsNotFound(got.status())) {
          ADD_FAILURE() << got.status();
          failed = true;
        }
      }
    });
  }
  for (int w = 0; w < kWriters; ++w) threads[w].join();
  stop = true;
  for (size_t t = kWriters; t < threads.size(); ++t) threads[t].join();
  ASSERT_FALSE(failed);
  EXPECT_GT(reads.load(), 0);
  size_t expected_size = 8;
  for (int w = 0; w < kWriters; ++w) {
    expected_size += models[w].size();
    for (const auto& [k, v] : models[w]) ASSERT_EQ(*dht_->Get("c", k), v) << k;
  }
  EXPECT_EQ(*dht_->Size("c"), expected_size);
  EXPECT_GT(Log2Buckets("c"), 4);
}

}  // namespace
}  // namespace ardma::dht
