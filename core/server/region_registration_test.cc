// REGISTER / DEREGISTER / REGION_INFO: regions clients register at run time (the rdistcc paper's
// memory regions), over every transport: bounds, permissions, limits, and cleanup when the owner
// goes.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/client/client.h"
#include "core/memory/heap.h"
#include "core/security/auth.h"
#include "core/testing/test_server.h"
#include "core/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

using ::ardma::testing::StatValue;
using ::ardma::testing::TestServer;
using ::ardma::testing::TestServerOptions;
using ::ardma::testing::TestTransport;

class RegionRegistrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/dev/shm/ardma_regions.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    Start({});
  }
  void TearDown() override {
    owner_.reset();
    other_.reset();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  // `limits`, with the test's directory as --register-dir unless `no_dir`. With `auth`, the owner
  // connects as "owner" (every permission) and the other client as "other".
  void Start(const RegistrationLimits& limits, bool no_dir = false,
             std::shared_ptr<const security::AuthTable> auth = nullptr) {
    owner_.reset();
    other_.reset();
    server_.reset();
    ServerOptions o = TestServerOptions();
    o.handler.auth = auth;
    o.handler.registration = limits;
    if (!no_dir) o.handler.registration.dir = dir_;
    if (o.unix_socket.empty()) {
      static int next = 0;
      o.unix_socket = absl::StrCat("/tmp/ardma_regtest.", ::getpid(), ".", next++, ".sock");
    }
    auto server = TestServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    owner_ = NewClient(auth != nullptr ? As("owner") : ClientOptions());
    other_ = NewClient(auth != nullptr ? As("other") : ClientOptions());
  }

  // The options of a client authenticated as `name` (its secret is `name` + kSecretTail).
  static ClientOptions As(const std::string& name) {
    ClientOptions o;
    o.credentials = security::Credentials{name, name + kSecretTail};
    o.credentials_from_environment = false;
    return o;
  }
  static constexpr char kSecretTail[] = "-secret-0123456789abcdef";

  std::unique_ptr<Client> NewClient(const ClientOptions& options = {}) {
    auto c = server_->NewClient(options);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // A file of `size` bytes under the register directory, filled with a pattern.
  std::string MakeFile(const std::string& name, size_t size) {
    std::string path = absl::StrCat(dir_, "/", name);
    std::string bytes(size, '\0');
    for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>('a' + i % 26);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  uint64_t Stat(const std::string& name) {
    absl::StatusOr<uint64_t> v = StatValue(*other_, name);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.value_or(0);
  }

  std::string dir_;
  std::unique_ptr<TestServer> server_;
  std::unique_ptr<Client> owner_, other_;
};

TEST_F(RegionRegistrationTest, ReadOnlyFileIsReadableByOthersAndNotWritable) {
  std::string path = MakeFile("src.i", 100000);
  auto key = owner_->RegisterFile(path, /*writable=*/false);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_GE(key->region, RegionTable::kFirstDynamicRegion);
  EXPECT_EQ(key->size, 100000u);
  EXPECT_TRUE(key->read_only);

  auto bytes = other_->Read(70000, 26, key->region);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, "ijklmnopqrstuvwxyzabcdefgh");  // 70000 % 26 == 8
  auto past = other_->Read(99990, 11, key->region);
  EXPECT_EQ(past.status().code(), absl::StatusCode::kOutOfRange) << past.status();
  absl::Status w = other_->Write(0, "x", key->region);
  EXPECT_EQ(w.code(), absl::StatusCode::kPermissionDenied) << w;
  auto cas = other_->CompareAndSwap(0, 0, 1, key->region);
  EXPECT_EQ(cas.status().code(), absl::StatusCode::kPermissionDenied) << cas.status();

  auto info = other_->RegionInfo(key->region);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->size, 100000u);
  EXPECT_TRUE(info->read_only);
  EXPECT_EQ(Stat("regions.registered"), 1u);
  EXPECT_EQ(Stat("regions.bytes"), 100000u);
}

TEST_F(RegionRegistrationTest, WritableFileTakesOthersWritesIntoTheOwnersFile) {
  std::string path = MakeFile("out.o", 1 << 20);
  auto key = owner_->RegisterFile(path, /*writable=*/true, /*size=*/65536);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->size, 65536u);
  EXPECT_FALSE(key->read_only);
  std::string object(40000, '\x7f');
  object[0] = 'E';
  ASSERT_TRUE(other_->Write(100, object, key->region).ok());
  std::ifstream in(path, std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(file.substr(100, object.size()), object);
  EXPECT_EQ(file.substr(0, 3), "abc");
  absl::Status beyond = other_->Write(65536 - 4, "12345678", key->region);
  EXPECT_EQ(beyond.code(), absl::StatusCode::kOutOfRange) << beyond;
}

TEST_F(RegionRegistrationTest, OnlyFilesUnderTheDirectoryAndNeverThroughALink) {
  std::string inside = MakeFile("ok", 4096);
  std::string outside = absl::StrCat(dir_, "_outside");
  std::ofstream(outside) << "secret";
  std::filesystem::create_symlink(outside, absl::StrCat(dir_, "/link"));
  std::filesystem::create_directory(absl::StrCat(dir_, "/sub"));

  EXPECT_EQ(owner_->RegisterFile(outside, false).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(owner_->RegisterFile(absl::StrCat(dir_, "/link"), false).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(owner_->RegisterFile(absl::StrCat(dir_, "/sub/../../", outside.substr(9)), false)
                .status()
                .code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(owner_->RegisterFile(absl::StrCat(dir_, "/missing"), false).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(owner_->RegisterFile(absl::StrCat(dir_, "/sub"), false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(owner_->RegisterFile(inside, false, 8192).status().code(),
            absl::StatusCode::kOutOfRange);  // larger than the file: never map past its end
  MakeFile("empty", 0);
  EXPECT_EQ(owner_->RegisterFile(absl::StrCat(dir_, "/empty"), false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(owner_->RegisterFile(inside, false).ok());
  EXPECT_EQ(Stat("regions.refused"), 7u);
  std::filesystem::remove(outside);
}

TEST_F(RegionRegistrationTest, WithoutARegisterDirFilesAreRefused) {
  Start({}, /*no_dir=*/true);
  std::string path = MakeFile("f", 4096);
  auto key = owner_->RegisterFile(path, false);
  EXPECT_EQ(key.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(key.status().message()), ::testing::HasSubstr("--register-dir"));
}

TEST_F(RegionRegistrationTest, LimitsOnCountBytesAndPerConnection) {
  Start({.dir = dir_, .max_regions = 3, .max_bytes = 3 * 4096, .max_per_connection = 2});
  std::string a = MakeFile("a", 4096), big = MakeFile("big", 8192);
  ASSERT_TRUE(owner_->RegisterFile(a, false).ok());
  ASSERT_TRUE(owner_->RegisterFile(a, false).ok());
  auto third = owner_->RegisterFile(a, false);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted) << third.status();
  EXPECT_THAT(std::string(third.status().message()), ::testing::HasSubstr("this connection"));
  auto bytes = other_->RegisterFile(big, false);  // 2 * 4096 + 8192 > 3 * 4096
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kResourceExhausted) << bytes.status();
  ASSERT_TRUE(other_->RegisterFile(a, false).ok());
  auto count = other_->RegisterFile(a, false);
  EXPECT_EQ(count.status().code(), absl::StatusCode::kResourceExhausted) << count.status();
  EXPECT_EQ(Stat("regions.registered"), 3u);
}

// Deregistered regions stay mapped for the quarantine and count against the server's limits
// until then: a client registering and deregistering in a loop used to pile up mappings without
// bound (region_bench's loop passed vm.max_map_count in seconds, and UCX aborted the server).
TEST_F(RegionRegistrationTest, QuarantinedRegionsCountAgainstTheLimitsUntilTheirTimeEnds) {
  Start({.dir = dir_, .max_regions = 3, .max_bytes = 1 << 20, .max_per_connection = 3,
         .quarantine = absl::Milliseconds(300)});
  std::string path = MakeFile("loop", 4096);
  for (int i = 0; i < 3; ++i) {
    auto key = owner_->RegisterFile(path, false);
    ASSERT_TRUE(key.ok()) << i << ": " << key.status();
    ASSERT_TRUE(owner_->Deregister(key->region).ok());
  }
  EXPECT_EQ(Stat("regions.registered"), 0u);
  EXPECT_EQ(Stat("regions.quarantined"), 3u);
  auto refused = owner_->RegisterFile(path, false);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("3 of them deregistered"));
  // Once their time is over they are unmapped, and registering works again.
  absl::StatusOr<wire::UcxRegionKey> again;
  testing::WaitUntil([&] { return (again = owner_->RegisterFile(path, false)).ok(); },
                     absl::Seconds(5), absl::Milliseconds(20));
  ASSERT_TRUE(again.ok()) << again.status();
  // That took the first one's end only: the other two were deregistered a little later, and each
  // is unmapped at the first registration (tried, refused or not) after its own time ends.
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        (void)owner_->RegisterFile(path, false);
        return Stat("regions.quarantined") == 0;
      },
      absl::Seconds(5), absl::Milliseconds(20)));
}

TEST_F(RegionRegistrationTest, QuarantinedBytesCountAgainstTheByteLimit) {
  Start({.dir = dir_, .max_regions = 100, .max_bytes = 3 * 4096, .max_per_connection = 100,
         .quarantine = absl::Seconds(30)});
  std::string path = MakeFile("bytes", 8192);
  auto key = owner_->RegisterFile(path, false);
  ASSERT_TRUE(key.ok()) << key.status();
  ASSERT_TRUE(owner_->Deregister(key->region).ok());
  auto refused = owner_->RegisterFile(path, false);  // 8192 kept + 8192 > 3 * 4096
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("8192 of them"));
}

TEST_F(RegionRegistrationTest, RegionsDieWithTheirOwnersConnection) {
  std::string path = MakeFile("src", 8192);
  auto key = owner_->RegisterFile(path, false);
  ASSERT_TRUE(key.ok()) << key.status();
  ASSERT_TRUE(other_->Read(0, 8, key->region).ok());
  owner_.reset();  // closes its connection
  absl::Status read;
  testing::WaitUntil(
      [&] {
        // (A UCX client keeps a key it fetched until it forgets it: CMA cannot revoke one.)
        other_->ForgetRegion(key->region);
        read = other_->Read(0, 8, key->region).status();
        return !read.ok();
      },
      absl::Seconds(2), absl::Milliseconds(10));
  EXPECT_EQ(read.code(), absl::StatusCode::kNotFound) << read;
  EXPECT_EQ(Stat("regions.registered"), 0u);
  EXPECT_EQ(Stat("regions.bytes"), 0u);
  EXPECT_EQ(Stat("regions.registered_total"), 1u);
}

TEST_F(RegionRegistrationTest, OnlyTheOwnerDeregisters) {
  std::string path = MakeFile("src", 4096);
  auto key = owner_->RegisterFile(path, true);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(other_->Deregister(key->region).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(other_->Deregister(kHeapRegion).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(owner_->Deregister(key->region).ok());
  EXPECT_EQ(owner_->Deregister(key->region).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(other_->Read(0, 8, key->region).status().code(), absl::StatusCode::kNotFound);
  other_->ForgetRegion(key->region);
  // Ids are never reused: a new registration gets a new one.
  auto again = owner_->RegisterFile(path, true);
  ASSERT_TRUE(again.ok());
  EXPECT_GT(again->region, key->region);
}

TEST_F(RegionRegistrationTest, MemfdOverAUnixSocketIsSealedAgainstShrinking) {
  auto local = Client::Connect(absl::StrCat("unix:", server_->server().unix_socket()));
  ASSERT_TRUE(local.ok()) << local.status();
  int fd = ::memfd_create("ardma-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 16384), 0);
  ASSERT_EQ(::pwrite(fd, "memfd!", 6, 1000), 6);
  auto key = (*local)->RegisterMemfd(fd, /*writable=*/true);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->size, 16384u);
  auto bytes = other_->Read(1000, 6, key->region);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, "memfd!");
  ASSERT_TRUE(other_->Write(2000, "back", key->region).ok());
  char back[4];
  ASSERT_EQ(::pread(fd, back, 4, 2000), 4);
  EXPECT_EQ(std::string(back, 4), "back");
  // The server sealed it: the owner cannot pull pages out from under the server's mapping.
  EXPECT_NE(::ftruncate(fd, 4096), 0);
  EXPECT_EQ(errno, EPERM);

  int plain = ::memfd_create("no-sealing", MFD_CLOEXEC);
  ASSERT_EQ(::ftruncate(plain, 4096), 0);
  EXPECT_EQ((*local)->RegisterMemfd(plain, false).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*local)->RegisterMemfd(0, false).status().code(),  // stdin: not a memfd
            absl::StatusCode::kPermissionDenied);
  ::close(plain);
  ::close(fd);
}

TEST_F(RegionRegistrationTest, MemfdNeedsAUnixSocket) {
  if (TestTransport() == "unix") GTEST_SKIP() << "every client here is on the Unix socket";
  int fd = ::memfd_create("ardma-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(::ftruncate(fd, 4096), 0);
  EXPECT_EQ(owner_->RegisterMemfd(fd, false).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ::close(fd);
}

// Over UCX, a registered region is read and written with one-sided operations: the server's
// handler sees one REGION_INFO (the key, on first use) and no READ or WRITE.
// A connection that may read every region but write only the heap gets no key for a writable
// registered region: over UCX its READs of it go through the server, as over TCP (they were
// refused PERMISSION_DENIED, for every static region had come with a key), and its WRITEs are
// refused by the server.
TEST_F(RegionRegistrationTest, ARegionWithoutAKeyIsReadThroughTheServer) {
  absl::StatusOr<security::AuthTable> table = security::AuthTable::Parse(
      absl::StrCat("owner owner", kSecretTail, " all\nother other", kSecretTail, " read,write:0\n"),
      "test");
  ASSERT_TRUE(table.ok()) << table.status();
  Start({}, /*no_dir=*/false, std::make_shared<const security::AuthTable>(*table));
  ASSERT_NE(owner_, nullptr);
  ASSERT_NE(other_, nullptr);
  std::string path = MakeFile("shared.o", 4096);
  auto key = owner_->RegisterFile(path, /*writable=*/true);
  ASSERT_TRUE(key.ok()) << key.status();
  ASSERT_TRUE(owner_->Write(100, "written", key->region).ok());
  auto reads = [&] { return StatValue(*owner_, "requests.read").value_or(0); };
  uint64_t reads0 = reads();
  auto bytes = other_->Read(100, 7, key->region);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, "written");
  EXPECT_EQ(reads(), reads0 + 1);  // through the server, over every transport
  // In one batch with a one-sided READ of the heap, in either order.
  ASSERT_TRUE(other_->Write(heap::kDataStart, "heap").ok());
  for (bool heap_first : {true, false}) {
    class Batch b = other_->Batch();
    if (heap_first) b.Read(heap::kDataStart, 4);
    b.Read(100, 7, key->region);
    if (!heap_first) b.Read(heap::kDataStart, 4);
    absl::StatusOr<Batch::Result> both = b.Send();
    ASSERT_TRUE(both.ok()) << both.status();
    ASSERT_EQ(both->reads.size(), 2u);
    EXPECT_EQ(both->reads[heap_first ? 0 : 1], "heap");
    EXPECT_EQ(both->reads[heap_first ? 1 : 0], "written");
  }
  absl::Status w = other_->Write(0, "x", key->region);
  EXPECT_EQ(w.code(), absl::StatusCode::kPermissionDenied) << w;
}

TEST_F(RegionRegistrationTest, UcxReachesRegisteredRegionsOneSided) {
  if (TestTransport().rfind("ucx", 0) != 0) GTEST_SKIP() << "a UCX transport's test";
  std::string path = MakeFile("obj", 1 << 20);
  auto key = owner_->RegisterFile(path, /*writable=*/true);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_FALSE(key->rkey.empty());
  uint64_t reads = Stat("requests.read"), writes = Stat("requests.write");
  std::string data(300000, 'z');
  ASSERT_TRUE(other_->Write(4096, data, key->region).ok());
  auto back = other_->Read(4096, 300000, key->region);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, data);
  EXPECT_EQ(Stat("requests.read"), reads);
  EXPECT_EQ(Stat("requests.write"), writes);
  EXPECT_EQ(Stat("requests.region_info"), 1u);
  std::ifstream in(path, std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(file.substr(4096, data.size()), data);
}

}  // namespace
}  // namespace ardma
