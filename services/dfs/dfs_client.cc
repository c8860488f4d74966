#include "services/dfs/dfs_client.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"

namespace ardma::dfs {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

absl::Status Check(const ByteReader& r, std::string_view what) {
  if (!r.AtEnd()) return absl::DataLossError(absl::StrCat("dfs: bad ", ToAbsl(what), " result"));
  return absl::OkStatus();
}

}  // namespace

std::string DfsClient::Args() const {
  std::string out;
  ByteWriter(&out).Str16(fs_);
  return out;
}

absl::StatusOr<std::string> DfsClient::Call(std::string_view function, std::string_view args) {
  ARDMA_RETURN_IF_ERROR(CheckFsName(fs_));
  return OnSlot(NamespaceSlot(fs_), [&](Client& client) {
    return Invoke(client, mode_, active_libraries::dfs(), function, args, options_);
  });
}

absl::Status DfsClient::LoadEverywhere() {
  absl::MutexLock lock(&mu_);
  if (loaded_) return absl::OkStatus();
  // The members call each other's content functions (dfs_content.h): each needs the library.
  // (A member that is down is passed over: calls that need it fail on their own, and one that
  // finds it back without the library loads it again, in OnSlot.)
  absl::StatusOr<std::vector<Client*>> all = servers_->All();
  if (absl::IsUnavailable(all.status())) {  // a member is down: the namespace's, at least
    ARDMA_ASSIGN_OR_RETURN(Client * client, servers_->ForSlot(NamespaceSlot(fs_)));
    all = std::vector<Client*>{client};
  }
  if (!all.ok()) return all.status();
  for (Client* client : *all) {
    absl::Status loaded = EnsureLoaded(*client, active_libraries::dfs());
    if (!loaded.ok() && !absl::IsUnavailable(loaded) && !absl::IsDeadlineExceeded(loaded)) {
      return loaded;
    }
  }
  loaded_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::string> DfsClient::OnSlot(uint32_t slot, const SlotCall& call) {
  if (servers_->RoutesBySlot()) {
    if (mode_ == Mode::kRdma) {
      return absl::FailedPreconditionError(
          "dfs: RDMA mode runs the file system on one server; across a cluster's members it "
          "takes active mode");
    }
    ARDMA_RETURN_IF_ERROR(LoadEverywhere());
  }
  auto route = [&] {
    return RouteToSlot<std::string>(
        *servers_, slot,
        options_.timeout > absl::ZeroDuration() ? options_.timeout : absl::Seconds(30),
        SlotSubject{"file system", fs_}, call);
  };
  absl::StatusOr<std::string> result = route();
  if (servers_->RoutesBySlot() && absl::IsNotFound(result.status()) &&
      absl::StrContains(result.status().message(), "no loaded library exports 'dfs.")) {
    // A member that joined since the library was loaded everywhere lacks it: the member that
    // called it refused before changing anything. Load it there too, and try once more.
    {
      absl::MutexLock lock(&mu_);
      loaded_ = false;
    }
    ARDMA_RETURN_IF_ERROR(LoadEverywhere());
    result = route();
  }
  return result;
}

namespace {

// A handle call's arguments: straight to the file's member (`direct`: the fs name, the inode,
// `rest`), or to the namespace's (the handle, `rest`, and for a remote file the fs name: that
// member fetches its bytes).
std::string HandleArgs(std::string_view fs, const FileHandle& file, bool direct,
                       std::string_view rest) {
  std::string args;
  ByteWriter w(&args);
  if (direct) {
    w.Str16(fs);
    w.U64(file.ino);
    args.append(rest);
    return args;
  }
  w.U64(file.sb);
  w.U64(file.ino);
  args.append(rest);
  if (file.remote) w.Str16(fs);
  return args;
}

}  // namespace

bool DfsClient::Direct(const FileHandle& file) const {
  return file.remote && servers_->RoutesBySlot();
}

absl::StatusOr<std::string> DfsClient::HandleCall(const FileHandle& file,
                                                  std::string_view function,
                                                  std::string_view cluster_function,
                                                  std::string_view rest,
                                                  std::string_view cluster_rest) {
  if (!Direct(file)) return Call(function, HandleArgs(fs_, file, false, rest));
  std::string args = HandleArgs(fs_, file, true, cluster_rest);
  return OnSlot(DataSlot(fs_, file.ino), [&](Client& client) {
    return Invoke(client, mode_, active_libraries::dfs(), cluster_function, args, options_);
  });
}

absl::StatusOr<Client*> DfsClient::HandleClient(const FileHandle& file) {
  if (Direct(file)) {
    ARDMA_RETURN_IF_ERROR(LoadEverywhere());
    return servers_->ForSlot(DataSlot(fs_, file.ino));
  }
  ARDMA_ASSIGN_OR_RETURN(Client * client, servers_->ForSlot(NamespaceSlot(fs_)));
  ARDMA_RETURN_IF_ERROR(EnsureLoaded(*client, active_libraries::dfs()));
  return client;
}

absl::StatusOr<Stat> DfsClient::Mkdir(std::string_view path, uint32_t mode) {
  std::string args = Args();
  ByteWriter w(&args);
  w.Str16(path);
  w.U32(mode);
  ARDMA_ASSIGN_OR_RETURN(std::string r, Call("dfs.mkdir", args));
  return DecodeStat(r);
}

absl::StatusOr<Stat> DfsClient::Create(std::string_view path, uint32_t mode, bool exclusive) {
  std::string args = Args();
  ByteWriter w(&args);
  w.Str16(path);
  w.U32(mode);
  w.U8(exclusive ? 1 : 0);
  ARDMA_ASSIGN_OR_RETURN(std::string r, Call("dfs.create", args));
  return DecodeStat(r);
}

absl::StatusOr<Stat> DfsClient::Lookup(std::string_view path) { return StatCall(path, false); }

absl::StatusOr<Stat> DfsClient::LookupFollowing(std::string_view path) {
  return StatCall(path, true);
}

absl::StatusOr<Stat> DfsClient::StatCall(std::string_view path, bool follow) {
  std::string args = Args();
  ByteWriter w(&args);
  w.Str16(path);
  if (follow) w.U8(1);  // (the flag is optional: lstat without it)
  ARDMA_ASSIGN_OR_RETURN(std::string r, Call("dfs.stat", args));
  return DecodeStat(r);
}

absl::StatusOr<Stat> DfsClient::Symlink(std::string_view target, std::string_view path) {
  std::string args = Args();
  ByteWriter w(&args);
  w.Str16(path);
  w.Str16(target);
  ARDMA_ASSIGN_OR_RETURN(std::string r, Call("dfs.symlink", args));
  return DecodeStat(r);
}

absl::StatusOr<std::string> DfsClient::Readlink(std::string_view path) {
  std::string args = Args();
  ByteWriter(&args).Str16(path);
  return Call("dfs.readlink", args);
}

absl::StatusOr<std::string> DfsClient::FollowLinks(std::string_view path, bool follow_last) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string_view> parts, SplitPath(path));
  // `todo` holds the components still to walk, last first; `done` the resolved prefix.
  std::vector<std::string> todo(parts.rbegin(), parts.rend());
  std::string done;
  int links = 0;
  while (!todo.empty()) {
    std::string part = std::move(todo.back());
    todo.pop_back();
    if (part == ".") continue;
    if (part == "..") {
      done.resize(done.empty() ? 0 : done.rfind('/'));
      continue;
    }
    std::string next = done + "/" + part;
    if (todo.empty() && !follow_last) return next;
    ARDMA_ASSIGN_OR_RETURN(Stat st, Lookup(next));
    if (st.type != FileType::kSymlink) {
      if (!todo.empty() && st.type != FileType::kDirectory) {
        return absl::FailedPreconditionError("dfs: not a directory");
      }
      done = std::move(next);
      continue;
    }
    if (++links > 40) {
      return absl::FailedPreconditionError(
          absl::StrCat("dfs: too many levels of symbolic links: ", ToAbsl(path)));
    }
    absl::StatusOr<std::string> target = Readlink(next);
    if (!target.ok()) return target.status();
    if (!target->empty() && (*target)[0] == '/') done.clear();
    const std::string absolute = "/" + *target;  // SplitPath wants an absolute path
    ARDMA_ASSIGN_OR_RETURN(std::vector<std::string_view> more, SplitPath(absolute));
    for (auto it = more.rbegin(); it != more.rend(); ++it) todo.emplace_back(*it);
  }
  return done.empty() ? std::string("/") : done;
}

absl::StatusOr<DirPage> DfsClient::ReadDir(std::string_view path, uint64_t cursor, uint32_t max) {
  std::string args = Args();
  ByteWriter w(&args);
  w.Str16(path);
  w.U64(cursor);
  w.U32(max);
  absl::StatusOr<std::string> bytes = Call("dfs.readdir", args);
  if (!bytes.ok()) return bytes.status();
  return DecodeDirPage(*bytes);
}

absl::StatusOr<std::vector<DirEntry>> DfsClient::ListDir(std::string_view path) {
  std::vector<DirEntry> all;
  uint64_t cursor = 0;
  for (;;) {
    ARDMA_ASSIGN_OR_RETURN(DirPage page, ReadDir(path, cursor, 4096));
    for (DirEntry& e : page.entries) all.push_back(std::move(e));
    if (page.done) return all;
    cursor = page.next;
  }
}

absl::Status DfsClient::Unlink(std::string_view path) {
  std::string args = Args();
  ByteWriter(&args).Str16(path);
  return Call("dfs.unlink", args).status();
}

absl::Status DfsClient::Rmdir(std::string_view path) {
  std::string args = Args();
  ByteWriter(&args).Str16(path);
  return Call("dfs.rmdir", args).status();
}

absl::Status DfsClient::Rename(std::string_view from, std::string_view to) {
  std::string args = Args();
  ByteWriter w(&args);
  w.Str16(from);
  w.Str16(to);
  return Call("dfs.rename", args).status();
}

absl::StatusOr<std::string> DfsClient::Read(std::string_view path, uint64_t offset, uint64_t len) {
  std::string args = Args();
  ByteWriter w(&args);
  w.Str16(path);
  w.U64(offset);
  w.U64(len);
  return Call("dfs.read", args);
}

absl::StatusOr<uint64_t> DfsClient::Write(std::string_view path, uint64_t offset,
                                          std::string_view data) {
  std::string args = Args();
  ByteWriter w(&args);
  w.Str16(path);
  w.U64(offset);
  w.Bytes32(data);
  absl::StatusOr<std::string> bytes = Call("dfs.write", args);
  if (!bytes.ok()) return bytes.status();
  ByteReader r(*bytes);
  uint64_t size = 0;
  if (!r.U64(&size)) return absl::DataLossError("dfs: bad write result");
  ARDMA_RETURN_IF_ERROR(Check(r, "write"));
  return size;
}

absl::Status DfsClient::Truncate(std::string_view path, uint64_t len) {
  std::string args = Args();
  ByteWriter w(&args);
  w.Str16(path);
  w.U64(len);
  return Call("dfs.truncate", args).status();
}

absl::StatusOr<uint64_t> DfsClient::GetLen(std::string_view path) {
  ARDMA_ASSIGN_OR_RETURN(Stat s, Lookup(path));
  if (s.type == FileType::kDirectory) return absl::FailedPreconditionError("dfs: is a directory");
  return s.size;
}

absl::StatusOr<std::string> DfsClient::GetBlock(std::string_view path, uint64_t index) {
  return Read(path, index * kBlockSize, kBlockSize);
}

absl::Status DfsClient::SetBlock(std::string_view path, uint64_t index, std::string_view data) {
  if (data.size() > kBlockSize) {
    return absl::InvalidArgumentError("dfs: a block is at most kBlockSize bytes");
  }
  return Write(path, index * kBlockSize, data).status();
}

absl::StatusOr<Stat> DfsClient::Copy(std::string_view from, std::string_view to) {
  std::string args = Args();
  ByteWriter w(&args);
  w.Str16(from);
  w.Str16(to);
  ARDMA_ASSIGN_OR_RETURN(std::string r, Call("dfs.copy", args));
  return DecodeStat(r);
}

absl::StatusOr<FindPage> DfsClient::Find(std::string_view path, std::string_view cursor,
                                         uint32_t max, uint32_t max_depth,
                                         bool follow_start) {
  std::string args = Args();
  ByteWriter w(&args);
  w.Str16(path);
  w.Bytes32(cursor);
  w.U32(max);
  w.U32(max_depth);
  if (follow_start) w.U8(1);
  absl::StatusOr<std::string> bytes = Call("dfs.find", args);
  if (!bytes.ok()) return bytes.status();
  return DecodeFindPage(*bytes);
}

absl::StatusOr<Usage> DfsClient::GetUsage() {
  absl::StatusOr<std::string> bytes = Call("dfs.usage", Args());
  if (!bytes.ok()) return bytes.status();
  ByteReader r(*bytes);
  Usage u;
  if (!r.U64(&u.files) || !r.U64(&u.directories) || !r.U64(&u.data_blocks) ||
      !r.U64(&u.heap_allocated) || !r.U64(&u.heap_size) || !r.U64(&u.orphans)) {
    return absl::DataLossError("dfs: bad usage result");
  }
  ARDMA_RETURN_IF_ERROR(Check(r, "usage"));
  if (!servers_->RoutesBySlot()) return u;
  // On a cluster the files' blocks are counted where they are: add every member's (a member
  // that is down fails the count).
  ARDMA_ASSIGN_OR_RETURN(std::vector<Client*> all, servers_->All());
  for (Client* client : all) {
    ARDMA_ASSIGN_OR_RETURN(std::string counts, Invoke(*client, mode_, active_libraries::dfs(),
                                                      "dfs.cusage", Args(), options_));
    ByteReader c(counts);
    uint64_t files, blocks;
    if (!c.U64(&files) || !c.U64(&blocks)) return absl::DataLossError("dfs: bad usage result");
    ARDMA_RETURN_IF_ERROR(Check(c, "usage"));
    u.data_blocks += blocks;
  }
  return u;
}

absl::StatusOr<std::pair<FileHandle, Stat>> DfsClient::OpenWithStat(std::string_view path) {
  std::string args = Args();
  ByteWriter(&args).Str16(path);
  absl::StatusOr<std::string> bytes = Call("dfs.open", args);
  if (!bytes.ok()) return bytes.status();
  FileHandle h;
  if (bytes->size() < 9) return absl::DataLossError("dfs: bad open result");
  std::memcpy(&h.sb, bytes->data(), 8);
  h.remote = bytes->back() != 0;
  ARDMA_ASSIGN_OR_RETURN(Stat st,
                         DecodeStat(std::string_view(*bytes).substr(8, bytes->size() - 9)));
  h.ino = st.ino;
  return std::make_pair(h, st);
}

absl::StatusOr<FileHandle> DfsClient::Open(std::string_view path) {
  ARDMA_ASSIGN_OR_RETURN(auto opened, OpenWithStat(path));
  return opened.first;
}

absl::StatusOr<std::string> DfsClient::ReadAt(const FileHandle& file, uint64_t offset,
                                              uint64_t len) {
  std::string rest;
  ByteWriter w(&rest);
  w.U64(offset);
  w.U64(len);
  return HandleCall(file, "dfs.pread", "dfs.cread", rest, rest);
}

namespace {

// A handle's write: dfs.pwrite's arguments after the handle, and dfs.cwrite's after the file.
std::pair<std::string, std::string> WriteRests(uint64_t offset, std::string_view data) {
  std::pair<std::string, std::string> rests;
  ByteWriter p(&rests.first);
  p.U64(offset);
  p.Bytes32(data);
  ByteWriter c(&rests.second);
  c.U64(offset);
  c.U8(kSyncNamespace);
  c.Bytes32(data);
  return rests;
}

// The new size in a pwrite's answer, or in a cwrite's (size mtime gen).
absl::StatusOr<uint64_t> WrittenSize(std::string_view bytes) {
  ByteReader r(bytes);
  uint64_t size = 0, unused;
  if (!r.U64(&size)) return absl::DataLossError("dfs: bad write result");
  if (!r.AtEnd() && (!r.U64(&unused) || !r.U64(&unused))) {
    return absl::DataLossError("dfs: bad write result");
  }
  ARDMA_RETURN_IF_ERROR(Check(r, "write"));
  return size;
}

}  // namespace

absl::StatusOr<uint64_t> DfsClient::WriteAt(const FileHandle& file, uint64_t offset,
                                            std::string_view data) {
  auto [rest, cluster_rest] = WriteRests(offset, data);
  absl::StatusOr<std::string> bytes =
      HandleCall(file, "dfs.pwrite", "dfs.cwrite", rest, cluster_rest);
  if (!bytes.ok()) return bytes.status();
  return WrittenSize(*bytes);
}

namespace {

// Up to `window` asynchronous calls in flight; the first error wins.
class Pipeline {
 public:
  explicit Pipeline(int window) : window_(std::max(window, 1)) {}
  // Blocks until a slot is free; false if a call already failed.
  bool Acquire() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](Pipeline* p) { return p->inflight_ < p->window_ || !p->error_.ok(); }, this));
    if (!error_.ok()) return false;
    ++inflight_;
    return true;
  }
  void Done(absl::Status s) {
    absl::MutexLock lock(&mu_);
    --inflight_;
    if (!s.ok() && error_.ok()) error_ = s;
  }
  absl::Status Wait() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](Pipeline* p) { return p->inflight_ == 0; }, this));
    return error_;
  }

 private:
  absl::Mutex mu_;
  const int window_;
  int inflight_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::Status DfsClient::Upload(std::string_view path, std::string_view data, uint32_t mode,
                               const std::function<void(uint64_t)>& progress, uint64_t chunk,
                               int window) {
  chunk = std::clamp<uint64_t>(chunk, 1, kMaxIoBytes);
  ARDMA_RETURN_IF_ERROR(Create(path, mode, /*exclusive=*/false).status());
  ARDMA_RETURN_IF_ERROR(Truncate(path, 0));
  ARDMA_ASSIGN_OR_RETURN(FileHandle h, Open(path));
  if (mode_ == Mode::kRdma) {
    for (uint64_t done = 0; done < data.size(); done += chunk) {
      ARDMA_RETURN_IF_ERROR(WriteAt(h, done, data.substr(done, chunk)).status());
      if (progress) progress(std::min<uint64_t>(done + chunk, data.size()));
    }
    return absl::OkStatus();
  }
  ARDMA_ASSIGN_OR_RETURN(Client * client, HandleClient(h));
  const bool direct = Direct(h);
  Pipeline pipe(window);
  std::atomic<uint64_t> written{0};
  for (uint64_t done = 0; done < data.size(); done += chunk) {
    if (!pipe.Acquire()) break;
    std::string_view piece = data.substr(done, chunk);
    auto rests = WriteRests(done, piece);
    client->ExecuteAsync(
        direct ? "dfs.cwrite" : "dfs.pwrite",
        HandleArgs(fs_, h, direct, direct ? rests.second : rests.first),
        [&pipe, &written, &progress, n = piece.size()](ResponsePayload r) {
          if (r.ok() && progress) progress(written.fetch_add(n) + n);
          pipe.Done(r.status());
        },
        options_);
  }
  return pipe.Wait();
}

absl::StatusOr<uint64_t> DfsClient::Download(
    std::string_view path,
    const std::function<absl::Status(uint64_t offset, std::string_view bytes)>& sink,
    const std::function<void(uint64_t)>& progress, uint64_t chunk, int window) {
  chunk = std::clamp<uint64_t>(chunk, 1, kMaxIoBytes);
  ARDMA_ASSIGN_OR_RETURN(auto opened, OpenWithStat(path));  // one request: handle and size
  const FileHandle h = opened.first;
  const uint64_t size = opened.second.size;
  if (mode_ == Mode::kRdma) {
    for (uint64_t done = 0; done < size; done += chunk) {
      ARDMA_ASSIGN_OR_RETURN(std::string bytes, ReadAt(h, done, chunk));
      ARDMA_RETURN_IF_ERROR(sink(done, bytes));
      if (progress) progress(done + bytes.size());
    }
    return size;
  }
  ARDMA_ASSIGN_OR_RETURN(Client * client, HandleClient(h));
  const bool direct = Direct(h);
  Pipeline pipe(window);
  std::atomic<uint64_t> read{0};
  for (uint64_t done = 0; done < size; done += chunk) {
    if (!pipe.Acquire()) break;
    std::string rest;
    ByteWriter w(&rest);
    w.U64(done);
    w.U64(std::min(chunk, size - done));
    client->ExecuteAsync(
        direct ? "dfs.cread" : "dfs.pread", HandleArgs(fs_, h, direct, rest),
        [&pipe, &read, &progress, &sink, done](ResponsePayload r) {
          absl::Status s = r.status();
          if (s.ok()) s = sink(done, *r);
          if (s.ok() && progress) progress(read.fetch_add(r->size()) + r->size());
          pipe.Done(s);
        },
        options_);
  }
  ARDMA_RETURN_IF_ERROR(pipe.Wait());
  return size;
}

absl::Status DfsClient::SetAttributes(std::string_view path, uint32_t mode, absl::Time mtime) {
  std::string args = Args();
  ByteWriter w(&args);
  w.Str16(path);
  w.U32(mode);
  w.U64(mtime == absl::InfinitePast() ? 0 : static_cast<uint64_t>(absl::ToUnixNanos(mtime)));
  return Call("dfs.setattr", args).status();
}

absl::StatusOr<std::vector<absl::Status>> DfsClient::Batch(std::span<const BatchOp> ops) {
  std::string args = Args();
  EncodeBatchOps(ops, &args);
  ARDMA_ASSIGN_OR_RETURN(std::string r, Call("dfs.batch", args));
  ARDMA_ASSIGN_OR_RETURN(std::vector<absl::Status> results, DecodeBatchResults(r));
  if (results.size() != ops.size()) return absl::DataLossError("dfs: bad batch result");
  return results;
}

absl::StatusOr<std::pair<uint64_t, uint64_t>> DfsClient::CopyTree(std::string_view from,
                                                                  std::string_view to,
                                                                  bool no_clobber, bool preserve,
                                                                  uint32_t umask) {
  std::string args = Args();
  ByteWriter w(&args);
  w.Str16(from);
  w.Str16(to);
  w.U8(no_clobber ? 1 : 0);
  w.U8(preserve ? 1 : 0);
  w.U32(umask);
  absl::StatusOr<std::string> bytes = Call("dfs.copytree", args);
  if (!bytes.ok()) return bytes.status();
  ByteReader r(*bytes);
  uint64_t files, dirs;
  if (!r.U64(&files) || !r.U64(&dirs)) return absl::DataLossError("dfs: bad copytree result");
  ARDMA_RETURN_IF_ERROR(Check(r, "copytree"));
  return std::make_pair(files, dirs);
}

absl::StatusOr<std::string> DfsClient::ReadFile(std::string_view path) {
  std::string out;
  for (;;) {
    ARDMA_ASSIGN_OR_RETURN(std::string chunk, Read(path, out.size(), kMaxIoBytes));
    out += chunk;
    if (chunk.size() < kMaxIoBytes) return out;
  }
}

absl::Status DfsClient::WriteFile(std::string_view path, std::string_view data, uint32_t mode) {
  ARDMA_RETURN_IF_ERROR(Create(path, mode, /*exclusive=*/false).status());
  ARDMA_RETURN_IF_ERROR(Truncate(path, 0));
  for (uint64_t done = 0; done < data.size(); done += kMaxIoBytes) {
    ARDMA_RETURN_IF_ERROR(Write(path, done, data.substr(done, kMaxIoBytes)).status());
  }
  return absl::OkStatus();
}

}  // namespace ardma::dfs
