// libFuzzer target for the request handler: any bytes, read as the frames two connections send,
// handled exactly as a connection's frames are (RequestHandler::Handle, over an in-memory sink),
// then the parked requests expired and both connections closed (their close hooks run). Active code
// is a small table linked in here that reaches every Context operation with arguments from the
// input. Invariants beyond "no crash, no sanitizer report": every answer is a well-formed response
// to a request that was sent, and no request is answered twice.
//
// The UCX bootstrap is in reach too: a UCX_CONNECT frame goes to a real UcxServer (its address
// check, endpoint and session; an empty payload stands for the fuzzer's own worker's address, so
// sessions open), and a frame whose request id has bit 62 set is sent as an active message on the
// latest session, its session number XORed with the id's bits 48-55 — through UcxServer's
// arrival, limits and parsing to its own RequestHandler (one for all inputs: a UcxServer keeps
// its handler), answered over UCX and checked as the sinks' answers are.
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
#include "core/server/ucx_server.h"
#include "core/ucx/ucx_context.h"
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
  return absl::Status(static_cast<absl::StatusCode>(1 + U64(args, 0) % 16),
                      std::string(Rest(args, 1)));
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
    if (header->op == wire::Op::kUcxConnect && header->status == 0) {
      ucx_answers_.push_back(frame.substr(wire::kHeaderSize));
    }
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
  // The answers to UCX_CONNECTs that opened a session, since the last call.
  std::vector<std::string> TakeUcxAnswers() {
    absl::MutexLock lock(&mu_);
    return std::move(ucx_answers_);
  }

 private:
  std::vector<std::string> ucx_answers_;
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

// Aborts unless `frame` is a well-formed response.
wire::FrameHeader CheckedResponse(std::string_view frame) {
  wire::WireLimits limits;
  if (frame.size() < wire::kHeaderSize) std::abort();
  absl::StatusOr<wire::FrameHeader> header =
      wire::DecodeHeader(frame.substr(0, wire::kHeaderSize), limits);
  if (!header.ok() || header->payload_len != frame.size() - wire::kHeaderSize) std::abort();
  return *header;
}

constexpr uint64_t kOverUcx = 1ull << 62;

// The UCX side, made on the first input that opens a session and kept (a UCX context and the
// address checker take milliseconds to start): a UcxServer over the world's heap with a handler of
// its own, and the fuzzer's worker, the sessions' client end.
struct UcxWorld {
  std::unique_ptr<RequestHandler> handler;
  std::unique_ptr<UcxServer> server;
  std::unique_ptr<UcxContext> client;
  std::string client_address;
  absl::Mutex mu;
  absl::flat_hash_set<uint64_t> sent ABSL_GUARDED_BY(mu);  // over UCX, by any input
  uint64_t answers ABSL_GUARDED_BY(mu) = 0;
  uint64_t sessions ABSL_GUARDED_BY(mu) = 0;

  uint64_t Answers() {
    absl::MutexLock lock(&mu);
    return answers;
  }

  static ucs_status_t OnAnswer(void* arg, const void*, size_t, void* data, size_t length,
                               const ucp_am_recv_param_t* param) {
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) std::abort();  // answers are eager
    auto* self = static_cast<UcxWorld*>(arg);
    wire::FrameHeader header = CheckedResponse(std::string_view(static_cast<char*>(data), length));
    absl::MutexLock lock(&self->mu);
    if (!header.is_response() || !self->sent.contains(header.request_id)) std::abort();
    ++self->answers;
    return UCS_OK;
  }
};

UcxWorld* TheUcxWorld(World& world) {
  static UcxWorld* ucx = [&world]() -> UcxWorld* {
    ::setenv("UCX_TLS", "shm,self", /*overwrite=*/0);  // deterministic, and no network
    auto* u = new UcxWorld();
    HandlerOptions options;
    options.workers = 0;
    options.limits.max_payload_bytes = 1 << 20;
    options.limits.max_batch_entries = 256;
    options.limits.max_inflight_per_connection = 8;  // so that floods are held, and refused
    options.default_deadline = absl::Milliseconds(50);
    u->handler = std::make_unique<RequestHandler>(options, &world.regions, &world.registry);
    absl::StatusOr<std::unique_ptr<UcxServer>> server = UcxServer::Create();
    absl::StatusOr<std::unique_ptr<UcxContext>> client = UcxContext::Create({});
    if (!server.ok() || !client.ok()) return nullptr;  // no UCX here: inputs reach what they can
    u->server = *std::move(server);
    u->client = *std::move(client);
    absl::StatusOr<std::string> address = u->client->WorkerAddress();
    if (!address.ok() || !u->server->Start(world.regions, u->handler.get()).ok() ||
        !u->client->SetAmHandler(kAmResponse, &UcxWorld::OnAnswer, u).ok()) {
      std::abort();
    }
    u->client_address = *std::move(address);
    return u;
  }();
  return ucx;
}

// One input's UCX sessions, as the client end sees them.
class UcxSessions {
 public:
  // Opens the UCX world on the input's first UCX_CONNECT, and routes `handler`'s to it.
  void Attach(World& world, RequestHandler& handler) {
    if (attached_) return;
    attached_ = true;
    ucx_ = TheUcxWorld(world);
    if (ucx_ == nullptr) return;
    handler.SetUcxConnect(
        [ucx = ucx_](std::string_view payload, const std::shared_ptr<ResponseSink>& sink) {
          return ucx->server->Connect(payload, sink);
        });
  }
  // Once the input's connections are closed: takes what the server still answers, has it close
  // the sessions now (their close hooks run: before the next input restores the heap), then
  // closes the endpoints.
  void Close() {
    if (ucx_ == nullptr) return;
    // Until answers stop coming for 5 ms (parked requests are never answered), at most 200 ms.
    absl::Time quiet_until = absl::Now() + absl::Milliseconds(sent_ > 0 ? 5 : 0);
    absl::Time give_up = absl::Now() + absl::Milliseconds(200);
    uint64_t answers = ucx_->Answers();
    for (absl::Time now = absl::Now(); now < quiet_until && now < give_up; now = absl::Now()) {
      ucp_worker_progress(ucx_->client->worker());
      if (uint64_t seen = ucx_->Answers(); seen != answers) {
        answers = seen;
        quiet_until = now + absl::Milliseconds(5);
      }
    }
    ucx_->server->SweepNow();
    for (absl::Time deadline = absl::Now() + absl::Seconds(5); ucx_->server->sessions() > 0;) {
      if (absl::Now() > deadline) std::abort();  // a session outlived its connection
      ucp_worker_progress(ucx_->client->worker());
    }
    for (ucp_ep_h ep : endpoints_) ucx_->client->CloseEndpoint(ep, absl::Milliseconds(5));
    endpoints_.clear();
  }
  // The payload a UCX_CONNECT carries.
  std::string ConnectPayload(std::string payload) const {
    if (ucx_ == nullptr || !payload.empty()) return payload;
    wire::EncodeUcxConnectRequest({.worker_address = ucx_->client_address}, &payload);
    return payload;
  }
  // A UCX_CONNECT's answer: an endpoint to the session it opened.
  void Opened(std::string_view answer) {
    absl::StatusOr<wire::UcxHello> hello = wire::DecodeUcxHello(answer);
    if (ucx_ == nullptr || !hello.ok()) return;
    absl::StatusOr<ucp_ep_h> ep =
        ucx_->client->Connect(hello->worker_address, absl::Now() + absl::Milliseconds(200));
    if (!ep.ok()) return;
    endpoints_.push_back(*ep);
    session_ = hello->session;
    absl::MutexLock lock(&ucx_->mu);
    ++ucx_->sessions;
  }
  // Sends `frame` on the latest session; false if there is none.
  bool Send(const wire::FrameHeader& header, std::string frame) {
    if (ucx_ == nullptr || endpoints_.empty()) return false;
    {
      absl::MutexLock lock(&ucx_->mu);
      ucx_->sent.insert(header.request_id);
    }
    uint64_t session = session_ ^ ((header.request_id >> 48) & 0xff);
    ++sent_;
    SendActiveMessage(endpoints_.back(), kAmRequest, session, std::move(frame)).IgnoreError();
    ucp_worker_progress(ucx_->client->worker());
    return true;
  }

 private:
  bool attached_ = false;
  UcxWorld* ucx_ = nullptr;
  std::vector<ucp_ep_h> endpoints_;
  uint64_t session_ = 0;
  int sent_ = 0;
};

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
  UcxSessions sessions;
  while (input.size() >= wire::kHeaderSize) {
    std::string_view raw = input;
    absl::StatusOr<wire::FrameHeader> header =
        wire::DecodeHeader(input.substr(0, wire::kHeaderSize), options.limits);
    if (!header.ok()) break;  // the server closes such a connection
    input.remove_prefix(wire::kHeaderSize);
    if (input.size() < header->payload_len) break;
    std::string payload(input.substr(0, header->payload_len));  // exactly sized, for ASan
    input.remove_prefix(header->payload_len);
    if ((header->request_id & kOverUcx) != 0 &&
        sessions.Send(*header, std::string(raw.substr(0, raw.size() - input.size())))) {
      continue;
    }
    if (header->op == wire::Op::kUcxConnect) {
      sessions.Attach(world, *handler);
      payload = sessions.ConnectPayload(std::move(payload));
    }
    MemorySink& sink = *sinks[header->request_id & 1];
    sink.Sent(header->request_id);
    handler->Handle(*header, payload, sinks[header->request_id & 1]);
    for (const std::string& answer : sink.TakeUcxAnswers()) sessions.Opened(answer);
  }
  handler->ExpireParked();
  for (auto& sink : sinks) {
    sink->Close();
    handler->ConnectionClosed(sink.get());
  }
  sessions.Close();
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
std::string UcxConnect(std::string_view address, uint64_t id) {
  std::string payload;
  if (!address.empty()) wire::EncodeUcxConnectRequest({.worker_address = address}, &payload);
  return Frame(wire::Op::kUcxConnect, id, payload);
}
}  // namespace

HandlerFuzzUcxReach HandlerFuzzUcx() {
  UcxWorld* ucx = TheUcxWorld(TheWorld());
  if (ucx == nullptr) return {};
  absl::MutexLock lock(&ucx->mu);
  return {.sessions = ucx->sessions, .answers = ucx->answers};
}

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
  // The UCX bootstrap: a session to the fuzzer's worker and requests over it (one to another
  // session number), and addresses that are not one.
  seeds.push_back(UcxConnect("", 40) + Frame(wire::Op::kPing, kOverUcx | 41, "over ucx") +
                  Execute("fz.echo", "over ucx", kOverUcx | 42) +
                  Execute("fz.park", Word(0) + Word(0) + "ucx", kOverUcx | 43) +
                  Execute("fz.on_close", Word(7) + "fz.echo" + "ucx close", kOverUcx | 44) +
                  Frame(wire::Op::kPing, kOverUcx | (1ull << 48) | 45, "wrong session"));
  seeds.push_back(UcxConnect(std::string(40, '\x0f'), 46) + UcxConnect("\x01\x02\x03", 47));
  std::string all;
  for (const std::string& seed : seeds) all += seed;
  seeds.push_back(all);
  return seeds;
}

}  // namespace ardma
