#include "apps/grep/grep_format.h"

#include <algorithm>

#include "core/status_macros.h"
#include "core/wire/byte_io.h"

namespace ardma::grep {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

void PutCursor(ByteWriter& w, const Cursor& c) {
  w.U32(c.file);
  w.U64(c.offset);
  w.U64(c.line);
  w.U64(c.selected);
  w.U32(c.after_owed);
  w.U64(c.last_output);
  w.U8(static_cast<uint8_t>((c.binary_checked ? 1 : 0) | (c.binary ? 2 : 0) | (c.done ? 4 : 0)));
  w.U32(static_cast<uint32_t>(c.before.size()));
  for (size_t i = 0; i < c.before.size(); ++i) {
    w.Bytes32(c.before[i]);
    w.U64(i < c.before_offsets.size() ? c.before_offsets[i] : 0);
  }
}

bool GetCursor(ByteReader& r, Cursor* c) {
  uint8_t bits;
  uint32_t n;
  if (!r.U32(&c->file) || !r.U64(&c->offset) || !r.U64(&c->line) || !r.U64(&c->selected) ||
      !r.U32(&c->after_owed) || !r.U64(&c->last_output) || !r.U8(&bits) || !r.U32(&n) ||
      n > 100000) {
    return false;
  }
  c->binary_checked = bits & 1;
  c->binary = bits & 2;
  c->done = bits & 4;
  c->before.clear();
  c->before_offsets.clear();
  for (uint32_t i = 0; i < n; ++i) {
    std::string_view l;
    uint64_t offset;
    if (!r.Bytes32(&l) || !r.U64(&offset)) return false;
    c->before.emplace_back(l);
    c->before_offsets.push_back(offset);
  }
  return true;
}

}  // namespace

std::string EncodeRequest(const Request& q) {
  std::string out;
  ByteWriter w(&out);
  w.Str16(q.fs);
  w.U32(static_cast<uint32_t>(q.files.size()));
  for (const std::string& f : q.files) w.Str16(f);
  const Options& o = q.options;
  w.U32(static_cast<uint32_t>(o.patterns.size()));
  for (const std::string& p : o.patterns) w.Bytes32(p);
  w.U8(static_cast<uint8_t>(o.syntax));
  w.U8(static_cast<uint8_t>((o.ignore_case ? 1 : 0) | (o.invert ? 2 : 0) | (o.word ? 4 : 0) |
                            (o.line ? 8 : 0) | (o.spans ? 16 : 0) | (o.text ? 32 : 0) |
                            (o.null_data ? 64 : 0) | (o.numbers ? 128 : 0)));
  w.U8(static_cast<uint8_t>(o.report));
  w.U8(o.sizes ? 1 : 0);
  w.U64(o.max_count);
  w.U32(o.before);
  w.U32(o.after);
  PutCursor(w, q.cursor);
  w.U32(q.max_records);
  w.U32(q.max_bytes);
  if (!q.inos.empty()) {  // (optional: a request without it opens the files by path)
    w.U32(static_cast<uint32_t>(q.inos.size()));
    for (uint64_t ino : q.inos) w.U64(ino);
  }
  return out;
}

absl::StatusOr<Request> DecodeRequest(std::string_view bytes) {
  ByteReader r(bytes);
  Request q;
  std::string_view fs;
  uint32_t nfiles, npatterns;
  if (!r.Str16(&fs) || !r.U32(&nfiles)) return absl::InvalidArgumentError("grep: bad request");
  q.fs = std::string(fs);
  for (uint32_t i = 0; i < nfiles; ++i) {
    std::string_view f;
    if (!r.Str16(&f)) return absl::InvalidArgumentError("grep: bad file list");
    q.files.emplace_back(f);
  }
  if (!r.U32(&npatterns)) return absl::InvalidArgumentError("grep: bad patterns");
  for (uint32_t i = 0; i < npatterns; ++i) {
    std::string_view p;
    if (!r.Bytes32(&p)) return absl::InvalidArgumentError("grep: bad patterns");
    q.options.patterns.emplace_back(p);
  }
  uint8_t syntax, bits, report, more_bits;
  if (!r.U8(&syntax) || !r.U8(&bits) || !r.U8(&report) || !r.U8(&more_bits) ||
      !r.U64(&q.options.max_count) ||
      !r.U32(&q.options.before) || !r.U32(&q.options.after) || syntax > 3 || report > 4) {
    return absl::InvalidArgumentError("grep: bad options");
  }
  q.options.syntax = static_cast<Syntax>(syntax);
  q.options.ignore_case = bits & 1;
  q.options.invert = bits & 2;
  q.options.word = bits & 4;
  q.options.line = bits & 8;
  q.options.spans = bits & 16;
  q.options.text = bits & 32;
  q.options.null_data = bits & 64;
  q.options.numbers = bits & 128;
  q.options.sizes = more_bits & 1;
  q.options.report = static_cast<Report>(report);
  if (!GetCursor(r, &q.cursor) || !r.U32(&q.max_records) || !r.U32(&q.max_bytes)) {
    return absl::InvalidArgumentError("grep: bad cursor");
  }
  if (!r.AtEnd()) {
    uint32_t ninos;
    if (!r.U32(&ninos) || ninos != q.files.size()) {
      return absl::InvalidArgumentError("grep: bad inode list");
    }
    q.inos.resize(ninos);
    for (uint64_t& ino : q.inos) {
      if (!r.U64(&ino)) return absl::InvalidArgumentError("grep: bad inode list");
    }
  }
  if (!r.AtEnd()) return absl::InvalidArgumentError("grep: trailing bytes");
  return q;
}

void AppendRecord(RecordKind kind, uint32_t file, uint64_t line, uint32_t code,
                  std::string_view text, const std::vector<std::pair<uint32_t, uint32_t>>& spans,
                  uint64_t offset, std::string* records) {
  ByteWriter w(records);
  w.U8(static_cast<uint8_t>(kind));
  w.U32(file);
  w.U64(line);
  w.U32(code);
  w.Bytes32(text);
  w.U64(offset);
  w.U32(static_cast<uint32_t>(spans.size()));
  for (auto [start, len] : spans) {
    w.U32(start);
    w.U32(len);
  }
}

std::string EncodeBatch(const Cursor& next, uint32_t count, std::string_view records) {
  std::string out;
  ByteWriter w(&out);
  PutCursor(w, next);
  w.U32(count);
  out.append(records);
  return out;
}

std::string EncodeBatch(const Batch& b) {
  std::string records;
  for (const Record& r : b.records) {
    AppendRecord(r.kind, r.file, r.line, r.code, r.text, r.spans, r.offset, &records);
  }
  return EncodeBatch(b.next, static_cast<uint32_t>(b.records.size()), records);
}

absl::StatusOr<Batch> DecodeBatch(std::string bytes) {
  Batch b;
  b.storage = std::make_shared<const std::string>(std::move(bytes));
  ByteReader r(*b.storage);
  uint32_t n;
  if (!GetCursor(r, &b.next) || !r.U32(&n)) return absl::DataLossError("grep: bad batch");
  b.records.reserve(std::min<uint32_t>(n, 1u << 20));
  for (uint32_t i = 0; i < n; ++i) {
    Record rec;
    uint8_t kind;
    std::string_view text;
    uint32_t nspans;
    if (!r.U8(&kind) || !r.U32(&rec.file) || !r.U64(&rec.line) || !r.U32(&rec.code) ||
        !r.Bytes32(&text) || !r.U64(&rec.offset) || !r.U32(&nspans) || kind < 1 || kind > 6) {
      return absl::DataLossError("grep: bad record");
    }
    rec.kind = static_cast<RecordKind>(kind);
    rec.text = text;
    for (uint32_t s = 0; s < nspans; ++s) {
      uint32_t start, len;
      if (!r.U32(&start) || !r.U32(&len)) return absl::DataLossError("grep: bad span");
      rec.spans.emplace_back(start, len);
    }
    b.records.push_back(std::move(rec));
  }
  if (!r.AtEnd()) return absl::DataLossError("grep: trailing bytes in batch");
  return b;
}

}  // namespace ardma::grep
