// Java active code through a real server: the paper's list demo against its native twin, calls
// both ways, two versions of one class side by side, failures, and the CLIs.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "core/active/jvm/java_testdata.h"
#include "core/active/jvm/jvm_loader.h"
#include "core/client/invoke.h"
#include "core/client/remote_context.h"
#include "core/memory/heap.h"
#include "core/testing/run_command.h"
#include "core/testing/server_process.h"
#include "core/testing/test_server.h"
#include "core/testing/wait_until.h"
#include "core/wire/byte_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

using ::testing::HasSubstr;
using wire::CodeKind;

std::string U64s(std::initializer_list<uint64_t> values) {
  std::string out;
  for (uint64_t v : values) out.append(reinterpret_cast<const char*>(&v), 8);
  return out;
}

uint64_t AsU64(const std::string& bytes) {
  uint64_t v = 0;
  std::memcpy(&v, bytes.data(), std::min<size_t>(8, bytes.size()));
  return v;
}

std::string Ints(std::initializer_list<int32_t> values) {
  std::string out;
  for (int32_t v : values) out.append(reinterpret_cast<const char*>(&v), 4);
  return out;
}

class JvmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server = testing::TestServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    auto client = server_->NewClient();
    ASSERT_TRUE(client.ok());
    client_ = client->release();
    for (const char* file : {"main/JList.class", "main/Calls.class", "main/Faulty.class"}) {
      std::string code = java_testdata::Bytes(file);
      ASSERT_FALSE(code.empty()) << "missing " << java_testdata::Path(file);
      absl::StatusOr<wire::CodeHash> hash = client_->Load(CodeKind::kJvm, "", code);
      ASSERT_TRUE(hash.ok()) << file << ": " << hash.status();
    }
    ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::listdemo()).ok());
  }
  static void TearDownTestSuite() {
    delete client_;
    delete server_;
  }

  // A list header with room for `nodes` nodes after it, as JList.java describes.
  uint64_t NewList(int nodes) {
    RemoteContext ctx(client_, {});
    absl::StatusOr<uint64_t> base = heap::Allocate(ctx, 24 + 16 * static_cast<uint64_t>(nodes));
    EXPECT_TRUE(base.ok()) << base.status();
    EXPECT_TRUE(client_->Write(*base, U64s({*base + 24, 0, 0})).ok());
    return *base;
  }

  absl::StatusOr<std::string> Exec(std::string_view fn, std::string_view args,
                                   absl::Duration timeout = absl::Seconds(30)) {
    return client_->Execute(fn, args, CallOptions{.timeout = timeout});
  }

  static testing::TestServer* server_;
  static Client* client_;
};

testing::TestServer* JvmTest::server_ = nullptr;
Client* JvmTest::client_ = nullptr;

TEST_F(JvmTest, BuiltWithAJvm) { EXPECT_TRUE(JvmBuiltIn()); }

// The paper's first demo in Java gives what the same list in C++ gives, on the same memory: each
// reads the other's list too.
TEST_F(JvmTest, JavaListMatchesTheNativeListOnTheSameMemory) {
  constexpr int kNodes = 60;
  uint64_t java_list = NewList(kNodes), native_list = NewList(kNodes);
  for (int i = 0; i < kNodes; ++i) {
    uint64_t value = 1000 + 7 * static_cast<uint64_t>(i);
    absl::StatusOr<std::string> a = Exec("JList.append", U64s({java_list, value}));
    absl::StatusOr<std::string> b = Exec("listdemo.append", U64s({native_list, value}));
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_EQ(AsU64(*a), static_cast<uint64_t>(i + 1));
    ASSERT_EQ(*a, *b);
  }
  for (int i = 0; i < kNodes; ++i) {
    std::string args_j = U64s({java_list, static_cast<uint64_t>(i)});
    std::string args_n = U64s({native_list, static_cast<uint64_t>(i)});
    absl::StatusOr<std::string> jj = Exec("JList.get", args_j);
    absl::StatusOr<std::string> nn = Exec("listdemo.get", args_n);
    absl::StatusOr<std::string> jn = Exec("JList.get", args_n);     // Java reads C++'s list
    absl::StatusOr<std::string> nj = Exec("listdemo.get", args_j);  // and C++ reads Java's
    ASSERT_TRUE(jj.ok() && nn.ok() && jn.ok() && nj.ok()) << jj.status() << nn.status();
    EXPECT_EQ(AsU64(*jj), 1000 + 7 * static_cast<uint64_t>(i));
    EXPECT_EQ(*jj, *nn);
    EXPECT_EQ(*jn, *nn);
    EXPECT_EQ(*nj, *jj);
  }
  // The same layout, byte for byte, relative to each list's base.
  absl::StatusOr<std::string> jm = client_->Read(java_list, 24 + 16 * kNodes);
  absl::StatusOr<std::string> nm = client_->Read(native_list, 24 + 16 * kNodes);
  ASSERT_TRUE(jm.ok() && nm.ok());
  for (size_t off = 0; off < jm->size(); off += 8) {
    uint64_t a = AsU64(jm->substr(off, 8)), b = AsU64(nm->substr(off, 8));
    // free and head in the header, then each node's next pointer
    bool is_address = off == 0 || off == 8 || (off >= 24 && (off - 24) % 16 == 0);
    if (is_address && a != 0) {
      EXPECT_EQ(a - java_list, b - native_list) << off;
    } else {
      EXPECT_EQ(a, b) << off;
    }
  }
  // Past the end: the same error from both.
  absl::Status j = Exec("JList.get", U64s({java_list, kNodes})).status();
  absl::Status n = Exec("listdemo.get", U64s({native_list, kNodes})).status();
  EXPECT_EQ(j.code(), absl::StatusCode::kOutOfRange) << j;
  EXPECT_EQ(j.code(), n.code());
}

TEST_F(JvmTest, EveryEntryFormAndCallsBothWays) {
  EXPECT_EQ(*Exec("Calls.twice", Ints({1, -2, 3})), Ints({2, -4, 6}));
  EXPECT_EQ(*Exec("Calls.total", Ints({1, 2, 3, 4})), Ints({10}));
  EXPECT_EQ(*Exec("Calls.noop", ""), "");
  EXPECT_TRUE(absl::IsNotFound(Exec("Calls.notExported", "").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Exec("Calls.total", "abc").status()));

  uint64_t list = NewList(3);
  for (uint64_t v : {11, 22, 33}) ASSERT_TRUE(Exec("listdemo.append", U64s({list, v})).ok());
  // Java calling native code.
  absl::StatusOr<std::string> via = Exec("Calls.viaNative", U64s({list, 2}));
  ASSERT_TRUE(via.ok()) << via.status();
  EXPECT_EQ(AsU64(*via), 33u);
  // Native code calling Java code.
  std::string args;
  wire::ByteWriter w(&args);
  w.Str16("JList.get");
  w.Bytes(U64s({list, 1}));
  absl::StatusOr<std::string> back = Exec("listdemo.call", args);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(AsU64(*back), 22u);
  // Native -> Java -> native, and a Java error coming back through native code.
  args.clear();
  wire::ByteWriter w2(&args);
  w2.Str16("Calls.viaNative");
  w2.Bytes(U64s({list, 0}));
  EXPECT_EQ(AsU64(*Exec("listdemo.call", args)), 11u);
  args.clear();
  wire::ByteWriter w3(&args);
  w3.Str16("Faulty.boom");
  EXPECT_TRUE(absl::IsUnknown(Exec("listdemo.call", args).status()));
}

TEST_F(JvmTest, TwoVersionsOfOneClassLiveSideBySide) {
  std::string v1 = java_testdata::Bytes("v1/Greeter.class");
  std::string v2 = java_testdata::Bytes("greeter-v2.jar");
  ASSERT_FALSE(v1.empty());
  ASSERT_FALSE(v2.empty());
  absl::StatusOr<wire::CodeHash> h1 = client_->Load(CodeKind::kJvm, "", v1);
  ASSERT_TRUE(h1.ok()) << h1.status();
  absl::StatusOr<wire::CodeHash> h2 = client_->Load(CodeKind::kJvm, "", v2);
  ASSERT_TRUE(h2.ok()) << h2.status();
  EXPECT_NE(*h1, *h2);
  EXPECT_EQ(*client_->Execute(*h1, "Greeter.execute", ""), Ints({1}));
  EXPECT_EQ(*client_->Execute(*h2, "Greeter.execute", ""), Ints({2}));
  EXPECT_EQ(*client_->Execute("Greeter.execute", ""), Ints({2}));       // by name: the newest
  EXPECT_EQ(*client_->Execute(*h1, "Greeter.execute", ""), Ints({1}));  // the old one still runs
  // Loading known bytes again is the same code.
  EXPECT_EQ(*client_->Load(CodeKind::kJvm, "", v1), *h1);
}

TEST_F(JvmTest, FailuresBecomeTheRightErrorsAndTheServerServesOn) {
  absl::Status boom = Exec("Faulty.boom", "").status();
  EXPECT_TRUE(absl::IsUnknown(boom)) << boom;
  EXPECT_EQ(boom.message(), "java.lang.IllegalStateException: boom");

  absl::Status range = Exec("Faulty.outOfRange", "").status();
  EXPECT_TRUE(absl::IsOutOfRange(range)) << range;

  // More rounds than the server has threads (2 I/O, 2 workers): a spin that was not stopped
  // would hold its thread for good, and the requests after the fourth would find none.
  for (int round = 0; round < 6; ++round) {
    absl::Time start = absl::Now();
    absl::Status spin = Exec("Faulty.spin", "", absl::Milliseconds(300)).status();
    EXPECT_TRUE(absl::IsDeadlineExceeded(spin)) << spin;
    EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
    for (int i = 0; i < 20; ++i) {
      absl::StatusOr<std::string> ok = Exec("Calls.total", Ints({i, 1}));
      ASSERT_TRUE(ok.ok()) << ok.status();
      ASSERT_EQ(*ok, Ints({i + 1}));
    }
  }
  // The spinning call was really stopped: its thread serves Java and native requests alike.
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Exec("Calls.noop", "").ok());

  // Java code cannot end the server (issue 22: System.exit(3) ended ardmad with status 3).
  for (const char* exit : {"Faulty.exit", "Faulty.halt"}) {
    absl::Status refused = Exec(exit, "").status();
    EXPECT_TRUE(absl::IsUnknown(refused)) << refused;
    EXPECT_THAT(refused.message(), HasSubstr("may not end the server")) << exit;
  }
  ASSERT_TRUE(Exec("Calls.noop", "").ok());

  ASSERT_TRUE(Exec("Faulty.keep", "").ok());
  absl::Status kept = Exec("Faulty.useKept", "").status();
  EXPECT_TRUE(absl::IsUnknown(kept)) << kept;
  EXPECT_THAT(kept.message(), HasSubstr("used after its request ended"));
}

TEST_F(JvmTest, BadJavaCodeIsRefused) {
  absl::Status garbage = client_->Load(CodeKind::kJvm, "", "neither a class nor a jar").status();
  EXPECT_TRUE(absl::IsInvalidArgument(garbage)) << garbage;
  std::string truncated = java_testdata::Bytes("main/Calls.class").substr(0, 100);
  absl::Status broken = client_->Load(CodeKind::kJvm, "", truncated).status();
  EXPECT_TRUE(absl::IsInvalidArgument(broken)) << broken;
  EXPECT_THAT(broken.message(), HasSubstr("ClassFormatError"));
  // A valid class with no entry points.
  std::string api_class =
      java_testdata::Bytes("../../core/active/jvm/api_classes/ardma/ActiveRDMAException.class");
  ASSERT_FALSE(api_class.empty());
  absl::Status none = client_->Load(CodeKind::kJvm, "", api_class).status();
  EXPECT_TRUE(absl::IsInvalidArgument(none)) << none;
  EXPECT_THAT(none.message(), HasSubstr("no entry points"));
  EXPECT_TRUE(client_->Ping().ok());
}

// The CLIs: ardma load --kind jvm and ardma exec; and a server that has no JVM to start.
TEST(JvmCliTest, LoadAndExecJavaCodeFromTheCommandLine) {
  auto server = testing::TestServer::Start();
  ASSERT_TRUE(server.ok());
  std::string ardma = absl::StrCat(testing::BinDir(), "/ardma --server ", (*server)->address());
  std::string out, err;
  ASSERT_EQ(testing::RunCommandSplit(
                absl::StrCat(ardma, " load --kind jvm ", java_testdata::Path("main/Calls.class")),
                &out, &err),
            0)
      << err;
  EXPECT_EQ(out.size(), 65u);  // the hash in hex and a newline
  ASSERT_EQ(testing::RunCommandSplit(
                absl::StrCat(ardma, " exec --hex Calls.total 0100000002000000"), &out, &err),
            0)
      << err;
  EXPECT_EQ(out, "03000000\n");
  // The README's example, as the README runs it.
  ASSERT_EQ(testing::RunCommandSplit(
                absl::StrCat(ardma, " load --kind jvm ", java_testdata::Path("main/Sum.class")),
                &out, &err),
            0)
      << err;
  ASSERT_EQ(testing::RunCommandSplit(
                absl::StrCat(ardma, " exec --hex Sum.execute 0100000002000000"), &out, &err),
            0)
      << err;
  EXPECT_EQ(out, "03000000\n");
  ASSERT_EQ(
      testing::RunCommandSplit(absl::StrCat(ardma, " exec --i32 Sum.execute 1 2 -10"), &out, &err),
      0)
      << err;
  EXPECT_EQ(out, "-7\n");  // typed: no little-endian hex by hand
  // The kind follows from the file name too.
  EXPECT_EQ(testing::RunCommandSplit(
                absl::StrCat(ardma, " load ", java_testdata::Path("greeter-v2.jar")), &out, &err),
            0)
      << err;
}

TEST(JvmCliTest, AServerWithoutAJvmAnswersFailedPrecondition) {
  std::string dir = ::testing::TempDir();
  std::string port_file = absl::StrCat(dir, "/nojvm.port.", getpid());
  std::filesystem::remove(port_file);
  std::string ardmad = absl::StrCat(testing::BinDir(), "/ardmad --listen 127.0.0.1:0 --quiet ",
                                    "--memory 16M --jvm-lib /nonexistent/libjvm.so --port-file ",
                                    port_file, " & echo $! > ", port_file, ".pid");
  std::string ignored;
  ASSERT_EQ(testing::RunCommand(ardmad, &ignored), 0);
  std::string address;
  testing::WaitUntil([&] { return static_cast<bool>(std::ifstream(port_file) >> address); },
                     absl::Seconds(4));
  ASSERT_FALSE(address.empty());
  std::string out, err;
  int rc = testing::RunCommandSplit(
      absl::StrCat(testing::BinDir(), "/ardma --server ", address, " load --kind jvm ",
                   java_testdata::Path("main/Calls.class")),
      &out, &err);
  EXPECT_EQ(rc, 1);
  EXPECT_THAT(err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(err, HasSubstr("cannot start the JVM"));
  // It still serves everything else.
  EXPECT_EQ(
      testing::RunCommandSplit(
          absl::StrCat(testing::BinDir(), "/ardma --server ", address, " ping 1"), &out, &err),
      0)
      << err;
  testing::RunCommand(absl::StrCat("kill $(cat ", port_file, ".pid)"), &ignored);
}

// ardmad --isolate runs Java code in its worker processes too, each with its own JVM: a loop that
// catches ThreadDeath (so the JVM's own deadline cannot stop it) is killed with its worker at the
// deadline, and the next call gets a new worker (and JVM).
TEST(JvmIsolatedTest, AJavaLoopThatCatchesThreadDeathCostsOnlyItsWorker) {
  testing::ServerProcess daemon({"--memory", "64M", "--ucx", "off", "--isolate", "all", "--workers",
                                 "1", "--stop-grace", "2s"});
  ASSERT_FALSE(daemon.address().empty());
  auto client = Client::Connect(daemon.address());
  ASSERT_TRUE(client.ok()) << client.status();
  for (const char* file : {"main/Calls.class", "main/Faulty.class"}) {
    absl::StatusOr<wire::CodeHash> hash =
        (*client)->Load(CodeKind::kJvm, "", java_testdata::Bytes(file));
    ASSERT_TRUE(hash.ok()) << file << ": " << hash.status();
  }
  CallOptions slow{.timeout = absl::Seconds(60)};  // a new worker starts its JVM first
  absl::StatusOr<std::string> sum = (*client)->Execute("Calls.total", Ints({1, 2}), slow);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(*sum, Ints({3}));
  absl::StatusOr<std::string> stubborn = (*client)->Execute(
      "Faulty.stubborn", "", {.timeout = absl::Seconds(60), .server_deadline = absl::Seconds(1)});
  EXPECT_EQ(stubborn.status().code(), absl::StatusCode::kDeadlineExceeded) << stubborn.status();
  EXPECT_THAT(stubborn.status().message(), HasSubstr("isolated worker was killed"));
  EXPECT_EQ(testing::StatOf(**client, "isolated.restarts"), 1u);
  sum = (*client)->Execute("Calls.total", Ints({4, 5}), slow);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(*sum, Ints({9}));
  // Still refused in a worker: Java cannot end its process either.
  EXPECT_FALSE((*client)->Execute("Faulty.exit", "", slow).ok());
  EXPECT_TRUE((*client)->Execute("Calls.noop", "", slow).ok());
  EXPECT_EQ(testing::StatOf(**client, "isolated.restarts"), 1u);
}

}  // namespace
}  // namespace ardma
