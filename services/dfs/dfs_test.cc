// The file system against a real server in both modes: a model test against a local directory,
// sizes around block boundaries and 64 MiB, a 100,000-entry directory, deep renames, round
// trips, running out of memory, concurrent namespace changes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/testing/service_fixture.h"
#include "core/testing/wait_until.h"
#include "core/wire/byte_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/dfs/dfs_client.h"

namespace ardma::dfs {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

ServerOptions BigServer() {
  ServerOptions o = testing::TestServerOptions();
  o.memory_size = 512ull << 20;
  return o;
}

// Over one server, or (TRANSPORTS cluster) one file system across a cluster of three: the
// namespace on one member, each file's bytes on the member its data slot names.
class DfsTest : public testing::ServiceFixture<::testing::TestWithParam<Mode>> {
 protected:
  void SetUp() override {
    if (testing::OnCluster() && GetParam() == Mode::kRdma) {
      GTEST_SKIP() << "RDMA mode runs the file system on one server";
    }
    Start(BigServer());
  }
  void Start(const ServerOptions& options) {
    StartServices(options);
    fs_ = std::make_unique<DfsClient>(servers(), GetParam());
  }
  uint64_t RoundTrips() { return testing::RoundTrips(*servers()); }
  std::shared_ptr<const cluster::SlotMap> cluster_map() {
    return static_cast<cluster::Cluster*>(servers())->map();
  }
  std::vector<std::string> Names(std::string_view dir) {
    absl::StatusOr<std::vector<DirEntry>> list = fs_->ListDir(dir);
    EXPECT_TRUE(list.ok()) << list.status();
    std::vector<std::string> names;
    if (list.ok()) {
      for (const DirEntry& e : *list) names.push_back(e.name);
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  std::unique_ptr<DfsClient> fs_;
};

INSTANTIATE_TEST_SUITE_P(Modes, DfsTest, ::testing::Values(Mode::kActive, Mode::kRdma),
                         [](const auto& info) { return std::string(ModeName(info.param)); });

TEST_P(DfsTest, NamespaceAndDataBasics) {
  ASSERT_TRUE(fs_->Mkdir("/a").ok());
  absl::StatusOr<Stat> f = fs_->Create("/a/f", 0600);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->type, FileType::kFile);
  EXPECT_EQ(f->mode, 0600u);
  EXPECT_EQ(*fs_->Write("/a/f", 0, "hello"), 5u);
  EXPECT_EQ(*fs_->Read("/a/f", 0, 100), "hello");
  EXPECT_EQ(*fs_->Read("/a/./f", 1, 3), "ell");
  EXPECT_EQ(*fs_->Read("/a/../a//f", 4, 10), "o");
  EXPECT_EQ(*fs_->GetLen("/a/f"), 5u);
  absl::StatusOr<Stat> a = fs_->Lookup("/a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->type, FileType::kDirectory);
  EXPECT_EQ(a->size, 1u);
  EXPECT_GE(fs_->Lookup("/a/f")->mtime, f->mtime);
  EXPECT_THAT(Names("/"), ElementsAre("a"));
  EXPECT_THAT(Names("/a"), ElementsAre("f"));
  ASSERT_TRUE(fs_->Rename("/a/f", "/a/g").ok());
  EXPECT_THAT(Names("/a"), ElementsAre("g"));
  EXPECT_EQ(*fs_->Read("/a/g", 0, 5), "hello");
  // Errors.
  EXPECT_EQ(fs_->Lookup("/a/f").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(fs_->Mkdir("/a").status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(fs_->Create("/a/g").status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(fs_->Create("/a/g", 0644, /*exclusive=*/false).ok());
  EXPECT_EQ(fs_->Rmdir("/a").code(), absl::StatusCode::kFailedPrecondition);    // not empty
  EXPECT_EQ(fs_->Unlink("/a").code(), absl::StatusCode::kFailedPrecondition);   // a directory
  EXPECT_EQ(fs_->Rmdir("/a/g").code(), absl::StatusCode::kFailedPrecondition);  // not one
  EXPECT_EQ(fs_->Create("/a/g/x").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs_->Read("/a", 0, 1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs_->ReadDir("/a/g").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs_->Mkdir("relative").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fs_->Mkdir("/" + std::string(256, 'n')).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(fs_->Mkdir("/" + std::string(255, 'n')).ok());
  EXPECT_EQ(fs_->Rename("/a", "/a/sub").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fs_->Read("/a/g", 0, kMaxIoBytes + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(fs_->Unlink("/a/g").ok());
  ASSERT_TRUE(fs_->Rmdir("/a").ok());
  EXPECT_THAT(Names("/"), ElementsAre(std::string(255, 'n')));
  // Another file system on the same server is separate.
  DfsClient other(servers(), GetParam(), "other");
  EXPECT_THAT(*other.ListDir("/"), ::testing::IsEmpty());
}

TEST_P(DfsTest, SizesAroundBlocksHolesTruncateAndCopy) {
  for (uint64_t size : {uint64_t{0}, uint64_t{1}, kBlockSize, kBlockSize + 1}) {
    std::string path = absl::StrCat("/f", size);
    std::string data(size, '\0');
    for (uint64_t i = 0; i < size; ++i) data[i] = static_cast<char>('a' + i % 26);
    ASSERT_TRUE(fs_->WriteFile(path, data).ok());
    EXPECT_EQ(*fs_->ReadFile(path), data) << size;
    EXPECT_EQ(*fs_->GetLen(path), size);
  }
  // A hole reads as zeros; shrinking then growing does not bring old bytes back.
  ASSERT_TRUE(fs_->Create("/sparse").ok());
  ASSERT_TRUE(fs_->Write("/sparse", 3 * kBlockSize + 10, "tail").ok());
  std::string expect(3 * kBlockSize + 14, '\0');
  expect.replace(3 * kBlockSize + 10, 4, "tail");
  EXPECT_EQ(*fs_->ReadFile("/sparse"), expect);
  ASSERT_TRUE(fs_->SetBlock("/sparse", 0, std::string(kBlockSize, 'x')).ok());
  EXPECT_EQ(*fs_->GetBlock("/sparse", 0), std::string(kBlockSize, 'x'));
  ASSERT_TRUE(fs_->Truncate("/sparse", 100).ok());
  ASSERT_TRUE(fs_->Truncate("/sparse", 200).ok());
  EXPECT_EQ(*fs_->ReadFile("/sparse"), std::string(100, 'x') + std::string(100, '\0'));
  // Copy on the server: the copy is independent, and overwrites an existing file.
  const std::string one_past = absl::StrCat("/f", kBlockSize + 1);
  ASSERT_TRUE(fs_->Copy(one_past, "/copy").ok());
  ASSERT_TRUE(fs_->Write(one_past, 0, "CHANGED").ok());
  EXPECT_EQ(fs_->ReadFile("/copy")->substr(0, 7), "abcdefg");
  EXPECT_EQ(*fs_->GetLen("/copy"), kBlockSize + 1);
  ASSERT_TRUE(fs_->Copy("/f1", "/copy").ok());
  EXPECT_EQ(*fs_->ReadFile("/copy"), "a");
  ASSERT_TRUE(fs_->Mkdir("/dir").ok());
  EXPECT_EQ(fs_->Copy("/f1", "/dir").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs_->Copy("/dir", "/x").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs_->Copy("/nope", "/x").status().code(), absl::StatusCode::kNotFound);
}

TEST_P(DfsTest, FileHandlesFollowTheFileAndSkipPathResolution) {
  ASSERT_TRUE(fs_->Mkdir("/d").ok());
  ASSERT_TRUE(fs_->WriteFile("/d/f", "0123456789").ok());
  absl::StatusOr<FileHandle> h = fs_->Open("/d/f");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(fs_->Open("/d").status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(fs_->Rename("/d", "/e").ok());  // the handle follows the file
  EXPECT_EQ(*fs_->ReadAt(*h, 2, 3), "234");
  EXPECT_EQ(*fs_->WriteAt(*h, 2 * kBlockSize, "end"), 2 * kBlockSize + 3);
  EXPECT_EQ(fs_->ReadFile("/e/f")->substr(2 * kBlockSize), "end");
  uint64_t before = RoundTrips();
  ASSERT_TRUE(fs_->ReadAt(*h, 0, 100).ok());
  uint64_t rts = RoundTrips() - before;
  EXPECT_EQ(rts, GetParam() == Mode::kActive ? 1u : 4u);  // inode, table, data, check
  ASSERT_TRUE(fs_->Unlink("/e/f").ok());
  EXPECT_EQ(fs_->ReadAt(*h, 0, 1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(fs_->WriteAt(*h, 0, "x").status().code(), absl::StatusCode::kNotFound);
}

TEST_P(DfsTest, SixtyFourMebibyteFile) {
  std::string data(64u << 20, '\0');
  std::mt19937_64 rng(7);
  for (size_t i = 0; i < data.size(); i += 8) {
    uint64_t v = rng();
    std::memcpy(data.data() + i, &v, 8);
  }
  ASSERT_TRUE(fs_->WriteFile("/big", data).ok());
  EXPECT_EQ(*fs_->GetLen("/big"), data.size());
  absl::StatusOr<std::string> back = fs_->ReadFile("/big");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == data);
  absl::StatusOr<Usage> u = fs_->GetUsage();
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->data_blocks, (data.size() + kBlockSize - 1) / kBlockSize);
  ASSERT_TRUE(fs_->Unlink("/big").ok());
  EXPECT_EQ(fs_->GetUsage()->data_blocks, 0u);
}

// On a cluster a file's bytes live on the member its data slot names, so a tree larger than any
// one member's memory fits: 150 MiB on three members of 64 MiB, each holding about a third.
TEST_P(DfsTest, OnAClusterATreeLargerThanAnyMemberFitsEachMemberHoldingAThird) {
  if (!testing::OnCluster()) GTEST_SKIP() << "a cluster's members share the bytes";
  ServerOptions member = testing::TestServerOptions();
  member.memory_size = 64u << 20;
  Start(member);
  constexpr int kFiles = 1200;
  constexpr size_t kFileBytes = 128 << 10;  // 1,200 x 128 KiB = 150 MiB: two whole blocks each
  auto content = [](int i) {
    std::string data(kFileBytes, '\0');
    std::mt19937_64 rng(i);
    for (size_t k = 0; k < data.size(); k += 8) {
      uint64_t v = rng();
      std::memcpy(data.data() + k, &v, 8);
    }
    return data;
  };
  for (int d = 0; d < 15; ++d) ASSERT_TRUE(fs_->Mkdir(absl::StrCat("/d", d)).ok());
  for (int i = 0; i < kFiles; ++i) {
    absl::Status s = fs_->WriteFile(absl::StrCat("/d", i % 15, "/f", i), content(i));
    ASSERT_TRUE(s.ok()) << i << ": " << s;
  }
  for (int i = 0; i < kFiles; i += 7) {
    absl::StatusOr<std::string> back = fs_->ReadFile(absl::StrCat("/d", i % 15, "/f", i));
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_TRUE(*back == content(i)) << i;
  }
  // Each member's share of the data blocks: within 25% of a third.
  std::string args;
  wire::ByteWriter(&args).Str16("default");
  uint64_t total = 0;
  std::vector<uint64_t> blocks;
  for (std::unique_ptr<Client>& member : cluster_->ClientOfEachServer()) {
    ASSERT_NE(member, nullptr);
    absl::StatusOr<std::string> counts =
        Invoke(*member, Mode::kActive, active_libraries::dfs(), "dfs.cusage", args);
    ASSERT_TRUE(counts.ok()) << counts.status();
    uint64_t files = 0, b = 0;
    wire::ByteReader r(*counts);
    ASSERT_TRUE(r.U64(&files) && r.U64(&b));
    blocks.push_back(b);
    total += b;
  }
  EXPECT_EQ(total, uint64_t{kFiles} * 2);
  std::cout << "blocks per member:";
  for (uint64_t b : blocks) std::cout << " " << b;
  std::cout << " of " << total << "\n";
  for (uint64_t b : blocks) {
    EXPECT_GE(b * 4, total) << "under 75% of a third";  // b >= 0.75 * total / 3
    EXPECT_LE(b * 12, total * 5) << "over 125% of a third";
  }
  EXPECT_EQ(fs_->GetUsage()->data_blocks, total);
}

// A member that holds a removed file's bytes is down: the removal still succeeds (the namespace is
// whole), the contents are recorded as an orphan, and a later removal frees them once the member
// is back. Files on the other members keep working meanwhile; one on the member that is down
// fails with UNAVAILABLE naming it, and works again once it is back.
TEST_P(DfsTest, OnAClusterAnUnlinkWhileTheBytesMemberIsDownIsRecordedAndFinishedLater) {
  if (!testing::OnCluster()) GTEST_SKIP() << "a cluster's members hold the bytes";
  ASSERT_TRUE(fs_->Mkdir("/d").ok());
  // Files until one has its bytes on a member other than the namespace's.
  const std::string ns = cluster_map()->Owner(NamespaceSlot("default"));
  std::string victim, elsewhere, down;
  for (int i = 0; i < 100 && (victim.empty() || elsewhere.empty()); ++i) {
    std::string path = absl::StrCat("/d/f", i);
    ASSERT_TRUE(fs_->WriteFile(path, "contents").ok());
    std::string holder = cluster_map()->Owner(DataSlot("default", fs_->Lookup(path)->ino));
    if (holder == ns) continue;
    if (down.empty()) down = holder;
    if (holder == down && victim.empty()) victim = path;
    if (holder != down && elsewhere.empty()) elsewhere = path;
  }
  ASSERT_FALSE(victim.empty());
  ASSERT_FALSE(elsewhere.empty());
  ASSERT_TRUE(fs_->WriteFile("/d/again", "on the namespace's member or another").ok());
  const int down_index = testing::ClusterFixture::IndexOf(down);
  cluster_->server(down_index).server().Stop();

  absl::StatusOr<std::string> unreachable = fs_->ReadFile(victim);
  EXPECT_EQ(unreachable.status().code(), absl::StatusCode::kUnavailable) << unreachable.status();
  EXPECT_EQ(*fs_->ReadFile(elsewhere), "contents");
  ASSERT_TRUE(fs_->Unlink(victim).ok());  // the namespace changes; the bytes wait
  EXPECT_EQ(fs_->Lookup(victim).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(fs_->GetUsage().status().code(), absl::StatusCode::kUnavailable);  // (counts need all)
  // The namespace's member has recorded the orphan.
  auto orphans_recorded = [&]() -> uint64_t {
    std::string args;
    wire::ByteWriter(&args).Str16("default");
    absl::StatusOr<Client*> ns_client = servers()->ForSlot(NamespaceSlot("default"));
    EXPECT_TRUE(ns_client.ok());
    absl::StatusOr<std::string> usage =
        Invoke(**ns_client, Mode::kActive, active_libraries::dfs(), "dfs.usage", args);
    EXPECT_TRUE(usage.ok()) << usage.status();
    uint64_t orphans = 0;
    if (usage.ok() && usage->size() == 48) std::memcpy(&orphans, usage->data() + 40, 8);
    return orphans;
  };
  EXPECT_EQ(orphans_recorded(), 1u);

  ASSERT_TRUE(cluster_->Restart(down_index).ok());
  // A later removal (at most one sweep a second) frees what the member held.
  int n = 0;
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        std::string path = absl::StrCat("/d/later", n++);
        if (!fs_->WriteFile(path, "x").ok() || !fs_->Unlink(path).ok()) return false;
        absl::StatusOr<Usage> u = fs_->GetUsage();
        return u.ok() && u->orphans == 0;
      },
      absl::Seconds(20)));
  EXPECT_EQ(orphans_recorded(), 0u);
  EXPECT_EQ(*fs_->ReadFile(elsewhere), "contents");
}

TEST_P(DfsTest, LargeDirectoryIsListedCompletelyInPages) {
  // 100,000 entries in active mode; the RDMA mode pays ~20 round trips a create, so fewer.
  const int n = GetParam() == Mode::kActive ? 100000 : 2000;
  ASSERT_TRUE(fs_->Mkdir("/big").ok());
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(fs_->Create(absl::StrCat("/big/file", i)).ok()) << i;
  }
  std::set<std::string> seen;
  uint64_t cursor = 0;
  int pages = 0;
  for (;;) {
    absl::StatusOr<DirPage> page = fs_->ReadDir("/big", cursor, 1000);
    ASSERT_TRUE(page.ok()) << page.status();
    ++pages;
    for (const DirEntry& e : page->entries) EXPECT_TRUE(seen.insert(e.name).second) << e.name;
    if (page->done) break;
    cursor = page->next;
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(n));
  EXPECT_EQ(pages, (n + 999) / 1000);
  EXPECT_EQ(fs_->Lookup("/big")->size, static_cast<uint64_t>(n));
}

TEST_P(DfsTest, RenamingADirectoryMovesItsWholeSubtree) {
  std::string path = "/d";
  ASSERT_TRUE(fs_->Mkdir(path).ok());
  for (int depth = 0; depth < 10; ++depth) {
    path += absl::StrCat("/", depth);
    ASSERT_TRUE(fs_->Mkdir(path).ok());
    ASSERT_TRUE(fs_->WriteFile(path + "/file", absl::StrCat("depth ", depth)).ok());
  }
  ASSERT_TRUE(fs_->Mkdir("/elsewhere").ok());
  ASSERT_TRUE(fs_->Rename("/d", "/elsewhere/e").ok());
  EXPECT_EQ(fs_->Lookup("/d").status().code(), absl::StatusCode::kNotFound);
  std::string moved = "/elsewhere/e";
  for (int depth = 0; depth < 10; ++depth) {
    moved += absl::StrCat("/", depth);
    EXPECT_EQ(*fs_->ReadFile(moved + "/file"), absl::StrCat("depth ", depth));
  }
  // find walks it, itself first, depth first; in pages of any size.
  std::vector<std::string> all;
  std::string cursor;
  for (;;) {
    absl::StatusOr<FindPage> page = fs_->Find("/elsewhere", cursor, 3);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const FoundEntry& e : page->entries) all.push_back(e.path);
    if (page->done) break;
    cursor = page->next;
  }
  EXPECT_EQ(all.size(), 2u + 10 * 2);
  EXPECT_EQ(all[0], "/elsewhere");
  EXPECT_EQ(all[1], "/elsewhere/e");
  // Moving a directory into its own subtree is refused.
  EXPECT_EQ(fs_->Rename("/elsewhere", "/elsewhere/e/0/x").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(DfsTest, RoundTripsPerOperation) {
  ASSERT_TRUE(fs_->Mkdir("/warm").ok());  // ships the code, creates the file system
  ASSERT_TRUE(fs_->Create("/warm/f").ok());
  std::vector<std::pair<std::string, std::function<absl::Status()>>> ops = {
      {"mkdir", [&] { return fs_->Mkdir("/warm/d").status(); }},
      {"create", [&] { return fs_->Create("/warm/d/f").status(); }},
      {"lookup", [&] { return fs_->Lookup("/warm/d/f").status(); }},
      {"open", [&] { return fs_->Open("/warm/d/f").status(); }},
      {"write", [&] { return fs_->Write("/warm/d/f", 0, std::string(100000, 'w')).status(); }},
      {"read", [&] { return fs_->Read("/warm/d/f", 10, 70000).status(); }},
      {"truncate", [&] { return fs_->Truncate("/warm/d/f", 10); }},
      {"readdir", [&] { return fs_->ReadDir("/warm").status(); }},
      {"copy", [&] { return fs_->Copy("/warm/d/f", "/warm/d/g").status(); }},
      {"rename", [&] { return fs_->Rename("/warm/d/g", "/warm/g"); }},
      {"find", [&] { return fs_->Find("/warm").status(); }},
      {"unlink", [&] { return fs_->Unlink("/warm/g"); }},
      {"usage", [&] { return fs_->GetUsage().status(); }},
      {"symlink", [&] { return fs_->Symlink("d/f", "/warm/l").status(); }},
      {"readlink", [&] { return fs_->Readlink("/warm/l").status(); }},
      {"rmdir",
       [&] { return fs_->Unlink("/warm/d/f").ok() ? fs_->Rmdir("/warm/d") : absl::OkStatus(); }},
  };
  for (auto& [name, op] : ops) {
    uint64_t before = RoundTrips();
    absl::Status s = op();
    ASSERT_TRUE(s.ok()) << name << ": " << s;
    uint64_t rts = RoundTrips() - before;
    if (GetParam() == Mode::kActive) {
      // rmdir's row also unlinks; on a cluster usage adds each member's count of blocks.
      uint64_t want = name == "rmdir" ? 2 : name == "usage" && testing::OnCluster() ? 4 : 1;
      EXPECT_EQ(rts, want) << name;
    } else {
      EXPECT_GE(rts, 2u) << name;
      std::cout << "rdma round trips: " << name << " " << rts << "\n";
    }
  }
}

// A small file's only block is compact; a write past the next block boundary leaves it as the
// block the old end falls in, which must then hold file bytes to its end (zeros) before anything
// reads or writes there. (Found through the FUSE mount's model test: it read past the block.)
TEST_P(DfsTest, WritingPastACompactLastBlockWidensIt) {
  std::string model;
  auto write = [&](uint64_t off, size_t len, char c) {
    std::string data(len, c);
    ASSERT_TRUE(fs_->Write("/f", off, data).ok());
    if (model.size() < off + len) model.resize(off + len, '\0');
    model.replace(off, len, data);
  };
  ASSERT_TRUE(fs_->Create("/f").ok());
  write(0, 2745, 'a');
  write(9298, 2658, 'b');     // compact block 0 holds 11,956 bytes
  write(88635, 1821, 'c');    // block 1: block 0 now holds bytes up to 65,536
  write(12206, 205172, 'd');  // across blocks 0 to 3
  write(47769, 90, 'e');
  EXPECT_EQ(*fs_->ReadFile("/f"), model);
  // The same through truncate: growing past a compact block's end reads zeros.
  ASSERT_TRUE(fs_->WriteFile("/g", std::string(100, 'x')).ok());
  ASSERT_TRUE(fs_->Truncate("/g", 70000).ok());
  std::string g = *fs_->ReadFile("/g");
  EXPECT_EQ(g, std::string(100, 'x') + std::string(69900, '\0'));
}

// A table size read from the heap is checked before anything is sized from it: a corrupted inode
// fails its requests, it does not make the server allocate terabytes (issue 22).
TEST_P(DfsTest, ACorruptedTableSizeFailsCleanly) {
  ARDMA_SKIP_ON_CLUSTER("the test corrupts a file's block table, which a cluster keeps elsewhere");
  ASSERT_TRUE(fs_->WriteFile("/f", std::string(200000, 'x')).ok());
  absl::StatusOr<Stat> st = fs_->Lookup("/f");
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(client_->Write(st->ino + kInCapacity, std::string("\0\0\0\0\0\x10\0\0", 8)).ok());
  ASSERT_TRUE(client_->Write(st->ino + kInSize, std::string("\0\0\0\0\0\x10\0\0", 8)).ok());
  // Removing the file reads its whole table (to free the blocks).
  absl::Status s = fs_->Unlink("/f");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(client_->Ping().ok());
  EXPECT_TRUE(fs_->WriteFile("/g", "still serving").ok());
}

TEST_P(DfsTest, SymbolicLinksAreFollowedAsTheKernelFollowsThemAndCopiedAsLinks) {
  ASSERT_TRUE(fs_->Mkdir("/d").ok());
  ASSERT_TRUE(fs_->WriteFile("/d/f", "data").ok());
  absl::StatusOr<Stat> l = fs_->Symlink("f", "/d/l");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->type, FileType::kSymlink);
  EXPECT_EQ(l->size, 1u);  // the target's length, as lstat(2)
  EXPECT_EQ(*fs_->Readlink("/d/l"), "f");
  EXPECT_EQ(fs_->Lookup("/d/l")->type, FileType::kSymlink);
  ASSERT_TRUE(fs_->Symlink("/d", "/up").ok());
  ASSERT_TRUE(fs_->Symlink("nowhere", "/d/dangling").ok());  // dangling links are fine
  ASSERT_TRUE(fs_->Symlink("loop2", "/loop1").ok());
  ASSERT_TRUE(fs_->Symlink("loop1", "/loop2").ok());
  // Errors: an existing name, an empty target, readlink of a file.
  EXPECT_TRUE(absl::IsAlreadyExists(fs_->Symlink("x", "/d/f").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(fs_->Symlink("", "/d/e").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(fs_->Readlink("/d/f").status()));
  // Data operations, open and stat follow a link at the end; lstat and rmdir do not.
  EXPECT_EQ(*fs_->Read("/d/l", 0, 10), "data");
  EXPECT_EQ(*fs_->Write("/d/l", 4, "!"), 5u);  // writes through the link
  EXPECT_EQ(*fs_->ReadFile("/d/f"), "data!");
  ASSERT_TRUE(fs_->Truncate("/d/l", 4).ok());
  EXPECT_EQ(fs_->Open("/d/l")->ino, fs_->Lookup("/d/f")->ino);
  EXPECT_EQ(fs_->LookupFollowing("/d/l")->type, FileType::kFile);
  EXPECT_EQ(fs_->LookupFollowing("/up")->type, FileType::kDirectory);
  EXPECT_EQ(fs_->Lookup("/up")->type, FileType::kSymlink);
  EXPECT_EQ(fs_->Lookup("/up/")->type, FileType::kDirectory);  // a trailing slash follows it
  EXPECT_TRUE(absl::IsFailedPrecondition(fs_->Lookup("/d/l/").status()));  // not a directory
  EXPECT_TRUE(absl::IsFailedPrecondition(fs_->Lookup("/d/f/").status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(fs_->Rmdir("/up")));  // not a directory
  EXPECT_TRUE(absl::IsNotFound(fs_->LookupFollowing("/d/dangling").status()));
  EXPECT_TRUE(absl::IsNotFound(fs_->Read("/d/dangling", 0, 1).status()));
  absl::StatusOr<Stat> looped = fs_->LookupFollowing("/loop1");
  EXPECT_TRUE(absl::IsFailedPrecondition(looped.status())) << looped.status();
  EXPECT_THAT(std::string(looped.status().message()), ::testing::HasSubstr("too many levels"));
  EXPECT_EQ(fs_->Lookup("/loop1")->type, FileType::kSymlink);
  // Links before the last component are always followed: /up/f is /d/f, /up/l is /d/l, and ..
  // after a link is the target's parent, as the kernel's.
  EXPECT_EQ(fs_->Lookup("/up/f")->ino, fs_->Lookup("/d/f")->ino);
  EXPECT_EQ(fs_->Lookup("/up/l")->type, FileType::kSymlink);
  EXPECT_EQ(*fs_->ReadFile("/up/l"), "data");
  // A target longer than a short string (failed before: its components were read after it died).
  ASSERT_TRUE(fs_->Symlink("/d/./../d/./../d/f", "/long").ok());
  EXPECT_EQ(*fs_->ReadFile("/long"), "data");
  ASSERT_TRUE(fs_->Unlink("/long").ok());
  ASSERT_TRUE(fs_->Mkdir("/d/sub").ok());
  ASSERT_TRUE(fs_->Symlink("../d/sub", "/d/sublink").ok());  // relative to /d
  EXPECT_EQ(fs_->Lookup("/up/sublink/../f")->ino, fs_->Lookup("/d/f")->ino);
  ASSERT_TRUE(fs_->WriteFile("/up/sublink/new", "x").ok());  // created in /d/sub
  EXPECT_EQ(fs_->ListDir("/up/sublink")->size(), 1u);
  ASSERT_TRUE(fs_->Unlink("/d/sub/new").ok());
  ASSERT_TRUE(fs_->Unlink("/d/sublink").ok());
  ASSERT_TRUE(fs_->Rmdir("/d/sub").ok());
  EXPECT_TRUE(absl::IsNotFound(fs_->Lookup("/d/dangling/x").status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(fs_->Lookup("/d/l/x").status()));  // not a directory
  EXPECT_TRUE(absl::IsFailedPrecondition(fs_->Lookup("/loop1/x").status()));
  // The client resolves links as the kernel does.
  EXPECT_EQ(*fs_->FollowLinks("/up/l"), "/d/f");
  EXPECT_EQ(*fs_->FollowLinks("/up/l", /*follow_last=*/false), "/d/l");
  EXPECT_EQ(*fs_->FollowLinks("/up/../up/./l"), "/d/f");
  EXPECT_EQ(*fs_->FollowLinks("/d/dangling", false), "/d/dangling");
  EXPECT_TRUE(absl::IsNotFound(fs_->FollowLinks("/d/dangling").status()));
  absl::StatusOr<std::string> loop = fs_->FollowLinks("/loop1");
  EXPECT_TRUE(absl::IsFailedPrecondition(loop.status())) << loop.status();
  EXPECT_THAT(std::string(loop.status().message()), ::testing::HasSubstr("too many levels"));
  // Listings name the type; find walks links without following them.
  absl::StatusOr<std::vector<DirEntry>> list = fs_->ListDir("/d");
  ASSERT_TRUE(list.ok());
  for (const DirEntry& e : *list) {
    EXPECT_EQ(e.type, e.name == "f" ? FileType::kFile : FileType::kSymlink) << e.name;
  }
  absl::StatusOr<FindPage> found = fs_->Find("/");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->entries.size(), 8u);  // / /d /d/f /d/l /d/dangling /up /loop1 /loop2
  // A tree copy copies links as links; rename and unlink act on the link, not its target.
  ASSERT_TRUE(fs_->CopyTree("/d", "/copy").ok());
  EXPECT_EQ(*fs_->Readlink("/copy/l"), "f");
  EXPECT_EQ(*fs_->Readlink("/copy/dangling"), "nowhere");
  ASSERT_TRUE(fs_->Rename("/copy/l", "/copy/f").ok());  // a link replaces a file
  EXPECT_EQ(*fs_->Readlink("/copy/f"), "f");
  EXPECT_TRUE(absl::IsFailedPrecondition(fs_->Rename("/copy/f", "/d")));  // onto a directory
  ASSERT_TRUE(fs_->Unlink("/d/l").ok());
  EXPECT_EQ(*fs_->ReadFile("/d/f"), "data");
  absl::StatusOr<Usage> usage = fs_->GetUsage();
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(usage->files, 7u);  // /d/f /d/dangling /up /loop1 /loop2 /copy/f /copy/dangling
}

TEST_P(DfsTest, BatchAppliesEveryChangeInOrderWithItsOwnResult) {
  ASSERT_TRUE(fs_->WriteFile("/old", "previous contents").ok());
  ASSERT_TRUE(fs_->WriteFile("/kept", "kept").ok());
  ASSERT_TRUE(fs_->Mkdir("/dir").ok());
  std::vector<BatchOp> ops = {
      {BatchKind::kMkdir, 0, 0700, 0, "/t", ""},
      {BatchKind::kPut, 0, 0640, 0, "/t/a", "alpha"},
      {BatchKind::kPut, 0, 0644, 0, "/t/empty", ""},
      {BatchKind::kSymlink, 0, 0, 0, "/t/l", "a"},
      {BatchKind::kPut, 0, 0644, 0, "/old", "new"},                  // truncated and rewritten
      {BatchKind::kPut, kBatchKeepExisting, 0644, 0, "/kept", "x"},  // -n: left alone
      {BatchKind::kPut, 0, 0644, 0, "/dir", "x"},                    // a directory: error
      {BatchKind::kPut, 0, 0644, 0, "/nodir/f", "x"},                // no parent: error
      {BatchKind::kMkdir, 0, 0755, 0, "/t", ""},                     // exists: fine
      {BatchKind::kMkdir, 0, 0755, 0, "/old", ""},                   // a file: error
      {BatchKind::kSymlink, 0, 0, 0, "/t/a2", "b"},
      {BatchKind::kSymlink, 0, 0, 0, "/t/a2", "c"},  // replaces the link
      {BatchKind::kSetAttr, kBatchSetMode | kBatchSetMtime, 0751, 1'000'000'000'000'000'000, "/t",
       ""},
  };
  uint64_t before = RoundTrips();
  absl::StatusOr<std::vector<absl::Status>> results = fs_->Batch(ops);
  ASSERT_TRUE(results.ok()) << results.status();
  if (GetParam() == Mode::kActive) {
    EXPECT_EQ(RoundTrips() - before, 1u);
  }
  ASSERT_EQ(results->size(), ops.size());
  for (size_t i : {0, 1, 2, 3, 4, 5, 8, 10, 11, 12}) EXPECT_TRUE((*results)[i].ok()) << i;
  EXPECT_TRUE(absl::IsFailedPrecondition((*results)[6])) << (*results)[6];
  EXPECT_TRUE(absl::IsNotFound((*results)[7])) << (*results)[7];
  EXPECT_TRUE(absl::IsFailedPrecondition((*results)[9])) << (*results)[9];
  EXPECT_EQ(*fs_->ReadFile("/t/a"), "alpha");
  EXPECT_EQ(fs_->Lookup("/t/a")->mode, 0640u);
  EXPECT_EQ(fs_->Lookup("/t/empty")->size, 0u);
  EXPECT_EQ(*fs_->Readlink("/t/l"), "a");
  EXPECT_EQ(*fs_->Readlink("/t/a2"), "c");
  EXPECT_EQ(*fs_->ReadFile("/old"), "new");
  EXPECT_EQ(*fs_->ReadFile("/kept"), "kept");
  absl::StatusOr<Stat> t = fs_->Lookup("/t");
  EXPECT_EQ(t->mode, 0751u);
  EXPECT_EQ(absl::ToUnixNanos(t->mtime), 1'000'000'000'000'000'000);
  // Malformed requests are refused whole.
  std::vector<BatchOp> bad = {{static_cast<BatchKind>(9), 0, 0, 0, "/x", ""}};
  EXPECT_TRUE(absl::IsInvalidArgument(fs_->Batch(bad).status()));
}

TEST_P(DfsTest, RunningOutOfMemoryLeavesTheFileSystemConsistent) {
  server_.reset();
  cluster_.reset();
  ServerOptions small = testing::TestServerOptions();
  small.memory_size = 8u << 20;
  Start(small);
  ASSERT_TRUE(fs_->WriteFile("/keep", "precious").ok());
  absl::Status s;
  int written = 0;
  for (; written < 1000 && s.ok(); ++written) {
    s = fs_->WriteFile(absl::StrCat("/fill", written), std::string(300000, 'f'));
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(*fs_->ReadFile("/keep"), "precious");
  // Whatever was written completely reads back; the namespace lists consistently.
  std::vector<std::string> names = Names("/");
  for (const std::string& n : names) EXPECT_TRUE(fs_->Lookup("/" + n).ok()) << n;
  // Freeing space makes room again.
  for (const std::string& n : names) {
    if (n != "keep") {
      ASSERT_TRUE(fs_->Unlink("/" + n).ok()) << n;
    }
  }
  EXPECT_TRUE(fs_->WriteFile("/again", std::string(300000, 'a')).ok());
  EXPECT_THAT(Names("/"), UnorderedElementsAre("again", "keep"));
}

TEST_P(DfsTest, ConcurrentNamespaceChangesInOneDirectoryStayConsistent) {
  ASSERT_TRUE(fs_->Mkdir("/shared").ok());
  constexpr int kClients = 4, kOps = 60;
  std::vector<std::unique_ptr<Servers>> clients;
  for (int c = 0; c < kClients; ++c) clients.push_back(NewServers());
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      DfsClient fs(clients[c].get(), c % 2 == 0 ? GetParam() : Mode::kActive);
      std::mt19937 rng(c);
      for (int i = 0; i < kOps; ++i) {
        std::string a = absl::StrCat("/shared/n", rng() % 8),
                    b = absl::StrCat("/shared/n", rng() % 8);
        switch (rng() % 3) {
          case 0:
            fs.Create(a).IgnoreError();
            break;
          case 1:
            fs.Rename(a, b).IgnoreError();
            break;
          case 2:
            fs.Unlink(a).IgnoreError();
            break;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::string> listed = Names("/shared");
  std::set<std::string> unique(listed.begin(), listed.end());
  EXPECT_EQ(unique.size(), listed.size());  // no entry twice
  EXPECT_EQ(fs_->Lookup("/shared")->size, listed.size());
  for (int i = 0; i < 8; ++i) {
    std::string name = absl::StrCat("n", i);
    EXPECT_EQ(fs_->Lookup("/shared/" + name).ok(), unique.count(name) == 1) << name;
  }
}

// ---- The model: the same random operations on the DFS and on a local directory. ----

absl::StatusCode FromErrno(int err) {
  switch (err) {
    case 0:
      return absl::StatusCode::kOk;
    case ENOENT:
      return absl::StatusCode::kNotFound;
    case EEXIST:
      return absl::StatusCode::kAlreadyExists;
    case ENOTEMPTY:
    case ENOTDIR:
    case EISDIR:
      return absl::StatusCode::kFailedPrecondition;
    case EINVAL:
      return absl::StatusCode::kInvalidArgument;
    default:
      return absl::StatusCode::kUnknown;
  }
}

class Local {
 public:
  explicit Local(std::string root) : root_(std::move(root)) {}
  std::string P(std::string_view p) const { return root_ + std::string(p); }
  absl::StatusCode Mkdir(std::string_view p) { return Code(::mkdir(P(p).c_str(), 0755)); }
  absl::StatusCode Create(std::string_view p) {
    int fd = ::open(P(p).c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd >= 0) ::close(fd);
    return Code(fd < 0 ? -1 : 0);
  }
  absl::StatusCode Write(std::string_view p, uint64_t off, std::string_view data) {
    int fd = ::open(P(p).c_str(), O_WRONLY);
    if (fd < 0) return Code(-1);
    ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(off));
    ::close(fd);
    return Code(n < 0 ? -1 : 0);
  }
  absl::StatusCode Truncate(std::string_view p, uint64_t len) {
    return Code(::truncate(P(p).c_str(), static_cast<off_t>(len)));
  }
  absl::StatusOr<std::string> Read(std::string_view p) {
    int fd = ::open(P(p).c_str(), O_RDONLY);
    if (fd < 0) return absl::Status(FromErrno(errno), "local");
    std::string out;
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0) {
        int err = errno;
        ::close(fd);
        return absl::Status(FromErrno(err), "local");
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
  }
  absl::StatusCode Unlink(std::string_view p) { return Code(::unlink(P(p).c_str())); }
  absl::StatusCode Rmdir(std::string_view p) { return Code(::rmdir(P(p).c_str())); }
  absl::StatusCode Rename(std::string_view a, std::string_view b) {
    return Code(::rename(P(a).c_str(), P(b).c_str()));
  }
  absl::StatusOr<std::pair<bool, uint64_t>> StatOf(std::string_view p) {  // is_dir, size
    struct stat st;
    if (::stat(P(p).c_str(), &st) != 0) return absl::Status(FromErrno(errno), "local");
    return std::make_pair(S_ISDIR(st.st_mode), static_cast<uint64_t>(st.st_size));
  }
  absl::StatusOr<std::vector<std::string>> List(std::string_view p) {
    std::error_code ec;
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(P(p), ec)) {
      names.push_back(e.path().filename().string());
    }
    if (ec) return absl::Status(FromErrno(ec.value()), "local");
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  static absl::StatusCode Code(int rc) {
    return rc == 0 ? absl::StatusCode::kOk : FromErrno(errno);
  }
  std::string root_;
};

TEST_P(DfsTest, MatchesALocalDirectoryUnderRandomOperations) {
  std::string root = (std::filesystem::temp_directory_path() /
                      absl::StrCat("dfs_model_", ::getpid(), "_", ModeName(GetParam())))
                         .string();
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  Local local(root);
  std::mt19937_64 rng(42);
  const char* names[] = {"a", "b", "c"};
  auto path = [&]() {
    std::string p;
    int depth = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < depth; ++i) {
      p += "/";
      p += names[rng() % 3];
    }
    return p;
  };
  const int steps = GetParam() == Mode::kActive ? 4000 : 800;
  std::array<int, 10> succeeded{};
  for (int step = 0; step < steps; ++step) {
    std::string p = path(), q = path();
    int op = static_cast<int>(rng() % 10);
    SCOPED_TRACE(absl::StrCat("step ", step, " op ", op, " ", p, " ", q));
    absl::StatusCode theirs_code = absl::StatusCode::kOk;
    switch (op) {
      case 0:
        theirs_code = local.Mkdir(p);
        EXPECT_EQ(fs_->Mkdir(p).status().code(), theirs_code);
        break;
      case 1:
        theirs_code = local.Create(p);
        EXPECT_EQ(fs_->Create(p).status().code(), theirs_code);
        break;
      case 2: {
        uint64_t off = rng() % (3 * kBlockSize);
        std::string data(rng() % 100000, static_cast<char>('a' + step % 26));
        // The local write needs an existing file too (no O_CREAT), as dfs.write does.
        theirs_code = local.Write(p, off, data);
        EXPECT_EQ(fs_->Write(p, off, data).status().code(), theirs_code);
        break;
      }
      case 3: {
        uint64_t len = rng() % (2 * kBlockSize);
        theirs_code = local.Truncate(p, len);
        EXPECT_EQ(fs_->Truncate(p, len).code(), theirs_code);
        break;
      }
      case 4: {
        absl::StatusOr<std::string> mine = fs_->ReadFile(p);
        absl::StatusOr<std::string> theirs = local.Read(p);
        theirs_code = theirs.status().code();
        EXPECT_EQ(mine.status().code(), theirs_code);
        if (mine.ok() && theirs.ok()) {
          EXPECT_TRUE(*mine == *theirs);
        }
        break;
      }
      case 5:
        theirs_code = local.Unlink(p);
        EXPECT_EQ(fs_->Unlink(p).code(), theirs_code);
        break;
      case 6:
        theirs_code = local.Rmdir(p);
        EXPECT_EQ(fs_->Rmdir(p).code(), theirs_code);
        break;
      case 7:
        theirs_code = local.Rename(p, q);
        EXPECT_EQ(fs_->Rename(p, q).code(), theirs_code);
        break;
      case 8: {
        absl::StatusOr<Stat> mine = fs_->Lookup(p);
        auto theirs = local.StatOf(p);
        theirs_code = theirs.status().code();
        EXPECT_EQ(mine.status().code(), theirs_code);
        if (mine.ok() && theirs.ok()) {
          EXPECT_EQ(mine->type == FileType::kDirectory, theirs->first);
          if (!theirs->first) {
            EXPECT_EQ(mine->size, theirs->second);
          }
        }
        break;
      }
      case 9: {
        absl::StatusOr<std::vector<DirEntry>> mine = fs_->ListDir(p);
        auto theirs = local.List(p);
        theirs_code = theirs.status().code();
        EXPECT_EQ(mine.status().code(), theirs_code);
        if (mine.ok() && theirs.ok()) {
          std::vector<std::string> got;
          for (const DirEntry& e : *mine) got.push_back(e.name);
          std::sort(got.begin(), got.end());
          EXPECT_EQ(got, *theirs);
        }
        break;
      }
    }
    if (HasFailure()) break;
    succeeded[op] += theirs_code == absl::StatusCode::kOk;
  }
  // The sequence must exercise the file system, not just bounce off errors.
  for (int op = 0; op < 10; ++op) EXPECT_GT(succeeded[op], 0) << "op " << op << " never succeeded";
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace ardma::dfs
