#include "services/dfs/dfs_content.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/memory/heap.h"
#include "core/slots.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/dfs/dfs.h"
#include "services/dht/dht_format.h"
#include "services/slot_check.h"

namespace ardma::dfs {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

// ---- The content member's records ----

// (Table and root names are "dfd" / "dfo" and the file system's name: within the DHT's 43 bytes.)
std::string DataTable(std::string_view fs) { return absl::StrCat("dfd.", ToAbsl(fs)); }
std::string OrphanTable(std::string_view fs) { return absl::StrCat("dfo.", ToAbsl(fs)); }

std::string TableArgs(std::string_view table) {
  std::string out;
  dht::EncodeTarget(dht::Target{.name = table, .unfenced = true}, &out);
  return out;
}

std::string InoKey(uint64_t ino) {
  std::string key(8, '\0');
  std::memcpy(key.data(), &ino, 8);
  return key;
}

// The content side of file system `name` on this member: its superblock (files and blocks are
// counted there) and its table of contents. Fs's root is 0: it has no directories.
absl::StatusOr<Fs> OpenDataFs(Context& ctx, std::string_view name) {
  ARDMA_RETURN_IF_ERROR(CheckFsName(name));
  Fs fs;
  fs.name = std::string(name);
  fs.table = DataTable(name);
  const std::string root_name = absl::StrCat("dfd:", ToAbsl(name));
  ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> sb, heap::FindRoot(ctx, root_name));
  if (!sb) {
    ARDMA_ASSIGN_OR_RETURN(uint64_t mine, heap::Allocate(ctx, kSuperBytes));
    char b[kSuperBytes] = {};
    std::memcpy(b, &kSuperMagic, 8);
    absl::Status written = ctx.Write(mine, std::string_view(b, sizeof(b)));
    absl::StatusOr<uint64_t> won = written.ok() ? heap::GetOrCreateRoot(ctx, root_name, mine)
                                                : absl::StatusOr<uint64_t>(written);
    if (!won.ok() || *won != mine) heap::Free(ctx, mine).IgnoreError();
    if (!won.ok()) return won.status();
    sb = *won;
  }
  fs.sb = *sb;
  return fs;
}

// The content inode of file `ino`, if this member has it.
absl::StatusOr<std::optional<uint64_t>> FindContent(Context& ctx, const Fs& data, uint64_t ino) {
  absl::StatusOr<std::string> got =
      ctx.Call("dht.get", TableArgs(data.table) + dht::EncodeKeyArgs(InoKey(ino)));
  if (absl::IsNotFound(got.status())) return std::nullopt;  // no table yet
  if (!got.ok()) return got.status();
  ARDMA_ASSIGN_OR_RETURN(dht::Reply reply, dht::DecodeReply(*got, dht::ReplyKind::kFlagAndValue));
  if (!reply.flag) return std::nullopt;
  if (!reply.value.has_value() || reply.value->size() != 8) {
    return absl::DataLossError("dfs: bad content record");
  }
  uint64_t at;
  std::memcpy(&at, reply.value->data(), 8);
  return at;
}

absl::StatusOr<uint64_t> NeedContent(Context& ctx, const Fs& data, uint64_t ino) {
  ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> at, FindContent(ctx, data, ino));
  if (!at) return absl::NotFoundError("dfs: the opened file was removed");
  return *at;
}

absl::Status SetRecord(Context& ctx, const Fs& data, uint64_t ino, std::optional<uint64_t> at) {
  absl::StatusOr<std::string> done =
      at ? ctx.Call("dht.put", TableArgs(data.table) +
                                   dht::EncodePutArgs(InoKey(ino), InoKey(*at)))
         : ctx.Call("dht.remove", TableArgs(data.table) + dht::EncodeKeyArgs(InoKey(ino)));
  if (!done.ok()) return done.status();
  return dht::DecodeReply(*done, dht::ReplyKind::kFlag).status();
}

// The state of content inode `at`, read when no writer is at it.
absl::StatusOr<ContentState> StateOf(Context& ctx, uint64_t at) {
  for (int attempt = 0; attempt < kMaxRetries; ++attempt) {
    ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, at));
    if ((n.gen & 1) == 0) {
      return ContentState{n.size, static_cast<uint64_t>(n.mtime), n.gen};
    }
    ARDMA_RETURN_IF_ERROR(ctx.Backoff(attempt));
  }
  return absl::AbortedError("dfs: the file kept changing");
}

void EncodeState(const ContentState& s, std::string* out) {
  ByteWriter w(out);
  w.U64(s.size);
  w.U64(s.mtime_ns);
  w.U64(s.gen);
}

bool ReadState(ByteReader& r, ContentState* s) {
  return r.U64(&s->size) && r.U64(&s->mtime_ns) && r.U64(&s->gen);
}

absl::StatusOr<ContentState> DecodeState(std::string_view bytes) {
  ByteReader r(bytes);
  ContentState s;
  if (!ReadState(r, &s) || !r.AtEnd()) return absl::DataLossError("dfs: bad content state");
  return s;
}

std::string StateResult(const ContentState& s) {
  std::string out;
  EncodeState(s, &out);
  return out;
}

// A content function's first arguments: the file system and the file, on the member that serves
// the file's data slot.
struct ContentRequest {
  explicit ContentRequest(std::string_view args) : r(args) {}
  ByteReader r;
  std::string_view fs_name;
  uint64_t ino = 0;
  Fs data;

  absl::Status Parse(Context& ctx, bool write) {
    if (!r.Str16(&fs_name) || !r.U64(&ino)) {
      return absl::InvalidArgumentError("dfs: bad content arguments");
    }
    ARDMA_RETURN_IF_ERROR(CheckSlotServed(ctx, DataSlot(fs_name, ino), write));
    ARDMA_ASSIGN_OR_RETURN(data, OpenDataFs(ctx, fs_name));
    return absl::OkStatus();
  }
};

// Frees content inode `at` and its record.
absl::Status Discard(Context& ctx, const Fs& data, uint64_t ino, uint64_t at) {
  ARDMA_RETURN_IF_ERROR(SetRecord(ctx, data, ino, std::nullopt));
  Locks locks(ctx);
  ARDMA_RETURN_IF_ERROR(locks.Take({at + kInLock}));  // no writer is half-way through it
  ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, at));
  ARDMA_RETURN_IF_ERROR(locks.Release());
  return FreeInode(ctx, data, n);
}

// Sends the state of file `ino` to the member that holds its namespace.
absl::Status SyncNamespace(Context& ctx, std::string_view fs, uint64_t ino,
                           const ContentState& state) {
  std::string args;
  ByteWriter w(&args);
  w.Str16(fs);
  w.U64(ino);
  EncodeState(state, &args);
  uint32_t slot = NamespaceSlot(fs);
  absl::Status served = CheckSlotServed(ctx, slot, /*write=*/true);
  if (served.ok()) return content_functions::Sync(ctx, args).status();
  if (!slots::RedirectOf(served)) return served;
  return ctx.CallPeer(PeerTarget::Slot(slot), "dfs.csync", args).status();
}

struct Named {
  std::string_view name;
  absl::StatusOr<std::string> (*fn)(Context&, std::string_view);
};
constexpr Named kContentFunctions[] = {
    {"dfs.ccreate", &content_functions::Create},  {"dfs.cread", &content_functions::Read},
    {"dfs.cwrite", &content_functions::Write},    {"dfs.ctruncate", &content_functions::Truncate},
    {"dfs.cfree", &content_functions::Free},      {"dfs.ccopy", &content_functions::Copy},
};

// A content function's arguments, up to what follows the file: the fs name and the inode.
std::string ContentArgs(std::string_view fs, uint64_t ino, size_t more = 32) {
  std::string args;
  args.reserve(2 + fs.size() + 8 + more);
  ByteWriter w(&args);
  w.Str16(fs);
  w.U64(ino);
  return args;
}

// Runs content function `function` for file `ino` of `fs` where its data slot is served: here,
// or on that member (a server-to-server call). `args` start with ContentArgs(fs, ino).
absl::StatusOr<std::string> CallContent(Context& ctx, std::string_view fs, uint64_t ino,
                                        std::string_view function, const std::string& args) {
  uint32_t slot = DataSlot(fs, ino);
  absl::Status served = CheckSlotServed(ctx, slot, /*write=*/true);
  if (served.ok()) {
    for (const Named& f : kContentFunctions) {
      if (f.name == function) return f.fn(ctx, args);
    }
    return absl::InternalError(absl::StrCat("dfs: no content function ", ToAbsl(function)));
  }
  if (!slots::RedirectOf(served)) return served;
  return ctx.CallPeer(PeerTarget::Slot(slot), function, args);
}

// Runs a content function for file `on` that answers a file's new state, and copies that state
// into inode `ino` (the file it changed).
absl::StatusOr<ContentState> Change(Context& ctx, std::string_view fs, uint64_t on,
                                    std::string_view function, const std::string& args,
                                    uint64_t ino) {
  ARDMA_ASSIGN_OR_RETURN(std::string r, CallContent(ctx, fs, on, function, args));
  ARDMA_ASSIGN_OR_RETURN(ContentState state, DecodeState(r));
  ARDMA_RETURN_IF_ERROR(ApplyContentState(ctx, ino, state));
  return state;
}

}  // namespace

// ---- The namespace member's side ----

absl::Status PrepareForPeers(Context& ctx, const Fs& fs) {
  return fs.spread ? ctx.MoveToWorker() : absl::OkStatus();
}

absl::Status CreateContent(Context& ctx, const Fs& fs, uint64_t ino, uint32_t mode) {
  std::string args = ContentArgs(fs.name, ino);
  ByteWriter(&args).U32(mode);
  ARDMA_ASSIGN_OR_RETURN(std::string r, CallContent(ctx, fs.name, ino, "dfs.ccreate", args));
  ARDMA_ASSIGN_OR_RETURN(ContentState state, DecodeState(r));
  return SetFields(ctx, ino, {{kInRemote, 1}, {kInDataGen, state.gen}});
}

absl::StatusOr<std::string> ReadContent(Context& ctx, std::string_view fs, uint64_t ino,
                                        uint64_t offset, uint64_t len) {
  std::string args = ContentArgs(fs, ino);
  ByteWriter w(&args);
  w.U64(offset);
  w.U64(len);
  return CallContent(ctx, fs, ino, "dfs.cread", args);
}

absl::StatusOr<uint64_t> WriteContent(Context& ctx, std::string_view fs, uint64_t ino,
                                      uint64_t offset, std::string_view data) {
  std::string args = ContentArgs(fs, ino, 16 + data.size());
  ByteWriter w(&args);
  w.U64(offset);
  w.U8(0);
  w.Bytes32(data);
  ARDMA_ASSIGN_OR_RETURN(ContentState state, Change(ctx, fs, ino, "dfs.cwrite", args, ino));
  return state.size;
}

absl::Status TruncateContent(Context& ctx, std::string_view fs, uint64_t ino, uint64_t len) {
  std::string args = ContentArgs(fs, ino);
  ByteWriter(&args).U64(len);
  return Change(ctx, fs, ino, "dfs.ctruncate", args, ino).status();
}

absl::Status CopyContent(Context& ctx, std::string_view fs, uint64_t from, uint64_t to) {
  std::string args = ContentArgs(fs, from);
  ByteWriter(&args).U64(to);
  return Change(ctx, fs, from, "dfs.ccopy", args, to).status();
}

namespace {

absl::Status FreeContent(Context& ctx, std::string_view fs, uint64_t ino) {
  return CallContent(ctx, fs, ino, "dfs.cfree", ContentArgs(fs, ino)).status();
}

absl::Status RecordOrphan(Context& ctx, const Fs& fs, uint64_t ino) {
  absl::StatusOr<std::string> put = ctx.Call(
      "dht.put", TableArgs(OrphanTable(fs.name)) + dht::EncodePutArgs(InoKey(ino), ""));
  if (!put.ok()) return put.status();
  ARDMA_RETURN_IF_ERROR(dht::DecodeReply(*put, dht::ReplyKind::kFlag).status());
  return ctx.FetchAdd(fs.sb + kSbOrphans, 1).status();
}

// Frees the contents of up to a page of orphans, then their inode blocks; stops at the first
// member that still cannot be reached. One sweep a second at most (they may wait on a dead member).
absl::Status SweepOrphans(Context& ctx, const Fs& fs) {
  char b[kSuperBytes];
  ARDMA_RETURN_IF_ERROR(ctx.Read(fs.sb, std::span<char>(b, sizeof(b))));
  if (Field(b, kSbOrphans) == 0) return absl::OkStatus();
  uint64_t last = Field(b, kSbSwept), now = static_cast<uint64_t>(NowNs());
  if (now - last < 1'000'000'000ull) return absl::OkStatus();
  ARDMA_ASSIGN_OR_RETURN(CasResult mine, ctx.CompareAndSwap(fs.sb + kSbSwept, last, now));
  if (!mine.swapped) return absl::OkStatus();  // another request sweeps
  std::string args = TableArgs(OrphanTable(fs.name));
  ByteWriter w(&args);
  w.U64(0);
  w.U32(64);
  ARDMA_ASSIGN_OR_RETURN(std::string page, ctx.Call("dht.scan", args));
  ARDMA_ASSIGN_OR_RETURN(dht::Reply reply, dht::DecodeReply(page, dht::ReplyKind::kScan));
  for (const auto& [key, unused] : reply.items) {
    if (key.size() != 8) return absl::DataLossError("dfs: bad orphan record");
    uint64_t ino;
    std::memcpy(&ino, key.data(), 8);
    if (!FreeContent(ctx, fs.name, ino).ok()) break;  // its member is still away: next time
    absl::StatusOr<std::string> removed =
        ctx.Call("dht.remove", TableArgs(OrphanTable(fs.name)) + dht::EncodeKeyArgs(key));
    if (!removed.ok()) return removed.status();
    ARDMA_ASSIGN_OR_RETURN(dht::Reply gone, dht::DecodeReply(*removed, dht::ReplyKind::kFlag));
    if (!gone.flag) continue;  // another sweep took it
    ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(fs.sb + kSbOrphans, ~0ull).status());
    ARDMA_RETURN_IF_ERROR(heap::Free(ctx, ino));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DiscardInode(Context& ctx, const Fs& fs, const Inode& n) {
  if (!n.remote) return FreeInode(ctx, fs, n);
  ARDMA_RETURN_IF_ERROR(ctx.WriteU64(n.ino, 0));  // readers holding the number see it gone
  ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(fs.sb + kSbFiles, ~0ull).status());
  if (absl::Status freed = FreeContent(ctx, fs.name, n.ino); !freed.ok()) {
    // The block stays allocated until its contents are freed, so no new file takes its number.
    return RecordOrphan(ctx, fs, n.ino);
  }
  ARDMA_RETURN_IF_ERROR(heap::Free(ctx, n.ino));
  return SweepOrphans(ctx, fs);
}

absl::StatusOr<uint64_t> OrphanCount(Context& ctx, const Fs& fs) {
  return ctx.ReadU64(fs.sb + kSbOrphans);
}

absl::Status ApplyContentState(Context& ctx, uint64_t ino, const ContentState& state) {
  Locks locks(ctx);
  ARDMA_RETURN_IF_ERROR(locks.Take({ino + kInLock}));
  absl::StatusOr<Inode> n = ReadInode(ctx, ino);
  if (absl::IsNotFound(n.status())) return absl::OkStatus();  // removed meanwhile
  if (!n.ok()) return n.status();
  if (n->removed || !n->remote) return locks.Release();
  // Generations grow by 2 per change from a random start: compare them as a serial number.
  if (static_cast<int64_t>(state.gen - n->data_gen) <= 0) return locks.Release();
  ARDMA_RETURN_IF_ERROR(SetFields(ctx, ino,
                                  {{kInSize, state.size},
                                   {kInMtime, state.mtime_ns},
                                   {kInCtime, state.mtime_ns},
                                   {kInDataGen, state.gen},
                                   {kInGen, n->gen + 2}}));
  return locks.Release();
}

// ---- The content member's side ----

namespace content_functions {

absl::StatusOr<std::string> Create(Context& ctx, std::string_view args) {
  ContentRequest q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(ctx, /*write=*/true));
  uint32_t mode;
  if (!q.r.U32(&mode) || !q.r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.ccreate: bad arguments");
  }
  // A record left for this number (an inode freed while this member was away) goes first.
  ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> old, FindContent(ctx, q.data, q.ino));
  if (old) ARDMA_RETURN_IF_ERROR(Discard(ctx, q.data, q.ino, *old));
  ARDMA_ASSIGN_OR_RETURN(uint64_t at, NewInode(ctx, FileType::kFile, 0, "", mode & 07777));
  absl::Status s = SetRecord(ctx, q.data, q.ino, at);
  if (!s.ok()) {
    heap::Free(ctx, at).IgnoreError();
    return s;
  }
  ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(q.data.sb + kSbFiles, 1).status());
  ARDMA_ASSIGN_OR_RETURN(ContentState state, StateOf(ctx, at));
  return StateResult(state);
}

absl::StatusOr<std::string> Read(Context& ctx, std::string_view args) {
  ContentRequest q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(ctx, /*write=*/false));
  uint64_t offset, len;
  if (!q.r.U64(&offset) || !q.r.U64(&len) || !q.r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.cread: bad arguments");
  }
  ARDMA_ASSIGN_OR_RETURN(uint64_t at, NeedContent(ctx, q.data, q.ino));
  return Pread(ctx, at, offset, len);
}

absl::StatusOr<std::string> Write(Context& ctx, std::string_view args) {
  ContentRequest q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(ctx, /*write=*/true));
  uint64_t offset;
  uint8_t flags;
  std::string_view data;
  if (!q.r.U64(&offset) || !q.r.U8(&flags) || !q.r.Bytes32(&data) || !q.r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.cwrite: bad arguments");
  }
  ARDMA_ASSIGN_OR_RETURN(uint64_t at, NeedContent(ctx, q.data, q.ino));
  if (flags & kTruncateFirst) ARDMA_RETURN_IF_ERROR(TruncateInode(ctx, q.data, at, 0));
  ARDMA_RETURN_IF_ERROR(Pwrite(ctx, q.data.sb, at, offset, data).status());
  ARDMA_ASSIGN_OR_RETURN(ContentState state, StateOf(ctx, at));
  if (flags & kSyncNamespace) ARDMA_RETURN_IF_ERROR(SyncNamespace(ctx, q.fs_name, q.ino, state));
  return StateResult(state);
}

absl::StatusOr<std::string> Truncate(Context& ctx, std::string_view args) {
  ContentRequest q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(ctx, /*write=*/true));
  uint64_t len;
  if (!q.r.U64(&len) || !q.r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.ctruncate: bad arguments");
  }
  ARDMA_ASSIGN_OR_RETURN(uint64_t at, NeedContent(ctx, q.data, q.ino));
  ARDMA_RETURN_IF_ERROR(TruncateInode(ctx, q.data, at, len));
  ARDMA_ASSIGN_OR_RETURN(ContentState state, StateOf(ctx, at));
  return StateResult(state);
}

absl::StatusOr<std::string> Free(Context& ctx, std::string_view args) {
  ContentRequest q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(ctx, /*write=*/true));
  if (!q.r.AtEnd()) return absl::InvalidArgumentError("dfs.cfree: bad arguments");
  ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> at, FindContent(ctx, q.data, q.ino));
  if (at) ARDMA_RETURN_IF_ERROR(Discard(ctx, q.data, q.ino, *at));
  return std::string();
}

absl::StatusOr<std::string> Copy(Context& ctx, std::string_view args) {
  ContentRequest q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(ctx, /*write=*/false));
  uint64_t to;
  if (!q.r.U64(&to) || !q.r.AtEnd()) return absl::InvalidArgumentError("dfs.ccopy: bad arguments");
  ARDMA_ASSIGN_OR_RETURN(uint64_t at, NeedContent(ctx, q.data, q.ino));
  // Pushed to `to`'s member in requests of kMaxIoBytes: the bytes never pass the namespace.
  ARDMA_ASSIGN_OR_RETURN(ContentState src, StateOf(ctx, at));
  std::optional<ContentState> last;
  for (uint64_t done = 0; done == 0 || done < src.size; done += kMaxIoBytes) {
    ARDMA_ASSIGN_OR_RETURN(std::string bytes, Pread(ctx, at, done, kMaxIoBytes));
    std::string args = ContentArgs(q.fs_name, to, 16 + bytes.size());
    ByteWriter w(&args);
    w.U64(done);
    w.U8(done == 0 ? kTruncateFirst : 0);
    w.Bytes32(bytes);
    ARDMA_ASSIGN_OR_RETURN(std::string r, CallContent(ctx, q.fs_name, to, "dfs.cwrite", args));
    ARDMA_ASSIGN_OR_RETURN(last, DecodeState(r));
    if (bytes.size() < kMaxIoBytes) break;
  }
  return StateResult(*last);
}

absl::StatusOr<std::string> Open(Context& ctx, std::string_view args) {
  ContentRequest q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(ctx, /*write=*/false));
  if (!q.r.AtEnd()) return absl::InvalidArgumentError("dfs.copen: bad arguments");
  ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> at, FindContent(ctx, q.data, q.ino));
  if (!at) return absl::NotFoundError("dfs: no such file or directory");
  std::string out;
  ByteWriter(&out).U64(*at);
  return out;
}

absl::StatusOr<std::string> Usage(Context& ctx, std::string_view args) {
  ByteReader r(args);
  std::string_view name;
  if (!r.Str16(&name) || !r.AtEnd()) return absl::InvalidArgumentError("dfs.cusage: bad arguments");
  ARDMA_ASSIGN_OR_RETURN(Fs data, OpenDataFs(ctx, name));
  char b[kSuperBytes];
  ARDMA_RETURN_IF_ERROR(ctx.Read(data.sb, std::span<char>(b, sizeof(b))));
  std::string out;
  ByteWriter w(&out);
  w.U64(Field(b, kSbFiles));
  w.U64(Field(b, kSbBlocks));
  return out;
}

absl::StatusOr<std::string> Sync(Context& ctx, std::string_view args) {
  ByteReader r(args);
  std::string_view name;
  uint64_t ino;
  ContentState state;
  if (!r.Str16(&name) || !r.U64(&ino) || !ReadState(r, &state) || !r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.csync: bad arguments");
  }
  // (OpenFs checks this member serves the file system; `ino` must be one of its live inodes.)
  ARDMA_RETURN_IF_ERROR(OpenFs(ctx, name).status());
  ARDMA_RETURN_IF_ERROR(ApplyContentState(ctx, ino, state));
  return std::string();
}

}  // namespace content_functions
}  // namespace ardma::dfs
