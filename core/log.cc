#include "core/log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ardma {
namespace {

LogLevel LevelFromEnvironment() {
  const char* env = std::getenv("ARDMA_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  if (std::strcmp(env, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(env, "warning") == 0) return LogLevel::kWarning;
  if (std::strcmp(env, "error") == 0) return LogLevel::kError;
  return LogLevel::kInfo;
}

// Read on every log call from any thread; relaxed is enough for a filter threshold.
std::atomic<int> min_level{static_cast<int>(LevelFromEnvironment())};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "D";
    case LogLevel::kInfo:
      return "I";
    case LogLevel::kWarning:
      return "W";
    case LogLevel::kError:
      return "E";
  }
  return "?";
}

// The syslog priority journald files a line under (sd-daemon(3)'s "<N>" prefixes).
int Priority(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 7;
    case LogLevel::kInfo:
      return 6;
    case LogLevel::kWarning:
      return 4;
    case LogLevel::kError:
      return 3;
  }
  return 6;
}

// Whether stderr is the journal's stream: systemd sets $JOURNAL_STREAM to its "device:inode"
// (systemd.exec(5)). Looked at for every line: stderr may be redirected while the process runs.
bool StderrIsJournal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (stream == nullptr) return false;
  std::pair<std::string, std::string> parts = absl::StrSplit(stream, ':');
  uint64_t dev = 0, ino = 0;
  struct stat st {};
  return absl::SimpleAtoi(parts.first, &dev) && absl::SimpleAtoi(parts.second, &ino) &&
         ::fstat(STDERR_FILENO, &st) == 0 && static_cast<uint64_t>(st.st_dev) == dev &&
         static_cast<uint64_t>(st.st_ino) == ino;
}

}  // namespace

void SetMinLogLevel(LogLevel level) { min_level.store(static_cast<int>(level)); }

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= min_level.load(std::memory_order_relaxed);
}

void LogLine(LogLevel level, const std::string& message) {
  // To the journal: its priority prefix, and no time stamp (the journal keeps its own).
  std::string line =
      StderrIsJournal()
          ? absl::StrCat("<", Priority(level), ">", LevelName(level), " ", message, "\n")
          : absl::StrCat(
                LevelName(level), " ",
                absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone()), " ",
                message, "\n");
  // One write per line so lines from different threads do not interleave.
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace ardma
