// The compile farm end to end, with the real binaries: ardmad --register-dir, two ardma-ccd slaves
// and `make CC="ardma-cc gcc"` on two real multi-file projects (testdata/), against local builds;
// the compiler's diagnostics and exit status; and every failover ending in a correct build.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/client/client.h"
#include "core/status_macros.h"
#include "core/testing/etcd_process.h"
#include "core/testing/run_command.h"
#include "core/testing/server_process.h"
#include "core/testing/test_server.h"
#include "core/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/cc/cc_client.h"

extern char** environ;

namespace ardma::cc {
namespace {

using ::ardma::testing::BinDir;
using ::ardma::testing::RunCommand;
using ::ardma::testing::RunCommandSplit;
using ::ardma::testing::ServerProcess;
using ::testing::HasSubstr;

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string Quote(const std::string& s) { return absl::StrCat("'", s, "'"); }

// A child process (a slave), killed when destroyed.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
    std::vector<std::string> envs;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry = *e;
      if (!env.contains(entry.substr(0, entry.find('=')))) envs.push_back(entry);
    }
    for (const auto& [k, v] : env) envs.push_back(absl::StrCat(k, "=", v));
    std::vector<char*> args, envp;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    for (const std::string& e : envs) envp.push_back(const_cast<char*>(e.c_str()));
    args.push_back(nullptr);
    envp.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execve(args[0], args.data(), envp.data());
      ::_exit(127);
    }
  }
  ~Child() { Kill(SIGKILL); }
  void Kill(int signal) {
    if (pid_ <= 0) return;
    ::kill(pid_, signal);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

class CcFarmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::ardma::testing::TempPath("ccfarm");
    fs::remove_all(root_);
    fs::create_directories(root_);
    stage_ = absl::StrCat("/dev/shm/ardma-cc-test-", ::getpid(), "-", serial_++);
    fs::create_directories(stage_);
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{"--register-dir", stage_});
    ASSERT_FALSE(server_->address().empty());
    address_ = ::ardma::testing::TestTransport() == "tcp"
                   ? server_->address()
                   : ::ardma::testing::ClientAddress(server_->address());
    auto client = Client::Connect(address_);
    ASSERT_TRUE(client.ok()) << client.status();
    watcher_ = *std::move(client);
  }
  void TearDown() override {
    slaves_.clear();
    watcher_.reset();
    server_.reset();
    fs::remove_all(stage_);
    fs::remove_all(root_);
  }

  // A slave with one slot; `path_first` goes before $PATH (a slow compiler).
  void StartSlave(const std::string& name,
                  const std::string& allow = "gcc,g++,cc,c++,clang,clang++",
                  const std::string& path_first = "") {
    std::map<std::string, std::string> env;
    if (!path_first.empty()) env["PATH"] = absl::StrCat(path_first, ":", std::getenv("PATH"));
    slaves_[name] = std::make_unique<Child>(
        std::vector<std::string>{BinDir() + "/ardma-ccd", "--server", address_, "--slots", "1",
                                 "--name", name, "--allow", allow, "--tmpdir", stage_},
        env);
  }

  // The environment ardma-cc runs with, as a shell prefix.
  std::string FarmEnv(const std::string& extra = "") const {
    return absl::StrCat("ARDMA_SERVER=", Quote(address_), " ARDMA_CC_DIR=", Quote(stage_),
                        " ARDMA_CC_LOG=", Quote(root_ + "/cc.log"), " ", extra, " ");
  }
  std::string Cc() const { return BinDir() + "/ardma-cc"; }

  // Copies testdata project `name` to ROOT/DIR.
  std::string CopyProject(const std::string& name, const std::string& dir) {
    std::string to = absl::StrCat(root_, "/", dir);
    fs::copy(absl::StrCat(ARDMA_CC_TESTDATA, "/", name), to, fs::copy_options::recursive);
    return to;
  }

  // Builds testdata project `name` here and through the farm (`make -j4 VAR=COMPILER check`, the
  // farm's build as VAR='ardma-cc COMPILER'): the same objects and dependency files.
  void ExpectFarmBuildIsTheLocalOne(const std::string& name, const std::string& var,
                                    const std::string& compiler,
                                    const std::vector<std::string>& objects) {
    std::string local = CopyProject(name, "local-" + compiler);
    std::string farm = CopyProject(name, "farm-" + compiler);
    std::string out;
    ASSERT_EQ(RunCommand(absl::StrCat("make -s -C ", local, " -j4 ", var, "=", compiler, " check"),
                         &out),
              0)
        << out;
    ASSERT_EQ(RunCommand(absl::StrCat(FarmEnv(), "make -s -C ", farm, " -j4 ", var, "=",
                                      Quote(Cc() + " " + compiler), " check"),
                         &out),
              0)
        << out;
    EXPECT_THAT(out, ::testing::Not(HasSubstr("ardma-cc: warning")));
    for (const std::string& object : objects) {
      EXPECT_FALSE(Slurp(absl::StrCat(farm, "/", object, ".o")).empty()) << object << ".o";
      EXPECT_EQ(Slurp(absl::StrCat(local, "/", object, ".o")),
                Slurp(absl::StrCat(farm, "/", object, ".o")))
          << compiler << ": " << object << ".o";
      EXPECT_EQ(Slurp(absl::StrCat(local, "/", object, ".d")),
                Slurp(absl::StrCat(farm, "/", object, ".d")))
          << compiler << ": " << object << ".d";
    }
  }

  std::vector<std::string> LogLines() {
    return absl::StrSplit(Slurp(root_ + "/cc.log"), '\n', absl::SkipEmpty());
  }

  absl::StatusOr<FarmStatus> Status() { return CcClient(watcher_.get()).Status(); }

  // Waits until job state shows `slave` running something.
  bool WaitRunningOn(const std::string& slave) {
    return testing::WaitUntil(
        [&] {
          absl::StatusOr<FarmStatus> st = Status();
          return st.ok() && std::any_of(st->jobs.begin(), st->jobs.end(),
                                        [&](const RunningJob& j) { return j.slave == slave; });
        },
        absl::Seconds(10), absl::Milliseconds(10));
  }

  // A directory with a `gcc` and `g++` that take `seconds` before compiling.
  std::string SlowCompilers(int seconds) {
    std::string dir = root_ + "/slow";
    fs::create_directories(dir);
    for (const char* cc : {"gcc", "g++"}) {
      std::string path = absl::StrCat(dir, "/", cc);
      std::ofstream(path) << "#!/bin/sh\nsleep " << seconds << "\nexec /usr/bin/" << cc
                          << " \"$@\"\n";
      fs::permissions(path, fs::perms::owner_all);
    }
    return dir;
  }

  static inline int serial_ = 0;
  std::string root_, stage_, address_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<Client> watcher_;
  std::map<std::string, std::unique_ptr<Child>> slaves_;
};

TEST_F(CcFarmTest, ACProjectBuiltOnTwoSlavesMatchesTheLocalBuildByteForByte) {
  StartSlave("s1");
  StartSlave("s2");
  ExpectFarmBuildIsTheLocalOne("wordfreq", "CC", "gcc", {"main", "table", "words", "sort"});
  // Four compiles ran on the farm, the link here; both slaves took part.
  std::vector<std::string> lines = LogLines();
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const std::string& l) { return l.starts_with("remote "); }),
            4)
      << Slurp(root_ + "/cc.log");
  absl::StatusOr<FarmStatus> st = Status();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->finished, 4u);
  ASSERT_EQ(st->slaves.size(), 2u);
  EXPECT_EQ(st->slaves[0].done + st->slaves[1].done, 4u);
  // What `ardma cc status` prints of it: the totals, then a row per slave.
  std::string shown;
  ASSERT_EQ(RunCommand(BinDir() + "/ardma --server " + address_ + " cc status", &shown), 0)
      << shown;
  EXPECT_THAT(shown, ::testing::StartsWith("jobs: 0 queued, 0 running; 4 submitted, 4 finished, "
                                           "0 failed on a slave, 0 given back, 0 withdrawn, 0 "
                                           "refused (queue full)\n"));
  EXPECT_THAT(shown, HasSubstr("SLAVE"));
  for (const auto& row : st->slaves) {
    size_t at = shown.find("\n" + row.name + " ");
    ASSERT_NE(at, std::string::npos) << row.name << " missing from\n" << shown;
    std::istringstream fields(shown.substr(at + 1 + row.name.size()));
    uint64_t running = 99, done = 99;
    fields >> running >> done;
    EXPECT_EQ(running, 0u);
    EXPECT_EQ(done, row.done) << shown;
  }
  EXPECT_EQ(RunCommand(BinDir() + "/ardma --server " + address_ + " cc nonsense", &shown), 2);
}

// ccache in front of the farm (CCACHE_PREFIX=ardma-cc, as distcc users run it): its misses are
// compiled on the farm, its hits never reach it, and the objects are the local build's.
// ardma-ccd given a cluster's address takes the jobs of every member's submitters, and those of a
// member that joins later, without a restart (over tcp, or over ucx with --transport ucx).
TEST_F(CcFarmTest, ASlaveOfAClusterServesEveryMembersFarmAndOneThatJoins) {
  // Over UCX (the ucx transports of this suite) the slave reads and writes one-sidedly.
  ::ardma::testing::ApplyTestTransport();  // UCX_TLS for the members and the slave
  const std::string transport =
      ::ardma::testing::TestTransport() == "tcp" ? "tcp" : "ucx";
  ::ardma::testing::EtcdProcess etcd;
  ASSERT_FALSE(etcd.endpoint().empty()) << "etcd did not start";
  const std::string cluster = absl::StrCat("etcd://", etcd.endpoint(), "/farm");
  auto member = [&] {
    return std::make_unique<ServerProcess>(std::vector<std::string>{
        "--register-dir", stage_, "--cluster", cluster, "--cluster-ttl", "2s"});
  };
  std::vector<std::unique_ptr<ServerProcess>> members;
  for (int i = 0; i < 2; ++i) {
    members.push_back(member());
    ASSERT_FALSE(members.back()->address().empty());
  }
  slaves_["cs"] = std::make_unique<Child>(
      std::vector<std::string>{BinDir() + "/ardma-ccd", "--server", cluster, "--transport",
                               transport, "--slots", "1", "--name", "cs", "--tmpdir", stage_},
      std::map<std::string, std::string>{});
  const std::string src = CopyProject("wordfreq", "src");
  auto farm_of = [&](const ServerProcess& m) -> absl::StatusOr<FarmStatus> {
    ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, Client::Connect(m.address()));
    return CcClient(client.get()).Status();
  };
  auto served = [&](const ServerProcess& m) {
    absl::StatusOr<FarmStatus> st = farm_of(m);
    return st.ok() && std::any_of(st->slaves.begin(), st->slaves.end(),
                                  [](const SlaveRow& r) { return r.name == "cs"; });
  };
  // A compile submitted on member `m` runs on the slave: the member's farm finished it.
  auto compiled_on = [&](const ServerProcess& m, int n) {
    std::string out;
    std::string object = absl::StrCat(root_, "/main", n, ".o");
    EXPECT_EQ(RunCommand(absl::StrCat("ARDMA_SERVER=", Quote(m.address()),
                                      " ARDMA_CC_DIR=", Quote(stage_), " ", Cc(), " gcc -O2 -c ",
                                      src, "/main.c -o ", object),
                         &out),
              0)
        << out;
    EXPECT_FALSE(Slurp(object).empty());
    absl::StatusOr<FarmStatus> st = farm_of(m);
    EXPECT_TRUE(st.ok() && st->finished == 1) << "the compile did not go to the farm: " << out;
  };
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(testing::WaitUntil([&] { return served(*members[i]); }, absl::Seconds(20),
                                   absl::Milliseconds(50)))
        << "the slave does not take member " << i << "'s jobs";
    compiled_on(*members[i], i);
  }
  members.push_back(member());
  ASSERT_FALSE(members.back()->address().empty());
  EXPECT_TRUE(testing::WaitUntil([&] { return served(*members[2]); }, absl::Seconds(20),
                                 absl::Milliseconds(50)))
      << "the slave does not take the jobs of a member that joined";
  compiled_on(*members[2], 2);
  // The slave reached the members by the transport asked for.
  for (const auto& m : members) {
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(m->address());
    ASSERT_TRUE(client.ok()) << client.status();
    absl::StatusOr<uint64_t> ucx_connects =
        ::ardma::testing::StatValue(**client, "requests.ucx_connect");
    ASSERT_TRUE(ucx_connects.ok()) << ucx_connects.status();
    EXPECT_EQ(*ucx_connects > 0, transport == "ucx") << m->address();
  }
}

// clang and clang++ (-frewrite-includes here, the compile there): the local build's objects.
TEST_F(CcFarmTest, ClangAndClangxxBuildsMatchTheLocalBuildsByteForByte) {
  StartSlave("s1");
  ExpectFarmBuildIsTheLocalOne("wordfreq", "CC", "clang", {"main", "table", "words", "sort"});
  ExpectFarmBuildIsTheLocalOne("rpn", "CXX", "clang++", {"main", "lexer", "parser", "eval"});
  std::vector<std::string> lines = LogLines();
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const std::string& l) { return l.starts_with("remote "); }),
            8)
      << Slurp(root_ + "/cc.log");
}

TEST_F(CcFarmTest, CcacheInFrontSendsOnlyItsMissesToTheFarm) {
  StartSlave("s1");
  uint64_t farmed = 0;
  for (const std::string cc : {"gcc", "clang"}) {
    SCOPED_TRACE(cc);
    std::string local = CopyProject("wordfreq", "local-" + cc);
    std::string farm = CopyProject("wordfreq", "farm-" + cc);
    std::string out;
    ASSERT_EQ(RunCommand(absl::StrCat("make -s -C ", local, " CC=", cc, " check"), &out), 0) << out;
    const std::string cache_dir = root_ + "/ccache-" + cc;
    std::string ccache = absl::StrCat(FarmEnv(), "CCACHE_DIR=", Quote(cache_dir),
                                      " CCACHE_PREFIX=", Quote(Cc()), " ");
    farmed += 4;  // the four misses of the first build, nothing more
    for (int build = 0; build < 2; ++build) {
      SCOPED_TRACE(build == 0 ? "first build: all misses" : "second build: all hits");
      ASSERT_EQ(RunCommand(absl::StrCat("make -s -C ", farm, " clean && ", ccache, "make -s -C ",
                                        farm, " CC='ccache ", cc, "' check"),
                           &out),
                0)
          << out;
      for (const char* object : {"main", "table", "words", "sort"}) {
        EXPECT_EQ(Slurp(absl::StrCat(local, "/", object, ".o")),
                  Slurp(absl::StrCat(farm, "/", object, ".o")))
            << object << ".o";
      }
      absl::StatusOr<FarmStatus> st = Status();
      ASSERT_TRUE(st.ok()) << st.status();
      EXPECT_EQ(st->finished, farmed);
    }
    ASSERT_EQ(RunCommand(absl::StrCat("CCACHE_DIR=", Quote(cache_dir), " ccache -s"), &out), 0);
    EXPECT_THAT(out, ::testing::ContainsRegex("Hits: +4 / +8"));
  }
}

// This project's own core/wire library, configured with CMake and built through ardma-cc as the
// compiler launcher: the objects of the same build without it.
TEST_F(CcFarmTest, ThisProjectsWireLibraryThroughTheFarmIsTheLocalBuild) {
  StartSlave("s1");
  StartSlave("s2");
  std::string out;
  for (const std::string dir : {"local", "farm"}) {
    std::string launcher = dir == "farm" ? Cc() : "";  // (empty: not even ccache)
    ASSERT_EQ(RunCommand(absl::StrCat(
                             FarmEnv(), "cmake -S ", Quote(ARDMA_PROJECT_SOURCE_DIR), " -B ", root_,
                             "/", dir, " -G Ninja -DCMAKE_BUILD_TYPE=Release",
                             " '-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG' -DARDMA_BUILD_TESTS=OFF",
                             " -DARDMA_BUILD_BENCHMARKS=OFF -DARDMA_PYTHON=OFF",
                             " -DCMAKE_CXX_COMPILER_LAUNCHER=", Quote(launcher), " > /dev/null && ",
                             FarmEnv(), "cmake --build ", root_, "/", dir, " --target wire"),
                         &out),
              0)
        << out;
  }
  for (const char* object : {"frame", "frame_reader", "messages"}) {
    std::string path = absl::StrCat("/core/wire/CMakeFiles/wire.dir/", object, ".cc.o");
    EXPECT_FALSE(Slurp(root_ + "/farm" + path).empty()) << path;
    EXPECT_EQ(Slurp(root_ + "/local" + path), Slurp(root_ + "/farm" + path)) << path;
  }
  // Every compile of the build (wire and what it links: core's base) went to the farm.
  std::vector<std::string> lines = LogLines();
  EXPECT_GE(lines.size(), 3u);
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const std::string& l) { return l.starts_with("remote "); }),
            static_cast<ptrdiff_t>(lines.size()))
      << Slurp(root_ + "/cc.log");
}

// ardma-cc as CMake's compiler launcher (-DCMAKE_C_COMPILER_LAUNCHER): CMake's own compile lines
// (full compiler path, -MD -MT -MF, -o before -c) go to the farm, and the objects are those of
// the same CMake build without it.
TEST_F(CcFarmTest, AsCMakesCompilerLauncher) {
  StartSlave("s1");
  std::string source = CopyProject("wordfreq", "src");
  std::ofstream(source + "/CMakeLists.txt")
      << "cmake_minimum_required(VERSION 3.20)\nproject(wordfreq C)\n"
         "add_executable(wordfreq main.c table.c words.c sort.c)\n";
  std::string out;
  for (const char* dir : {"local", "farm"}) {
    std::string launcher = std::string(dir) == "farm" ? " -DCMAKE_C_COMPILER_LAUNCHER=" + Cc() : "";
    ASSERT_EQ(RunCommand(absl::StrCat(FarmEnv(), "cmake -S ", source, " -B ", root_, "/", dir,
                                      " -G 'Unix Makefiles' -DCMAKE_BUILD_TYPE=Release", launcher,
                                      " >/dev/null && ", FarmEnv(), "cmake --build ", root_, "/",
                                      dir, " -j2"),
                         &out),
              0)
        << out;
  }
  for (const char* object : {"main", "table", "words", "sort"}) {
    std::string path = absl::StrCat("/CMakeFiles/wordfreq.dir/", object, ".c.o");
    EXPECT_EQ(Slurp(root_ + "/local" + path), Slurp(root_ + "/farm" + path)) << path;
    EXPECT_FALSE(Slurp(root_ + "/farm" + path).empty()) << path;
  }
  absl::StatusOr<FarmStatus> st = Status();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->finished, 4u) << Slurp(root_ + "/cc.log");
}

TEST_F(CcFarmTest, ACxxProjectWithDebugInfoHasTheLocalBuildsCode) {
  StartSlave("s1");
  StartSlave("s2");
  std::string local = CopyProject("rpn", "local"), farm = CopyProject("rpn", "farm");
  std::string flags = "CXXFLAGS='-O2 -g -Wall -std=c++20'";
  std::string out;
  ASSERT_EQ(RunCommand(absl::StrCat("make -s -C ", local, " -j4 CXX=g++ ", flags, " check"), &out),
            0)
      << out;
  ASSERT_EQ(RunCommand(absl::StrCat(FarmEnv(), "make -s -C ", farm,
                                    " -j4 CXX=", Quote(Cc() + " g++"), " ", flags, " check"),
                       &out),
            0)
      << out;
  for (const char* object : {"main", "lexer", "parser", "eval"}) {
    std::string l, f;
    // The disassembly without its first lines (they name the file).
    ASSERT_EQ(
        RunCommandSplit(absl::StrCat("objdump -d ", local, "/", object, ".o | tail -n +3"), &l), 0);
    ASSERT_EQ(
        RunCommandSplit(absl::StrCat("objdump -d ", farm, "/", object, ".o | tail -n +3"), &f), 0);
    EXPECT_FALSE(l.empty());
    EXPECT_EQ(l, f) << object;
  }
  EXPECT_EQ(LogLines().size(), 5u);  // four remote compiles and the local link
}

TEST_F(CcFarmTest, DiagnosticsAndExitStatusAreTheCompilers) {
  StartSlave("s1");
  std::string dir = root_ + "/diag";
  fs::create_directories(dir);
  std::ofstream(dir + "/warn.h") << "#define SQUARE(x) ((x) * (x))\n";
  std::ofstream(dir + "/warn.c")
      << "#include \"warn.h\"\n#warning \"from the preprocessor\"\n"
         "int f(int *p) {\n  int x;\n  if (p == 0) return SQUARE(x);\n  return *p;\n}\n"
         "int g(unsigned u) { return u < 0; }\n";
  std::ofstream(dir + "/bad.cc")
      << "#include <vector>\nint main() {\n  std::vector<int> v;\n  v.push(1);\n"
         "  undeclared();\n  return \"no\";\n}\n";
  struct Case {
    std::string compiler, source, object;
    int status;
  };
  for (const Case& c :
       std::vector<Case>{{"gcc", "warn.c", "warn.o", 0},
                         {"g++", "bad.cc", "bad.o", 1},
                         {"clang", "warn.c", "clang-warn.o", 0},
                         {"clang++", "bad.cc", "clang-bad.o", 1}}) {
    std::string flags = absl::StrCat("-Wall -Wextra -O2 -c ", c.source, " -o ");
    std::string local_out, local_err, farm_out, farm_err;
    int local = RunCommandSplit(
        absl::StrCat("cd ", dir, " && ", c.compiler, " ", flags, "local-", c.object), &local_out,
        &local_err);
    int farm = RunCommandSplit(absl::StrCat("cd ", dir, " && ", FarmEnv(), Cc(), " ", c.compiler,
                                            " ", flags, "farm-", c.object),
                               &farm_out, &farm_err);
    EXPECT_EQ(local, c.status) << local_err;
    EXPECT_EQ(farm, local) << farm_err;
    EXPECT_EQ(farm_err, local_err);
    EXPECT_EQ(farm_out, local_out);
    EXPECT_FALSE(local_err.empty());
    EXPECT_EQ(fs::exists(absl::StrCat(dir, "/farm-", c.object)), c.status == 0);
  }
  std::vector<std::string> lines = LogLines();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[0], HasSubstr("remote warn.c"));
  EXPECT_THAT(lines[1], HasSubstr("remote bad.cc"));
  EXPECT_THAT(lines[2], HasSubstr("remote warn.c"));
  EXPECT_THAT(lines[3], HasSubstr("remote bad.cc"));
}

// The local build a failover must end in: the object is the local compile's, one warning line.
void ExpectLocalFallback(const std::string& err, const std::string& why) {
  EXPECT_THAT(err, HasSubstr("ardma-cc: warning: main.c: "));
  EXPECT_THAT(err, HasSubstr(why));
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST_F(CcFarmTest, ACompilerTheSlavesDoNotAllowIsCompiledHere) {
  StartSlave("gcc-only", "gcc");
  std::string dir = CopyProject("wordfreq", "p");
  std::string out, err;
  int rc = RunCommandSplit(absl::StrCat("cd ", dir, " && gcc -O2 -c main.c -o local.o && ",
                                        FarmEnv(), Cc(), " cc -O2 -c main.c -o farm.o"),
                           &out, &err);
  ASSERT_EQ(rc, 0) << err;
  ExpectLocalFallback(err, "compiler 'cc' is not allowed on slave gcc-only");
  EXPECT_EQ(Slurp(dir + "/local.o"), Slurp(dir + "/farm.o"));
  absl::StatusOr<FarmStatus> st = Status();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->failed, 1u);
}

TEST_F(CcFarmTest, AKilledSlaveGivesItsJobToAnother) {
  StartSlave("slow", "gcc", SlowCompilers(30));
  std::string dir = CopyProject("wordfreq", "p");
  std::string out, err;
  ASSERT_EQ(RunCommandSplit(absl::StrCat("cd ", dir, " && gcc -O2 -c table.c -o local.o"), &out),
            0);
  auto build = std::async(std::launch::async, [&] {
    return RunCommandSplit(
        absl::StrCat("cd ", dir, " && ", FarmEnv(), Cc(), " gcc -O2 -c table.c -o farm.o"), &out,
        &err);
  });
  ASSERT_TRUE(WaitRunningOn("slow"));
  StartSlave("healthy");
  // The healthy slave waits at the farm for work before the slow one dies mid-job.
  ASSERT_TRUE(testing::WaitUntil([&] {
    absl::StatusOr<FarmStatus> st = Status();
    return st.ok() && std::any_of(st->slaves.begin(), st->slaves.end(),
                                  [](const SlaveRow& s) { return s.name == "healthy"; });
  }));
  slaves_["slow"]->Kill(SIGKILL);  // mid-job: its lease ends with its connection
  EXPECT_EQ(build.get(), 0) << err;
  EXPECT_EQ(err, "");  // finished on the farm: no fallback
  EXPECT_EQ(Slurp(dir + "/local.o"), Slurp(dir + "/farm.o"));
  absl::StatusOr<FarmStatus> st = Status();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->requeued, 1u);
  EXPECT_EQ(st->finished, 1u);
  EXPECT_THAT(Slurp(root_ + "/cc.log"), HasSubstr("remote table.c"));
}

TEST_F(CcFarmTest, StoppingTheServerMidJobEndsInALocalBuild) {
  StartSlave("slow", "gcc", SlowCompilers(30));
  std::string dir = CopyProject("wordfreq", "p");
  std::string out, err;
  ASSERT_EQ(RunCommandSplit(absl::StrCat("cd ", dir, " && gcc -O2 -c main.c -o local.o"), &out), 0);
  auto build = std::async(std::launch::async, [&] {
    return RunCommandSplit(
        absl::StrCat("cd ", dir, " && ", FarmEnv(), Cc(), " gcc -O2 -c main.c -o farm.o"), &out,
        &err);
  });
  ASSERT_TRUE(WaitRunningOn("slow"));
  watcher_.reset();
  server_->Kill(SIGKILL);
  EXPECT_EQ(build.get(), 0) << err;
  ExpectLocalFallback(err, "compiling locally");
  EXPECT_EQ(Slurp(dir + "/local.o"), Slurp(dir + "/farm.o"));
}

TEST_F(CcFarmTest, NoSlaveInTimeEndsInALocalBuild) {
  std::string dir = CopyProject("wordfreq", "p");
  std::string out, err;
  int rc = RunCommandSplit(
      absl::StrCat("cd ", dir, " && gcc -O2 -c main.c -o local.o && ",
                   FarmEnv("ARDMA_CC_TIMEOUT=1"), Cc(), " gcc -O2 -c main.c -o farm.o"),
      &out, &err);
  ASSERT_EQ(rc, 0) << err;
  ExpectLocalFallback(err, "compiling locally");
  EXPECT_EQ(Slurp(dir + "/local.o"), Slurp(dir + "/farm.o"));
  absl::StatusOr<FarmStatus> st = Status();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->queued + st->running, 0u);  // the job was withdrawn
  EXPECT_EQ(st->cancelled, 1u);
}

TEST_F(CcFarmTest, LinkingAndOtherStepsRunHere) {
  std::string dir = CopyProject("wordfreq", "p");
  std::string out, err;
  int rc = RunCommandSplit(absl::StrCat("cd ", dir, " && ", FarmEnv(), Cc(),
                                        " gcc -O2 main.c table.c words.c sort.c -o wf && ",
                                        FarmEnv(), Cc(), " gcc -E main.c -o /dev/null"),
                           &out, &err);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_EQ(err, "");
  std::vector<std::string> lines = LogLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], HasSubstr("local not a compile"));
  EXPECT_THAT(lines[1], HasSubstr("local -E"));
}

}  // namespace

// As distcc: arguments that are not ardma-cc's own are the compiler's, cc's when the first one is
// an option; an unknown option is the compiler's error (its message, its exit status), and no
// compiler at all is a usage error.
TEST(CcWrapperTest, UnknownOptionsAreTheCompilersAsWithDistcc) {
  std::string out, err;
  std::string env = "ARDMA_CC_LOCAL=1 ";
  EXPECT_EQ(RunCommandSplit(env + BinDir() + "/ardma-cc --bogus-option", &out, &err), 1) << err;
  EXPECT_THAT(err, HasSubstr("unrecognized command-line option"));
  EXPECT_THAT(err, HasSubstr("--bogus-option"));
  EXPECT_EQ(RunCommandSplit(env + BinDir() + "/ardma-cc gcc --bogus-option", &out, &err), 1);
  EXPECT_THAT(err, HasSubstr("--bogus-option"));
  EXPECT_EQ(RunCommandSplit(BinDir() + "/ardma-cc", &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("ardma-cc: no compiler given\nTry 'ardma-cc --help'"));
}

// A slave whose server is not up fails at once, naming it; with --wait it says so and keeps
// trying.
TEST(CcSlaveTest, AMissingServerFailsFastUnlessToldToWait) {
  std::string ccd = BinDir() + "/ardma-ccd --server 127.0.0.1:1";
  std::string out, err;
  absl::Time start = absl::Now();
  EXPECT_EQ(RunCommandSplit(ccd, &out, &err), 1) << err;
  EXPECT_THAT(err, ::testing::HasSubstr("ardma-ccd: 127.0.0.1:1: "));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));  // not the wait of --wait (days)

  std::string log = ::ardma::testing::TempPath("ccd_wait.err");
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + ccd + " --wait 2>" + log).c_str(), nullptr);
    ::_exit(127);
  }
  auto said = [&] {
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  EXPECT_TRUE(::ardma::testing::WaitUntil(
      [&] { return said().find("waiting for it (--wait)") != std::string::npos; },
      absl::Seconds(30)))
      << said();
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), 0);  // still trying
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

}  // namespace ardma::cc
