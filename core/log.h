// The project's one logging choice: one line per event on stderr, with a UTC timestamp and a level.
// When stderr is the journal (systemd's $JOURNAL_STREAM names it), each line starts with its
// syslog priority instead of the time stamp ("<4>W ...", sd-daemon(3)), so `journalctl -p warning`
// finds warnings. Thread-safe (each line is written with a single write(2)). Debian's Abseil has
// no absl/log.
//
//   ARDMA_LOG(kInfo, "listening on %s", address);
#ifndef ARDMA_CORE_LOG_H_
#define ARDMA_CORE_LOG_H_

#include <string>

#include "absl/strings/str_format.h"

namespace ardma {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Lines below this level are dropped. Default kInfo; settable from $ARDMA_LOG_LEVEL (debug, info,
// warning, error) or by SetMinLogLevel.
void SetMinLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);
void LogLine(LogLevel level, const std::string& message);

}  // namespace ardma

#define ARDMA_LOG(level, ...)                                                     \
  do {                                                                            \
    if (::ardma::LogEnabled(::ardma::LogLevel::level))                            \
      ::ardma::LogLine(::ardma::LogLevel::level, ::absl::StrFormat(__VA_ARGS__)); \
  } while (0)

#endif  // ARDMA_CORE_LOG_H_
