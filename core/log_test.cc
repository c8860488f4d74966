#include "core/log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

// What one line of each level writes on stderr, with stderr a fresh file and $JOURNAL_STREAM
// set to `journal(file)` (unset if it returns "").
template <typename JournalStream>
std::vector<std::string> LinesLogged(JournalStream journal) {
  std::string path = absl::StrCat(::testing::TempDir(), "/log_test.", ::getpid());
  int file = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  EXPECT_GE(file, 0);
  std::string stream = journal(file);
  if (stream.empty()) {
    ::unsetenv("JOURNAL_STREAM");
  } else {
    ::setenv("JOURNAL_STREAM", stream.c_str(), 1);
  }
  int saved = ::dup(STDERR_FILENO);
  ::dup2(file, STDERR_FILENO);
  SetMinLogLevel(LogLevel::kDebug);
  ARDMA_LOG(kDebug, "a %s line", "debug");
  ARDMA_LOG(kInfo, "an info line");
  ARDMA_LOG(kWarning, "a warning line");
  ARDMA_LOG(kError, "an error line");
  SetMinLogLevel(LogLevel::kInfo);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(file);
  ::unsetenv("JOURNAL_STREAM");
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  std::remove(path.c_str());
  return absl::StrSplit(all.str(), '\n', absl::SkipEmpty());
}

std::string DeviceAndInode(int fd) {
  struct stat st {};
  ::fstat(fd, &st);
  return absl::StrCat(st.st_dev, ":", st.st_ino);
}

// The priority journald gives a line (systemd's rule for "<N>" prefixes on a stream), and the
// rest of the line; priority 6 (info) without a prefix.
std::pair<int, std::string> AsJournaldReadsIt(const std::string& line) {
  if (line.size() >= 3 && line[0] == '<' && line[1] >= '0' && line[1] <= '7' && line[2] == '>') {
    return {line[1] - '0', line.substr(3)};
  }
  return {6, line};
}

TEST(LogTest, OnTheJournalEachLineCarriesItsSyslogPriority) {
  std::vector<std::string> lines = LinesLogged([](int fd) { return DeviceAndInode(fd); });
  ASSERT_EQ(lines.size(), 4u);
  const std::vector<std::pair<int, std::string>> want = {{7, "D a debug line"},
                                                         {6, "I an info line"},
                                                         {4, "W a warning line"},
                                                         {3, "E an error line"}};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(AsJournaldReadsIt(lines[i]), want[i]);
}

TEST(LogTest, ElsewhereLinesAreUnchanged) {
  // No $JOURNAL_STREAM, and one naming another file (stderr redirected away from the journal).
  for (bool other : {false, true}) {
    std::vector<std::string> lines =
        LinesLogged([other](int) { return other ? DeviceAndInode(STDIN_FILENO) : ""; });
    ASSERT_EQ(lines.size(), 4u);
    const char* levels = "DIWE";
    for (size_t i = 0; i < lines.size(); ++i) {
      EXPECT_EQ(lines[i][0], levels[i]) << lines[i];
      EXPECT_EQ(AsJournaldReadsIt(lines[i]).first, 6) << lines[i];  // journald: all "info"
      EXPECT_NE(lines[i].find("Z "), std::string::npos) << "time stamp: " << lines[i];
    }
  }
}

}  // namespace
}  // namespace ardma
