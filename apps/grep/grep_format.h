// ardma-grep's request and batch encodings, shared by the active function (grep_functions.cc,
// which scans DFS files next to the data) and the command-line client (grep_main.cc).
//
// A request names the files (DFS paths), the patterns and options, the batch limits and the
// cursor to resume from; the answer is a batch of output records and the next cursor. The cursor
// carries all scanning state — file, byte offset, line number, selected count, trailing-context
// lines still owed, the last line output and the leading-context lines kept — so any number of
// results arrives in bounded batches, one round trip each.
#ifndef ARDMA_APPS_GREP_GREP_FORMAT_H_
#define ARDMA_APPS_GREP_GREP_FORMAT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ardma::grep {

enum class Syntax : uint8_t { kBasic = 0, kExtended = 1, kFixed = 2, kPerl = 3 };
// What is reported per file.
enum class Report : uint8_t {
  kLines = 0,           // the selected lines (and context)
  kCount = 1,           // -c
  kFilesWithMatch = 2,  // -l
  kFilesWithout = 3,    // -L
  kQuiet = 4,           // -q: stop at the first selected line anywhere
};

struct Options {
  std::vector<std::string> patterns;
  Syntax syntax = Syntax::kBasic;
  bool ignore_case = false;  // -i
  bool invert = false;       // -v
  bool word = false;         // -w
  bool line = false;         // -x
  bool spans = false;        // report match positions (-o, --color)
  Report report = Report::kLines;
  uint64_t max_count = 0;          // -m; 0: no limit
  uint32_t before = 0, after = 0;  // -B, -A
  bool text = false;               // -a: binary files are searched as text
  bool null_data = false;          // -z: lines end in NUL bytes, not newlines
  bool numbers = true;             // line numbers are wanted (-n, context); else lines skipped in
                                   // bulk are not counted and records' numbers mean nothing
  bool sizes = false;              // -T: a file's records start with its size (kSize)
};

struct Cursor {
  uint32_t file = 0;
  uint64_t offset = 0;          // of the next line to read in `file`
  uint64_t line = 1;            // its number
  uint64_t selected = 0;        // lines selected so far in `file`
  uint32_t after_owed = 0;      // trailing-context lines still to print
  uint64_t last_output = 0;     // number of the last line output in `file` (0: none)
  bool binary_checked = false;  // the file's start was checked for NUL bytes
  bool binary = false;
  std::vector<std::string> before;       // the lines just before `offset` not yet output (-B)
  std::vector<uint64_t> before_offsets;  // and where each starts in the file (-b)
  bool done = false;
};

enum class RecordKind : uint8_t {
  kSelected = 1,  // a selected line
  kContext = 2,   // a context line
  kCount = 3,     // end of a file: its selected-line count (-c, -l, -L)
  kError = 4,     // the file could not be read (message)
  kBinary = 5,    // a binary file has a selected line
  kSize = 6,      // a file's size (in `line`), before its lines (Options::sizes)
};

struct Record {
  RecordKind kind = RecordKind::kSelected;
  uint32_t file = 0;
  uint64_t line = 0;      // or the count, for kCount
  std::string_view text;  // the line without its newline, or the error message (decoded:
                          // a view into the Batch's storage)
  uint32_t code = 0;      // kError: an absl::StatusCode
  std::vector<std::pair<uint32_t, uint32_t>> spans;  // (start, length) of matches in `text`
  uint64_t offset = 0;                               // where the line starts in the file (-b)
};

struct Request {
  std::string fs;
  std::vector<std::string> files;
  // On a cluster (docs/dfs.md): the files' inode numbers, one per file, for the member that holds
  // their bytes, which opens them by number (dfs.copen); `files` then only name them. Empty: the
  // files are opened by path, on the member that holds the namespace.
  std::vector<uint64_t> inos;
  Options options;
  Cursor cursor;
  uint32_t max_records = 4096;
  uint32_t max_bytes = 1u << 20;
};

struct Batch {
  std::vector<Record> records;
  Cursor next;
  std::shared_ptr<const std::string> storage;  // what decoded records' text points into
};

std::string EncodeRequest(const Request& r);
absl::StatusOr<Request> DecodeRequest(std::string_view bytes);
std::string EncodeBatch(const Batch& b);
// The pieces of EncodeBatch, for a scanner that encodes records as it makes them: one record
// appended to `records`, then the batch from the cursor, the count and those bytes.
void AppendRecord(RecordKind kind, uint32_t file, uint64_t line, uint32_t code,
                  std::string_view text, const std::vector<std::pair<uint32_t, uint32_t>>& spans,
                  uint64_t offset, std::string* records);
std::string EncodeBatch(const Cursor& next, uint32_t count, std::string_view records);
absl::StatusOr<Batch> DecodeBatch(std::string bytes);

}  // namespace ardma::grep

#endif  // ARDMA_APPS_GREP_GREP_FORMAT_H_
