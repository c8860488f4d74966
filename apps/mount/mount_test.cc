// ardma-mount through the kernel: a random sequence of file-system calls gives the same results,
// errno values and contents on the mount and on a tmpfs directory (fixed seeds, both modes); real
// tools (tar, diff, cp -a, rsync -a, find, grep, sort, git, make, dd) give the same results as on
// tmpfs;
// two mounts see each other's closed files; files are byte-identical through the mount and
// through DfsClient. Every mount is unmounted in TearDown, also when a test fails.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/client/invoke.h"
#include "core/testing/run_command.h"
#include "core/testing/service_fixture.h"
#include "core/testing/server_process.h"
#include "core/testing/tree_snapshot.h"
#include "core/testing/wait_until.h"
#include "gtest/gtest.h"
#include "services/dfs/dfs_client.h"

extern char** environ;

namespace ardma {
namespace {

using testing::BinDir;
using testing::RunCommand;
using testing::TreeSnapshot;
namespace fsys = std::filesystem;

constexpr long kFuseSuperMagic = 0x65735546;

// Starts `ardma-mount -f` at `dir` (created); its pid, or -1.
pid_t StartMount(const std::string& dir, const std::string& server, Mode mode,
                 const std::string& extra = "") {
  fsys::create_directories(dir);
  std::string bin = fsys::absolute(BinDir()).string() + "/ardma-mount";
  std::vector<std::string> args = {bin, "-f", "--server=" + server,
                                   "--mode=" + std::string(ModeName(mode))};
  if (!extra.empty()) args.push_back(extra);
  args.push_back(dir);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  if (::posix_spawn(&pid, bin.c_str(), nullptr, nullptr, argv.data(), environ) != 0) return -1;
  return pid;
}

// Waits (up to 10 s) until `dir` is a FUSE mount.
bool WaitMounted(const std::string& dir) {
  if (testing::WaitUntil(
          [&] {
            struct statfs st;
            return ::statfs(dir.c_str(), &st) == 0 && st.f_type == kFuseSuperMagic;
          },
          absl::Seconds(10), absl::Milliseconds(50))) {
    return true;
  }
  ADD_FAILURE() << "no mount at " << dir;
  return false;
}

// Unmounts (also a mount whose server is gone) and reaps the ardma-mount process.
void Unmount(const std::string& dir, pid_t pid) {
  std::string out;
  RunCommand("fusermount3 -u " + dir + " 2>/dev/null || umount -l " + dir + " 2>/dev/null", &out);
  ::kill(pid, SIGTERM);
  int status;
  ::waitpid(pid, &status, 0);
}

class MountTest : public testing::ServiceFixture<::testing::TestWithParam<Mode>> {
 protected:
  void SetUp() override {
    if (testing::OnCluster() && GetParam() == Mode::kRdma) {
      GTEST_SKIP() << "RDMA mode works on one server; a cluster's files take active mode";
    }
    ServerOptions options = testing::TestServerOptions();
    options.memory_size = 1ull << 30;
    StartServices(options);
    base_ = (fsys::temp_directory_path() / absl::StrCat("mount_test_", ::getpid())).string();
    fsys::remove_all(base_);
    fsys::create_directories(base_);
    local_ = absl::StrCat("/dev/shm/mount_test_local_", ::getpid());
    fsys::remove_all(local_);
    fsys::create_directories(local_);
    mnt_ = Mount("m");
  }
  void TearDown() override {
    for (auto& [dir, pid] : mounts_) Unmount(dir, pid);
    fsys::remove_all(base_);
    fsys::remove_all(local_);
  }

  // Mounts the server's file system at base_/name; returns the mount point ("" on failure).
  std::string Mount(const std::string& name, const std::string& extra = "") {
    std::string dir = base_ + "/" + name;
    pid_t pid = StartMount(dir, ToolAddress(), GetParam(), extra);
    if (pid < 0) return "";
    mounts_.emplace_back(dir, pid);
    return WaitMounted(dir) ? dir : "";
  }

  std::string base_, local_, mnt_;
  std::vector<std::pair<std::string, pid_t>> mounts_;
};

INSTANTIATE_TEST_SUITE_P(Modes, MountTest, ::testing::Values(Mode::kActive, Mode::kRdma),
                         [](const auto& info) { return std::string(ModeName(info.param)); });

// One file-system call on a root; what it returned (and read), for comparing two roots.
std::string Apply(const std::string& root, int op, const std::string& a, const std::string& b,
                  uint32_t n, const std::string& data) {
  std::string pa = root + "/" + a, pb = root + "/" + b;
  auto err = [](int rc) { return rc < 0 ? absl::StrCat("errno ", errno) : std::string("ok"); };
  switch (op) {
    case 0: {  // create exclusive and write
      int fd = ::open(pa.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0640);
      if (fd < 0) return err(fd);
      ssize_t w = ::write(fd, data.data(), data.size());
      ::close(fd);
      return absl::StrCat("wrote ", w);
    }
    case 1: {  // pwrite at an offset (may leave a hole)
      int fd = ::open(pa.c_str(), O_WRONLY);
      if (fd < 0) return err(fd);
      ssize_t w = ::pwrite(fd, data.data(), data.size(), n % 200000);
      ::close(fd);
      return w < 0 ? err(-1) : absl::StrCat("wrote ", w);
    }
    case 2: {  // read the whole file
      int fd = ::open(pa.c_str(), O_RDONLY);
      if (fd < 0) return err(fd);
      std::string all;
      char buf[65536];
      ssize_t r;
      while ((r = ::read(fd, buf, sizeof(buf))) > 0) all.append(buf, static_cast<size_t>(r));
      ::close(fd);
      if (r < 0) return err(-1);
      return absl::StrCat("read ", all.size(), " ", std::hash<std::string>()(all));
    }
    case 3:
      return err(::truncate(pa.c_str(), n % 100000));
    case 4:
      return err(::mkdir(pa.c_str(), 0750));
    case 5:
      return err(::rmdir(pa.c_str()));
    case 6:
      return err(::unlink(pa.c_str()));
    case 7:
      return err(::rename(pa.c_str(), pb.c_str()));
    case 8:
      return err(::symlink(b.c_str(), pa.c_str()));
    case 9: {
      char buf[4096];
      ssize_t r = ::readlink(pa.c_str(), buf, sizeof(buf));
      return r < 0 ? err(-1) : std::string(buf, static_cast<size_t>(r));
    }
    case 10: {
      struct stat st;
      if (::lstat(pa.c_str(), &st) != 0) return err(-1);
      // (a directory's size is file-system specific)
      return absl::StrCat(st.st_mode, " ", S_ISDIR(st.st_mode) ? 0 : st.st_size);
    }
    case 11:
      return err(::chmod(pa.c_str(), 0600 + (n % 0100)));
    case 12: {
      struct timespec t[2] = {{1000000000 + n % 1000, 0}, {1000000000 + n % 1000, 0}};
      if (::utimensat(AT_FDCWD, pa.c_str(), t, AT_SYMLINK_NOFOLLOW) != 0) return err(-1);
      struct stat st;
      ::lstat(pa.c_str(), &st);
      return absl::StrCat("mtime ", st.st_mtim.tv_sec);
    }
    case 13: {  // list a directory
      DIR* d = ::opendir(pa.c_str());
      if (d == nullptr) return err(-1);
      std::vector<std::string> names;
      while (dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
      ::closedir(d);
      std::sort(names.begin(), names.end());
      std::string out;
      for (const std::string& s : names) absl::StrAppend(&out, s, "/");
      return out;
    }
    case 14: {  // rename without replacing
      int rc = ::renameat2(AT_FDCWD, pa.c_str(), AT_FDCWD, pb.c_str(), RENAME_NOREPLACE);
      return err(rc);
    }
  }
  return "";
}

TEST_P(MountTest, RandomCallsMatchTmpfs) {
  ASSERT_FALSE(mnt_.empty());
  const std::vector<std::string> names = {"a", "b", "c", "d/a", "d/b", "d/e/f", "d", "d/e", "x/y"};
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    for (int i = 0; i < (GetParam() == Mode::kActive ? 600 : 200); ++i) {
      int op = static_cast<int>(rng() % 15);
      const std::string& a = names[rng() % names.size()];
      const std::string& b = names[rng() % names.size()];
      uint32_t n = rng();
      std::string data(rng() % (rng() % 8 == 0 ? 300000 : 3000), '\0');
      for (char& c : data) c = static_cast<char>('a' + rng() % 26);
      std::string want = Apply(local_, op, a, b, n, data);
      std::string got = Apply(mnt_, op, a, b, n, data);
      if (getenv("MOUNT_TEST_TRACE")) {
        fprintf(stderr, "step %d op %d %s %s n=%u len=%zu -> %s\n", i, op, a.c_str(), b.c_str(), n,
                data.size(), want.c_str());
      }
      ASSERT_EQ(got, want) << "seed " << seed << " step " << i << " op " << op << " " << a << " "
                           << b;
    }
    EXPECT_EQ(TreeSnapshot(mnt_, {.root = false}), TreeSnapshot(local_, {.root = false}));
    for (const std::string& dir : {mnt_, local_}) {  // start the next seed empty
      for (const auto& e : fsys::directory_iterator(dir)) fsys::remove_all(e.path());
    }
  }
}

// Real tools on the mount, each beside the same run on tmpfs.
TEST_P(MountTest, RealToolsBehaveAsOnTmpfs) {
  ASSERT_FALSE(mnt_.empty());
  std::string out;
  std::string tar = base_ + "/linux.tar";
  ASSERT_EQ(RunCommand("tar -C /usr/include -cf " + tar + " linux", &out), 0) << out;
  for (const std::string& root : {mnt_, local_}) {
    SCOPED_TRACE(root);
    ASSERT_EQ(RunCommand("tar -C " + root + " -xf " + tar, &out), 0) << out;
    ASSERT_EQ(RunCommand("cp -a " + root + "/linux " + root + "/copy", &out), 0) << out;
    ASSERT_EQ(RunCommand("diff -r /usr/include/linux " + root + "/copy", &out), 0) << out;
    ASSERT_EQ(RunCommand("rsync -a " + root + "/linux/ " + root + "/synced", &out), 0) << out;
  }
  std::string mine, theirs;
  ASSERT_EQ(
      RunCommand("cd " + mnt_ + " && find linux | sort && grep -rc ioctl linux | sort", &mine), 0);
  ASSERT_EQ(
      RunCommand("cd " + local_ + " && find linux | sort && grep -rc ioctl linux | sort", &theirs),
      0);
  EXPECT_EQ(mine, theirs);
  for (const char* tree : {"/copy", "/synced"}) {
    EXPECT_EQ(TreeSnapshot(mnt_ + tree, {.mtimes = true}),
              TreeSnapshot(local_ + tree, {.mtimes = true}))
        << tree;
  }
  if (GetParam() != Mode::kActive) return;  // the rest is bulk work: once is enough
  // sort of a 100 MB file, sequential writes and reads with checksums.
  ASSERT_EQ(RunCommand("seq 1 12000000 | shuf --random-source=/dev/zero > " + local_ +
                           "/numbers && cp " + local_ + "/numbers " + mnt_ + "/numbers",
                       &out),
            0)
      << out;
  ASSERT_EQ(RunCommand("sort -n " + mnt_ + "/numbers > " + mnt_ + "/sorted && sort -n " + local_ +
                           "/numbers > " + local_ + "/sorted && cmp " + mnt_ + "/sorted " + local_ +
                           "/sorted",
                       &out),
            0)
      << out;
  ASSERT_EQ(RunCommand("dd if=/dev/urandom of=" + local_ +
                           "/blob bs=1M count=64 status=none && "
                           "dd if=" +
                           local_ + "/blob of=" + mnt_ +
                           "/blob bs=1M status=none && "
                           "sha256sum < " +
                           local_ + "/blob > " + base_ +
                           "/a && "
                           "dd if=" +
                           mnt_ + "/blob bs=1M status=none | sha256sum > " + base_ +
                           "/b && "
                           "cmp " +
                           base_ + "/a " + base_ + "/b",
                       &out),
            0)
      << out;
  // git and make.
  ASSERT_EQ(
      RunCommand(
          "cd " + mnt_ +
              " && mkdir repo && cd repo && git init -q && "
              "git config user.email t@example.org && git config user.name t && "
              "cp -r ../linux/usb . && git add -A && git commit -qm first && "
              "echo change >> usb/ch9.h && git commit -qam second && git log --oneline | wc -l",
          &out),
      0)
      << out;
  EXPECT_EQ(out, "2\n");
  ASSERT_EQ(
      RunCommand(
          "cd " + mnt_ + "/repo && git status --porcelain && git fsck --no-progress --no-dangling",
          &out),
      0)
      << out;
  EXPECT_EQ(out, "");
  ASSERT_EQ(RunCommand(
                "mkdir -p " + mnt_ + "/prog && cd " + mnt_ +
                    "/prog && "
                    "printf 'int twice(int x) { return 2 * x; }\\n' > twice.c && "
                    "printf 'int twice(int);\\nint main(void) { return twice(21) == 42 ? 0 : 1; "
                    "}\\n' > main.c && "
                    "printf 'prog: main.o twice.o\\n\\tcc -o prog main.o twice.o\\n' > Makefile && "
                    "make -s && ./prog",
                &out),
            0)
      << out;
}

TEST_P(MountTest, TwoMountsSeeEachOthersClosedFiles) {
  ASSERT_FALSE(mnt_.empty());
  std::string other = Mount("other");
  ASSERT_FALSE(other.empty());
  { std::ofstream(mnt_ + "/shared") << "written by the first mount\n"; }
  std::ifstream in(other + "/shared");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "written by the first mount");
  fsys::create_directories(other + "/dir/sub");
  EXPECT_TRUE(fsys::is_directory(mnt_ + "/dir/sub"));
}

TEST_P(MountTest, FilesAreByteIdenticalThroughTheMountAndTheClient) {
  ASSERT_FALSE(mnt_.empty());
  std::string data(3u << 20, '\0');
  std::mt19937 rng(5);
  for (char& c : data) c = static_cast<char>(rng());
  { std::ofstream(mnt_ + "/through-mount", std::ios::binary) << data; }
  dfs::DfsClient fs(servers(), Mode::kActive);
  EXPECT_EQ(*fs.ReadFile("/through-mount"), data);
  ASSERT_TRUE(fs.WriteFile("/through-client", data).ok());
  std::ifstream in(mnt_ + "/through-client", std::ios::binary);
  std::string back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(back, data);
  // The tools see the same bytes: ardma-cp down from the DFS, ardma-grep on the server.
  std::string out, server = ToolAddress();
  std::string bin = fsys::absolute(BinDir()).string();
  ASSERT_EQ(RunCommand(bin + "/ardma-cp --server=" + server + " dfs:/through-mount " + base_ +
                           "/down && cmp " + base_ + "/down " + mnt_ + "/through-mount",
                       &out),
            0)
      << out;
  { std::ofstream(mnt_ + "/text") << "alpha\nbeta\nalphabet\n"; }
  ASSERT_EQ(RunCommand(bin + "/ardma-grep --server=" + server + " -c alpha dfs:/text", &out), 0);
  EXPECT_EQ(out, "2\n");
  ASSERT_EQ(RunCommand(bin + "/ardma-cp --server=" + server + " " + base_ +
                           "/down dfs:/up && cmp " + base_ + "/down " + mnt_ + "/up",
                       &out),
            0)
      << out;
  // Errors keep their meaning: hard links and special files are refused, a full name is too long.
  EXPECT_NE(::link((mnt_ + "/through-client").c_str(), (mnt_ + "/hard").c_str()), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::mkfifo((mnt_ + "/fifo").c_str(), 0644), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::mkdir((mnt_ + "/" + std::string(256, 'n')).c_str(), 0755), 0);
  EXPECT_EQ(errno, ENAMETOOLONG);
}

// SIGTERM (and SIGINT) unmount before the process exits: no stale mount is left.
// Reads a whole file through the mount: its bytes, or the errno that failed it.
std::pair<std::string, int> ReadThrough(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return {"", errno};
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return {"", e};
    }
    if (n == 0) break;
    out.append(buf, n);
  }
  ::close(fd);
  return {out, 0};
}

// On a cluster a member that is down fails only the files whose bytes it holds, with EIO and
// not a hang; the rest of the mount works on; once the member is back (with its memory: it
// keeps it in a file, as ardmad --memory-file does) its files read again, without remounting.
TEST_P(MountTest, OnAClusterAMemberThatIsDownFailsOnlyItsFilesAndTheMountRecovers) {
  if (!testing::OnCluster()) GTEST_SKIP() << "a cluster's members hold the bytes";
  ServerOptions options = testing::TestServerOptions();
  options.memory_size = 256u << 20;
  options.memory_file = local_ + "/member";
  StartServices(options);
  std::string mnt = Mount("members");
  ASSERT_FALSE(mnt.empty());
  dfs::DfsClient fs(servers(), Mode::kActive);
  auto map = [&] { return static_cast<cluster::Cluster*>(servers())->map(); };
  const std::string ns = map()->Owner(dfs::NamespaceSlot("default"));
  std::string on_down, elsewhere, down;
  for (int i = 0; i < 100 && (on_down.empty() || elsewhere.empty()); ++i) {
    std::string path = absl::StrCat("/f", i);
    ASSERT_TRUE(fs.WriteFile(path, absl::StrCat("file ", i)).ok());
    std::string holder = map()->Owner(dfs::DataSlot("default", fs.Lookup(path)->ino));
    if (holder == ns) continue;  // (the namespace's member stays up)
    if (down.empty()) down = holder;
    if (holder == down && on_down.empty()) on_down = path;
    if (holder != down && elsewhere.empty()) elsewhere = path;
  }
  ASSERT_FALSE(on_down.empty());
  ASSERT_FALSE(elsewhere.empty());
  const int down_index = testing::ClusterFixture::IndexOf(down);
  cluster_->server(down_index).server().Stop();

  absl::Time start = absl::Now();
  EXPECT_EQ(ReadThrough(mnt + on_down).second, EIO);
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << "a member that is down must not hang a call";
  auto [bytes, error] = ReadThrough(mnt + elsewhere);
  EXPECT_EQ(error, 0);
  EXPECT_EQ(bytes, absl::StrCat("file ", elsewhere.substr(2)));
  EXPECT_TRUE(fsys::exists(mnt + on_down));  // its name is in the namespace, which is up

  ASSERT_TRUE(cluster_->Restart(down_index).ok());
  EXPECT_TRUE(testing::WaitUntil(
      [&] { return ReadThrough(mnt + on_down).first == absl::StrCat("file ", on_down.substr(2)); },
      absl::Seconds(30)))
      << "the mount did not recover";
}

TEST_P(MountTest, SigtermUnmountsCleanly) {
  ASSERT_FALSE(mnt_.empty());
  auto [dir, pid] = mounts_.back();
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  struct statfs st;
  ASSERT_EQ(::statfs(dir.c_str(), &st), 0);
  EXPECT_NE(st.f_type, kFuseSuperMagic);  // the directory is a plain directory again
  mounts_.pop_back();
}

// A server that restarts under a mount: calls while it is gone fail (EIO) instead of hanging,
// and the mount serves again, with the file system's data, once it is back.
TEST(MountRestartTest, AServerRestartFailsCallsCleanlyAndIsReconnected) {
  std::string heap = testing::TempPath("mount_restart.heap");
  std::string dir = testing::TempPath("mount_restart_mnt");
  auto first = std::make_unique<testing::ServerProcess>(
      std::vector<std::string>{"--memory-file", heap, "--memory", "64M"});
  ASSERT_FALSE(first->address().empty());
  std::string address = first->address();
  pid_t pid = StartMount(dir, address, Mode::kActive, "-oattr_timeout=0,entry_timeout=0");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitMounted(dir));
  { std::ofstream(dir + "/kept") << "survives a restart\n"; }
  first->Kill(SIGKILL);
  absl::Time start = absl::Now();
  struct stat st;
  EXPECT_NE(::stat((dir + "/kept").c_str(), &st), 0);
  EXPECT_EQ(errno, EIO);
  EXPECT_LT(absl::Now() - start, absl::Seconds(60));  // failed, not hung
  auto second = std::make_unique<testing::ServerProcess>(
      std::vector<std::string>{"--memory-file", heap, "--memory", "64M", "--listen", address});
  ASSERT_EQ(second->address(), address);
  std::string line;
  testing::WaitUntil(  // reconnected on a later call
      [&] {
        std::ifstream in(dir + "/kept");
        std::getline(in, line);
        return !line.empty();
      },
      absl::Seconds(10), absl::Milliseconds(100));
  EXPECT_EQ(line, "survives a restart");
  Unmount(dir, pid);
}

}  // namespace
}  // namespace ardma
