// The "grep" active-code library: grep.scan reads DFS files next to the data (Context::View, no
// copy) and answers one bounded batch of output records per call (grep_format.h).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "apps/grep/grep_format.h"
#include "apps/grep/grep_matcher.h"
#include "apps/grep/literal_search.h"
#include "core/active/function_table.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/dfs/dfs_format.h"
#include "services/dfs/dfs_reader.h"

namespace ardma::grep {
namespace {

constexpr uint64_t kBinaryProbe = 32 * 1024;  // GNU grep looks for NUL bytes in its first buffer

class Scanner {
 public:
  Scanner(Context& ctx, const Request& req, const Matcher& matcher)
      : ctx_(ctx), req_(req), opt_(req.options), matcher_(matcher), c_(req.cursor) {}

  // The encoded batch (grep_format.h).
  absl::StatusOr<std::string> Run() {
    while (!c_.done && c_.file < req_.files.size()) {
      if (Full()) break;
      ARDMA_ASSIGN_OR_RETURN(bool finished, ScanFile());
      if (!finished) break;  // the batch filled up inside the file
      NextFile();
    }
    if (c_.file >= req_.files.size()) c_.done = true;
    return EncodeBatch(c_, count_, records_);
  }

 private:
  bool Full() const { return count_ >= req_.max_records || records_.size() >= req_.max_bytes; }

  // Records are encoded as they are made: no copy of each line is kept.
  void Add(RecordKind kind, uint64_t line, uint32_t code, std::string_view text,
           const std::vector<std::pair<uint32_t, uint32_t>>& spans, uint64_t offset) {
    AppendRecord(kind, c_.file, line, code, text, spans, offset, &records_);
    ++count_;
  }

  void NextFile() {
    uint32_t next = c_.file + 1;
    c_ = Cursor{};
    c_.file = next;
  }

  // The file's inode, or a kError record (and nullopt).
  absl::StatusOr<std::optional<uint64_t>> OpenFile() {
    std::string args;
    wire::ByteWriter w(&args);
    w.Str16(req_.fs);
    if (!req_.inos.empty()) {
      // On a cluster, on the member that holds the file's bytes: its content inode there.
      w.U64(req_.inos[c_.file]);
      absl::StatusOr<std::string> at = ctx_.Call("dfs.copen", args);
      if (absl::IsNotFound(at.status())) {  // removed since the client listed it
        Add(RecordKind::kError, 0, static_cast<uint32_t>(at.status().code()),
            dfs::ErrnoText(at.status()), {}, 0);
        return std::nullopt;
      }
      if (!at.ok()) return at.status();
      wire::ByteReader r(*at);
      uint64_t content;
      if (!r.U64(&content) || !r.AtEnd()) return absl::DataLossError("grep: bad dfs.copen answer");
      return content;
    }
    w.Str16(req_.files[c_.file]);
    absl::StatusOr<std::string> opened = ctx_.Call("dfs.open", args);  // (links followed)
    if (!opened.ok()) {
      absl::StatusCode code = opened.status().code();
      if (code != absl::StatusCode::kNotFound && code != absl::StatusCode::kFailedPrecondition &&
          code != absl::StatusCode::kInvalidArgument) {
        return opened.status();  // a real failure, not a bad operand
      }
      Add(RecordKind::kError, 0, static_cast<uint32_t>(code), dfs::ErrnoText(opened.status()), {},
          0);
      // A directory opens and then fails to read, for GNU grep: -c and -L still report it.
      if (dfs::ErrnoOf(opened.status()) == EISDIR) Summary();
      return std::nullopt;
    }
    // sb:u64 stat remote:u8
    if (opened->size() < 9) return absl::DataLossError("grep: bad dfs.open answer");
    ARDMA_ASSIGN_OR_RETURN(dfs::Stat st, dfs::DecodeStat(std::string_view(*opened).substr(
                                             8, opened->size() - 9)));
    if (opened->back() != 0) {
      // A file whose bytes are on another member of the cluster: the client sends it there.
      absl::Status elsewhere = absl::FailedPreconditionError(
          "its bytes are on another member of the cluster (grep it with the cluster's address)");
      Add(RecordKind::kError, 0, static_cast<uint32_t>(elsewhere.code()),
          dfs::ErrnoText(elsewhere), {}, 0);
      return std::nullopt;
    }
    return st.ino;
  }

  void Emit(RecordKind kind, uint64_t line, std::string_view text,
            const std::vector<std::pair<uint32_t, uint32_t>>& spans = {}, uint64_t offset = 0) {
    Add(kind, line, 0, text, spans, offset);
    c_.last_output = line;
  }

  // A context line; with -v and --color its matches are marked too (GNU's mc= colour).
  void ContextLine(uint64_t line, std::string_view text, uint64_t offset) {
    std::vector<std::pair<uint32_t, uint32_t>> spans;
    if (opt_.spans && opt_.invert) matcher_.Matches(text, &spans);
    Emit(RecordKind::kContext, line, text, spans, offset);
  }

  // One line: select it or not, output it or its context. Returns false when the file is done
  // (-l, -q, -m with no context owed, binary).
  bool Line(std::string_view text, uint64_t offset) {
    uint64_t n = c_.line;
    bool limited = opt_.max_count != 0 && c_.selected >= opt_.max_count;
    if (limited) {
      // Past -m: only the trailing context of the last selected line.
      if (c_.after_owed == 0 || opt_.report != Report::kLines) return false;
      ContextLine(n, text, offset);
      --c_.after_owed;
      return c_.after_owed > 0;
    }
    std::vector<std::pair<uint32_t, uint32_t>> spans;
    bool want_spans = opt_.spans && !opt_.invert && opt_.report == Report::kLines;
    bool matched = matcher_.Matches(text, want_spans ? &spans : nullptr);
    bool selected = matched != opt_.invert;
    if (selected) {
      ++c_.selected;
      switch (opt_.report) {
        case Report::kQuiet:
          Emit(RecordKind::kCount, 1, "");
          c_.done = true;
          return false;
        case Report::kFilesWithMatch:
        case Report::kFilesWithout:
          Emit(RecordKind::kCount, 1, "");  // (-L lists only files whose count is 0)
          return false;
        case Report::kCount:
          return opt_.max_count == 0 || c_.selected < opt_.max_count;
        case Report::kLines:
          break;
      }
      if (c_.binary) {
        Emit(RecordKind::kBinary, n, "");
        return false;
      }
      for (size_t i = 0; i < c_.before.size(); ++i) {
        ContextLine(n - c_.before.size() + i, c_.before[i],
                    i < c_.before_offsets.size() ? c_.before_offsets[i] : 0);
      }
      c_.before.clear();
      c_.before_offsets.clear();
      Emit(RecordKind::kSelected, n, text, spans, offset);
      c_.after_owed = opt_.after;
      return opt_.max_count == 0 || c_.selected < opt_.max_count || c_.after_owed > 0;
    }
    if (opt_.report != Report::kLines || c_.binary) return true;
    if (c_.after_owed > 0) {
      ContextLine(n, text, offset);
      --c_.after_owed;
    } else if (opt_.before > 0) {
      c_.before.emplace_back(text);
      c_.before_offsets.push_back(offset);
      if (c_.before.size() > opt_.before) {
        c_.before.erase(c_.before.begin());
        c_.before_offsets.erase(c_.before_offsets.begin());
      }
    }
    return true;
  }

  // Whether the lines before the next match can be skipped unseen: nothing is owed to them
  // (no -v, no leading or pending trailing context, a binary file still needs its first match).
  bool Skippable() const {
    return !opt_.invert && !opt_.null_data && opt_.before == 0 && c_.after_owed == 0 &&
           !(opt_.max_count != 0 && c_.selected >= opt_.max_count);
  }

  // Scans the cursor's file from its offset. True when the file is finished.
  absl::StatusOr<bool> ScanFile() {
    ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> ino, OpenFile());
    if (!ino) return true;
    absl::StatusOr<dfs::FileReader> file = dfs::FileReader::Open(ctx_, *ino);
    if (absl::IsNotFound(file.status())) return true;  // removed since: nothing to scan
    if (!file.ok()) return file.status();
    std::string scratch, carry;
    const char eol = opt_.null_data ? '\0' : '\n';
    if (!c_.binary_checked) {
      c_.binary_checked = true;
      if (opt_.sizes) Add(RecordKind::kSize, file->size(), 0, "", {}, 0);
      // -a and -z search every file as text.
      for (uint64_t off = 0;
           !opt_.text && !opt_.null_data && off < std::min(file->size(), kBinaryProbe);) {
        ARDMA_ASSIGN_OR_RETURN(std::string_view chunk, file->Chunk(off, &scratch));
        chunk = chunk.substr(0, std::min<uint64_t>(chunk.size(), kBinaryProbe - off));
        if (chunk.find('\0') != std::string_view::npos) c_.binary = true;
        off += chunk.size();
      }
    }
    bool going = true;
    uint64_t off = c_.offset;
    uint64_t carry_offset = 0;  // where the carried line starts
    while (going && off < file->size()) {
      if (Full()) {
        c_.offset = off;
        return false;
      }
      ARDMA_ASSIGN_OR_RETURN(std::string_view chunk, file->Chunk(off, &scratch));
      size_t pos = 0;
      while (going && pos < chunk.size()) {
        if (carry.empty() && Skippable()) {
          // Jump to the next line that may match; count the lines jumped over.
          size_t last_nl = chunk.rfind('\n');
          if (last_nl == std::string_view::npos || last_nl < pos) goto line_by_line;
          std::string_view lines = chunk.substr(0, last_nl + 1);
          size_t hit = matcher_.NextCandidate(lines, pos);
          size_t line_start = hit == std::string_view::npos
                                  ? lines.size()
                                  : (hit == 0 ? 0 : lines.rfind('\n', hit - 1) + 1);
          if (line_start < pos) line_start = pos;
          if (opt_.numbers) c_.line += CountNewlines(lines.substr(pos, line_start - pos));
          pos = line_start;
          if (pos >= lines.size()) continue;  // the rest of the chunk is a partial line
        }
      line_by_line:
        size_t nl = chunk.find(eol, pos);
        if (nl == std::string_view::npos) {  // the line goes on in the next block
          if (carry.empty()) carry_offset = off + pos;
          carry.append(chunk.substr(pos));
          pos = chunk.size();
          break;
        }
        std::string_view line = chunk.substr(pos, nl - pos);
        if (!carry.empty()) {
          carry.append(line);
          going = Line(carry, carry_offset);
          carry.clear();
        } else {
          going = Line(line, off + pos);
        }
        ++c_.line;
        pos = nl + 1;
        if (going && Full()) {
          c_.offset = off + pos;
          return false;
        }
      }
      off += pos;  // carried bytes count as read: the line completes in the next chunk
    }
    if (going && !carry.empty()) {  // a last line without a newline
      going = Line(carry, carry_offset);
      ++c_.line;
    }
    Summary();
    return true;
  }

  // The file is done: its summary (-c's count, -L's name).
  void Summary() {
    if (opt_.report == Report::kCount ||
        (opt_.report == Report::kFilesWithout && c_.selected == 0)) {
      Emit(RecordKind::kCount, c_.selected, "");
    }
  }

  Context& ctx_;
  const Request& req_;
  const Options& opt_;
  const Matcher& matcher_;
  Cursor c_;
  std::string records_;  // encoded
  uint32_t count_ = 0;
};

absl::StatusOr<std::string> Scan(Context& ctx, std::string_view args) {
  ARDMA_ASSIGN_OR_RETURN(Request req, DecodeRequest(args));
  ARDMA_RETURN_IF_ERROR(dfs::CheckFsName(req.fs));
  ARDMA_ASSIGN_OR_RETURN(Matcher matcher, Matcher::Compile(req.options));
  req.max_records = std::clamp<uint32_t>(req.max_records, 1, 1u << 20);
  req.max_bytes = std::clamp<uint32_t>(req.max_bytes, 1024, 32u << 20);
  Scanner scanner(ctx, req, matcher);
  return scanner.Run();
}

}  // namespace
}  // namespace ardma::grep

ARDMA_ACTIVE_LIBRARY(grep, {"grep.scan", &ardma::grep::Scan});
