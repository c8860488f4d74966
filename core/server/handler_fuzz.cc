// libFuzzer target for the request handler: any bytes, read as the frames two connections send,
// handled exactly as a connection's frames are (RequestHandler::Handle, over an in-memory sink),
// then the parked requests expired and both connections closed (their close hooks run). Active code
// is a small table linked in here that reaches every Context operation with arguments from the
// input. Invariants beyond "no crash, no sanitizer report": every answer is a well-formed response
// to a request that was sent, and no request is answered twice.
//
// Built with clang + libFuzzer + ASan/UBSan by scripts/fuzz.sh (HandlerFuzzSeeds() seeds it), and
// with the normal build as handler_fuzz_test (handler_fuzz_main.cc: the seeds and 20,000
// deterministic mutations of them, without sanitizers).
#include "core/server/handler_fuzz.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "core/active/active_library.h"
#include "core/active/code_registry.h"
#include "core/active/function_table.h"
#include "core/active/local_context.h"
#include "core/context/context.h"
#include "core/log.h"
#include "core/memory/heap.h"
#include "core/memory/region.h"
#include "core/server/request_handler.h"
#include "core/wire/frame.h"
#include "core/wire/messages.h"

namespace ardma {
namespace {

constexpr uint64_t kHeapSize = 256 << 10;

uint64_t U64(std::string_view args, size_t i) {
  uint64_t v = 0;
  if (args.size() >= 8 * (i + 1)) std::memcpy(&v, args.data() + 8 * i, 8);
  return v;
}
std::string_view Rest(std::string_view args, size_t words) {
  return args.size() > 8 * words ? args.substr(8 * words) : std::string_view();
}
std::string Word(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

// The active code: each function turns its arguments into Context operations.
absl::StatusOr<std::string> Echo(Context&, std::string_view args) { return std::string(args); }
absl::StatusOr<std::string> ReadWrite(Context& ctx, std::string_view args) {
  absl::StatusOr<std::string> bytes = ctx.Read(U64(args, 0), U64(args, 1) % 65536, U64(args, 3));
  if (!bytes.ok()) return bytes.status();
  if (absl::Status s = ctx.Write(U64(args, 2), *bytes, U64(args, 3)); !s.ok()) return s;
  return bytes;
}
absl::StatusOr<std::string> Atomics(Context& ctx, std::string_view args) {
  absl::StatusOr<CasResult> cas = ctx.CompareAndSwap(U64(args, 0), U64(args, 1), U64(args, 2));
  if (!cas.ok()) return cas.status();
  absl::StatusOr<uint64_t> old = ctx.FetchAdd(U64(args, 0), U64(args, 3));
  if (!old.ok()) return old.status();
  return Word(*old);
}
absl::StatusOr<std::string> View(Context& ctx, std::string_view args) {
  absl::StatusOr<std::string_view> view = ctx.View(U64(args, 0), U64(args, 1));
  if (!view.ok()) return view.status();
  uint64_t sum = 0;
  for (char c : *view) sum += static_cast<unsigned char>(c);
  return Word(sum);
}
absl::StatusOr<std::string> Heap(Context& ctx, std::string_view args) {
  if (U64(args, 0) & 1) {
    absl::Status freed = heap::Free(ctx, U64(args, 1));
    if (!freed.ok()) return freed;
    return std::string();
  }
  absl::StatusOr<uint64_t> addr = heap::Allocate(ctx, U64(args, 1) % (1 << 18));
  if (!addr.ok()) return addr.status();
  return Word(*addr);
}
absl::StatusOr<std::string> Call(Context& ctx, std::string_view args) {
  uint64_t name_len = U64(args, 0) % 64;
  std::string_view rest = Rest(args, 1);
  if (rest.size() < name_len) return absl::InvalidArgumentError("short");
  return ctx.Call(rest.substr(0, name_len), rest.substr(name_len));
}
absl::StatusOr<std::string> Park(Context& ctx, std::string_view args) {
  ParkOptions options;
  options.resumable = U64(args, 0) & 1;
  options.resume_at = absl::Now() + absl::Microseconds(U64(args, 1) % 1000);
  options.resume_args = Rest(args, 2);
  if (absl::Status s = ctx.Park(Rest(args, 2).substr(0, 16), options); !s.ok()) return s;
  return std::string("parked");
}
absl::StatusOr<std::string> Wake(Context& ctx, std::string_view args) {
  std::string_view key = Rest(args, 1).substr(0, 16);
  if (U64(args, 0) & 1) {
    absl::StatusOr<bool> resumed = ctx.Resume(key);
    if (!resumed.ok()) return resumed.status();
    return Word(*resumed);
  }
  absl::StatusOr<bool> woke = ctx.Wake(key, Rest(args, 1));
  if (!woke.ok()) return woke.status();
  return Word(*woke);
}
absl::StatusOr<std::string> OnClose(Context& ctx, std::string_view args) {
  uint64_t name_len = U64(args, 0) % 64;
  std::string_view rest = Rest(args, 1);
  if (rest.size() < name_len) return absl::InvalidArgumentError("short");
  if (absl::Status s =
          ctx.OnClose(rest.substr(0, 8), rest.substr(0, name_len), rest.substr(name_len));
      !s.ok()) {
    return s;
  }
  return std::string();
}
absl::StatusOr<std::string> Backoff(Context& ctx, std::string_view args) {
  if (absl::Status s = ctx.Backoff(static_cast<int>(U64(args, 0) % 4)); !s.ok()) return s;
  return std::string();
}
absl::StatusOr<std::string> Fail(Context&, std::string_view args) {
  return absl::Status(static_cast<absl::StatusCode>(1 + U64(args, 0) % 16), std::string(Rest(args, 1)));
}

const FunctionEntry kEntries[] = {
    {"fz.echo", &Echo},       {"fz.rw", &ReadWrite}, {"fz.atomics", &Atomics},
    {"fz.view", &View},       {"fz.heap", &Heap},    {"fz.call", &Call},
    {"fz.park", &Park},       {"fz.wake", &Wake},    {"fz.on_close", &OnClose},
    {"fz.backoff", &Backoff}, {"fz.fail", &Fail},
};
const FunctionTable kTable{kActiveAbiVersion, "fz", kEntries, std::size(kEntries)};

// A connection held in memory: answers are checked and dropped.
class MemorySink : public ResponseSink {
 public:
  void Send(std::string frame) override {
    absl::MutexLock lock(&mu_);
    wire::WireLimits limits;
    if (frame.size() < wire::kHeaderSize) std::abort();
    absl::StatusOr<wire::FrameHeader> header =
        wire::DecodeHeader(std::string_view(frame).substr(0, wire::kHeaderSize), limits);
    if (!header.ok() || header->payload_len != frame.size() - wire::kHeaderSize) std::abort();
    if (header->op == wire::Op::kHello) return;  // unasked
    if (!header->is_response() || !sent_.contains(header->request_id)) std::abort();
    // A request id is answered once: a WRITE retried after a reconnect is the only case where an
    // id comes twice, and the test's frames do not reconnect, so any repeat is a bug.
    if (!answered_.insert(header->request_id).second && !repeated_.contains(header->request_id)) {
      std::abort();
    }
  }
  bool Open() const override { return open_; }
  // Call before handing the request over.
  void Sent(uint64_t request_id) {
    absl::MutexLock lock(&mu_);
    if (!sent_.insert(request_id).second) repeated_.insert(request_id);
  }
  void Close() { open_ = false; }

 private:
  absl::Mutex mu_;
  absl::flat_hash_set<uint64_t> sent_, answered_, repeated_;
  bool open_ = true;
};

struct World {
  RegionTable regions;
  CodeRegistry registry;
  std::string pristine;  // the formatted heap, restored before every input
  char* heap = nullptr;
  World() {
    SetMinLogLevel(LogLevel::kError);  // bad input is logged as warnings by design
    std::unique_ptr<Region> region = *Region::Create({.size = kHeapSize});
    heap = region->data();
    regions.Add(std::move(region));
    Execution ex;
    ex.regions = &regions;
    LocalContext ctx(&ex);
    if (!heap::FormatIfNeeded(ctx, kHeapSize, false).ok()) std::abort();
    pristine.assign(heap, kHeapSize);
    registry.AddLinked(kTable, Sha256("fz"));
  }
};

World& TheWorld() {
  static World* world = new World();
  return *world;
}

}  // namespace

void RunHandlerFuzzInput(std::string_view input) {
  World& world = TheWorld();
  std::memcpy(world.heap, world.pristine.data(), kHeapSize);
  HandlerOptions options;
  options.workers = 0;  // one thread, so a run is deterministic
  options.limits.max_payload_bytes = 1 << 20;
  options.limits.max_batch_entries = 256;
  options.default_deadline = absl::Milliseconds(50);
  auto handler = std::make_unique<RequestHandler>(options, &world.regions, &world.registry);
  std::shared_ptr<MemorySink> sinks[2] = {std::make_shared<MemorySink>(),
                                          std::make_shared<MemorySink>()};
  for (auto& sink : sinks) sink->Send(handler->Greeting(*sink));
  while (input.size() >= wire::kHeaderSize) {
    absl::StatusOr<wire::FrameHeader> header =
        wire::DecodeHeader(input.substr(0, wire::kHeaderSize), options.limits);
    if (!header.ok()) break;  // the server closes such a connection
    input.remove_prefix(wire::kHeaderSize);
    if (input.size() < header->payload_len) break;
    std::string payload(input.substr(0, header->payload_len));  // exactly sized, for ASan
    input.remove_prefix(header->payload_len);
    MemorySink& sink = *sinks[header->request_id & 1];
    sink.Sent(header->request_id);
    handler->Handle(*header, payload, sinks[header->request_id & 1]);
  }
  handler->ExpireParked();
  for (auto& sink : sinks) {
    sink->Close();
    handler->ConnectionClosed(sink.get());
  }
  handler->Stop();
}

namespace {
std::string Frame(wire::Op op, uint64_t id, const std::string& payload) {
  std::string out;
  size_t start = wire::BeginFrame(&out);
  out += payload;
  wire::FinishFrame({.op = op, .request_id = id}, start, &out);
  return out;
}
std::string Execute(std::string_view function, const std::string& args, uint64_t id) {
  std::string payload;
  wire::EncodeExecuteRequest({.function = function, .args = args}, &payload);
  return Frame(wire::Op::kExecute, id, payload);
}
}  // namespace

std::vector<std::string> HandlerFuzzSeeds() {
  std::vector<std::string> seeds;
  const uint64_t data = heap::kDataStart;
  std::string payload;
  // One-sided operations, as the client library sends them.
  seeds.push_back(Frame(wire::Op::kPing, 1, "ping"));
  wire::ReadEntry reads[] = {{.addr = data, .len = 64}, {.addr = 0, .len = 8}};
  payload.clear();
  wire::EncodeReadRequest(reads, &payload);
  seeds.push_back(Frame(wire::Op::kRead, 2, payload));
  wire::WriteEntry writes[] = {{.addr = data, .data = "written by the fuzzer"}};
  payload.clear();
  wire::EncodeWriteRequest(writes, &payload);
  seeds.push_back(Frame(wire::Op::kWrite, 3, payload));
  payload.clear();
  wire::EncodeCasRequest({.addr = data, .expected = 0, .desired = 7}, &payload);
  seeds.push_back(Frame(wire::Op::kCas, 4, payload));
  payload.clear();
  wire::EncodeFetchAddRequest({.addr = data, .delta = 1}, &payload);
  seeds.push_back(Frame(wire::Op::kFetchAdd, 5, payload));
  seeds.push_back(Frame(wire::Op::kStats, 6, ""));
  payload.clear();
  wire::EncodeHash(Sha256("fz"), &payload);
  seeds.push_back(Frame(wire::Op::kHasCode, 7, payload));
  payload.clear();
  wire::EncodeLoadRequest({.library_name = "x",
                           .code = "\x7f"
                                   "ELF"},
                          &payload);
  seeds.push_back(Frame(wire::Op::kLoad, 8, payload));
  payload.clear();
  wire::EncodeRegisterRequest({.path = "file"}, &payload);
  seeds.push_back(Frame(wire::Op::kRegister, 9, payload));
  payload.clear();
  wire::EncodeRegionId(65536, &payload);
  seeds.push_back(Frame(wire::Op::kRegionInfo, 10, payload));
  seeds.push_back(Frame(wire::Op::kDeregister, 11, payload));
  // Active code: every Context operation, and sequences that park, wake and close.
  seeds.push_back(Execute("fz.echo", "hello", 20));
  seeds.push_back(Execute("fz.rw", Word(data) + Word(32) + Word(data + 64) + Word(0), 21));
  seeds.push_back(Execute("fz.atomics", Word(data) + Word(0) + Word(5) + Word(1), 22));
  seeds.push_back(Execute("fz.view", Word(data) + Word(128), 23));
  seeds.push_back(Execute("fz.heap", Word(0) + Word(100), 24) +
                  Execute("fz.heap", Word(1) + Word(data), 25));
  seeds.push_back(Execute("fz.call", Word(7) + "fz.echo" + "args", 26));
  seeds.push_back(Execute("fz.park", Word(0) + Word(0) + "key", 27) +
                  Execute("fz.wake", Word(0) + "key", 28));
  seeds.push_back(Execute("fz.park", Word(1) + Word(10) + "resumable", 29) +
                  Execute("fz.wake", Word(1) + "resumable", 30));
  seeds.push_back(Execute("fz.on_close", Word(7) + "fz.echo" + "on close", 31));
  seeds.push_back(Execute("fz.backoff", Word(2), 32));
  seeds.push_back(Execute("fz.fail", Word(5) + "no", 33));
  std::string all;
  for (const std::string& seed : seeds) all += seed;
  seeds.push_back(all);
  return seeds;
}

}  // namespace ardma
