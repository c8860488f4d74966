#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <random>

#include "core/wire/byte_io.h"
#include "core/slots.h"
#include "core/wire/frame.h"
#include "core/wire/messages.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

// The largest single allocation made while a test watches (this binary's operator new counts).
namespace {
thread_local bool g_watching = false;
thread_local size_t g_largest = 0;
}  // namespace

void* operator new(size_t n) {
  if (g_watching) g_largest = std::max(g_largest, n);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace ardma::wire {
namespace {

// Runs `decode` and returns the largest single allocation it made.
template <typename Fn>
size_t LargestAllocation(Fn decode) {
  g_largest = 0;
  g_watching = true;
  decode();
  g_watching = false;
  return g_largest;
}

using ::testing::ElementsAre;

TEST(FrameTest, HeaderRoundTrip) {
  std::string frame;
  size_t start = BeginFrame(&frame);
  frame += "payload";
  FinishFrame({.op = Op::kExecute,
               .flags = kFlagResponse,
               .status = 5,
               .request_id = 0x1122334455,
               .client_id = 0xabcdef},
              start, &frame);
  ASSERT_EQ(frame.size(), kHeaderSize + 7);
  absl::StatusOr<FrameHeader> h = DecodeHeader(frame, WireLimits{});
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->op, Op::kExecute);
  EXPECT_TRUE(h->is_response());
  EXPECT_EQ(h->status, 5);
  EXPECT_EQ(h->payload_len, 7u);
  EXPECT_EQ(h->request_id, 0x1122334455u);
  EXPECT_EQ(h->client_id, 0xabcdefu);
}

TEST(FrameTest, RejectsBadMagicVersionAndOversizedPayload) {
  std::string frame;
  size_t start = BeginFrame(&frame);
  FinishFrame({.op = Op::kPing}, start, &frame);

  std::string bad_magic = frame;
  bad_magic[0] ^= 1;
  EXPECT_EQ(DecodeHeader(bad_magic, {}).status().code(), absl::StatusCode::kInvalidArgument);

  std::string bad_version = frame;
  bad_version[4] = 9;
  EXPECT_EQ(DecodeHeader(bad_version, {}).status().code(), absl::StatusCode::kInvalidArgument);

  std::string huge = frame;
  uint32_t len = 1u << 30;
  std::memcpy(&huge[12], &len, 4);
  EXPECT_EQ(DecodeHeader(huge, {}).status().code(), absl::StatusCode::kResourceExhausted);

  EXPECT_EQ(DecodeHeader(frame.substr(0, 31), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FrameTest, UnknownOpDecodesSoItCanBeAnswered) {
  std::string frame;
  size_t start = BeginFrame(&frame);
  FinishFrame({.op = static_cast<Op>(200)}, start, &frame);
  absl::StatusOr<FrameHeader> h = DecodeHeader(frame, {});
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE(IsKnownOp(static_cast<uint8_t>(h->op)));
}

TEST(FrameTest, ErrorResponseCarriesCodeAndMessage) {
  FrameHeader request{.op = Op::kRead, .request_id = 9, .client_id = 3};
  std::string frame = EncodeErrorResponse(request, absl::OutOfRangeError("too far"));
  absl::StatusOr<FrameHeader> h = DecodeHeader(frame, {});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->request_id, 9u);
  absl::Status s = StatusFromWire(h->status, std::string_view(frame).substr(kHeaderSize));
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(s.message(), "too far");
  EXPECT_EQ(StatusFromWire(999, "x").code(), absl::StatusCode::kUnknown);
  EXPECT_TRUE(StatusFromWire(0, "").ok());
}

TEST(FrameTest, ARedirectCrossesTheWireWhole) {
  FrameHeader request{.op = Op::kExecute, .request_id = 4};
  slots::Redirect sent{.frozen = false, .slot = 12345, .epoch = 7, .owner = 0xabcdef};
  std::string frame = EncodeErrorResponse(request, slots::RedirectStatus(sent));
  absl::StatusOr<FrameHeader> h = DecodeHeader(frame, {});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->status, kWireRedirect);
  absl::Status s = StatusFromWire(h->status, std::string_view(frame).substr(kHeaderSize));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  std::optional<slots::Redirect> got = slots::RedirectOf(s);
  ASSERT_TRUE(got.has_value()) << s;
  EXPECT_EQ(got->slot, 12345u);
  EXPECT_EQ(got->epoch, 7u);
  EXPECT_EQ(got->owner, 0xabcdefu);
  EXPECT_FALSE(got->frozen);
  EXPECT_EQ(StatusFromWire(kWireRedirect, "short").code(), absl::StatusCode::kDataLoss);
}

TEST(MessagesTest, ReadRoundTrip) {
  std::vector<ReadEntry> entries = {{0, 16, 8}, {2, 1ull << 40, 4096}};
  std::string payload;
  EncodeReadRequest(entries, &payload);
  absl::StatusOr<std::vector<ReadEntry>> decoded = DecodeReadRequest(payload, {});
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->size(), 2u);
  EXPECT_EQ((*decoded)[1].region, 2u);
  EXPECT_EQ((*decoded)[1].addr, 1ull << 40);
  EXPECT_EQ((*decoded)[1].len, 4096u);
}

TEST(MessagesTest, ReadRejectsEmptyTruncatedTrailingAndOversized) {
  std::string empty;
  EncodeReadRequest({}, &empty);
  EXPECT_EQ(DecodeReadRequest(empty, {}).status().code(), absl::StatusCode::kInvalidArgument);

  std::vector<ReadEntry> one = {{0, 0, 8}};
  std::string payload;
  EncodeReadRequest(one, &payload);
  EXPECT_FALSE(DecodeReadRequest(payload.substr(0, payload.size() - 1), {}).ok());
  EXPECT_FALSE(DecodeReadRequest(payload + "x", {}).ok());

  // A count the payload cannot hold is rejected before anything is reserved.
  std::string lying;
  ByteWriter(&lying).U32(60000);
  EXPECT_FALSE(DecodeReadRequest(lying, {}).ok());

  WireLimits limits;
  limits.max_batch_entries = 1;
  std::vector<ReadEntry> two = {{0, 0, 8}, {0, 8, 8}};
  std::string p2;
  EncodeReadRequest(two, &p2);
  EXPECT_EQ(DecodeReadRequest(p2, limits).status().code(), absl::StatusCode::kResourceExhausted);

  limits = WireLimits{};
  limits.max_payload_bytes = 100;
  std::vector<ReadEntry> big = {{0, 0, 101}};
  std::string p3;
  EncodeReadRequest(big, &p3);
  EXPECT_EQ(DecodeReadRequest(p3, limits).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(MessagesTest, WriteRoundTripAndLengthBeyondPayload) {
  std::vector<WriteEntry> entries = {{0, 64, "hello"}, {1, 128, std::string_view("\0\1", 2)}};
  std::string payload;
  EncodeWriteRequest(entries, &payload);
  absl::StatusOr<std::vector<WriteEntry>> decoded = DecodeWriteRequest(payload, {});
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ((*decoded)[0].data, "hello");
  EXPECT_EQ((*decoded)[1].addr, 128u);
  EXPECT_EQ((*decoded)[1].data.size(), 2u);

  // A data length larger than what follows must not be trusted.
  std::string lying;
  ByteWriter w(&lying);
  w.U32(1);
  w.U32(0);
  w.U64(0);
  w.U32(0xffffffff);
  lying += "abc";
  EXPECT_FALSE(DecodeWriteRequest(lying, {}).ok());
}

TEST(MessagesTest, AtomicsRoundTrip) {
  std::string p;
  EncodeCasRequest({3, 24, 7, 9}, &p);
  absl::StatusOr<CasRequest> cas = DecodeCasRequest(p);
  ASSERT_TRUE(cas.ok());
  EXPECT_EQ(cas->region, 3u);
  EXPECT_EQ(cas->addr, 24u);
  EXPECT_EQ(cas->expected, 7u);
  EXPECT_EQ(cas->desired, 9u);
  EXPECT_FALSE(DecodeCasRequest(p.substr(1)).ok());

  std::string f;
  EncodeFetchAddRequest({0, 8, ~0ull}, &f);
  absl::StatusOr<FetchAddRequest> fa = DecodeFetchAddRequest(f);
  ASSERT_TRUE(fa.ok());
  EXPECT_EQ(fa->delta, ~0ull);
  EXPECT_FALSE(DecodeFetchAddRequest(f + "z").ok());

  std::string r;
  EncodeU64Response(42, &r);
  EXPECT_EQ(*DecodeU64Response(r), 42u);
  EXPECT_FALSE(DecodeU64Response("1234567").ok());
}

TEST(MessagesTest, LoadHasCodeExecuteStatsRoundTrip) {
  std::string p;
  EncodeLoadRequest({CodeKind::kJvm, "dht",
                     "\x7f"
                     "ELFbytes"},
                    &p);
  absl::StatusOr<LoadRequest> load = DecodeLoadRequest(p);
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_EQ(load->kind, CodeKind::kJvm);
  EXPECT_EQ(load->library_name, "dht");
  EXPECT_EQ(load->code,
            "\x7f"
            "ELFbytes");
  std::string bad_kind = p;
  bad_kind[0] = 7;
  EXPECT_FALSE(DecodeLoadRequest(bad_kind).ok());
  std::string empty_code;
  EncodeLoadRequest({CodeKind::kNative, "", ""}, &empty_code);
  EXPECT_FALSE(DecodeLoadRequest(empty_code).ok());

  CodeHash hash{};
  for (size_t i = 0; i < hash.size(); ++i) hash[i] = static_cast<uint8_t>(i * 7);
  std::string h;
  EncodeHash(hash, &h);
  EXPECT_EQ(*DecodeHash(h), hash);
  EXPECT_FALSE(DecodeHash(h.substr(1)).ok());
  EXPECT_EQ(*HashFromHex(HashToHex(hash)), hash);
  EXPECT_FALSE(HashFromHex("zz").ok());

  std::string has;
  EncodeHasCodeResponse(true, &has);
  EXPECT_TRUE(*DecodeHasCodeResponse(has));
  EXPECT_FALSE(DecodeHasCodeResponse("\2").ok());

  ExecuteRequest ex;
  ex.by_hash = true;
  ex.hash = hash;
  ex.function = "dht.get";
  ex.timeout_us = 1500;
  ex.args = std::string_view("k\0y", 3);
  std::string e;
  EncodeExecuteRequest(ex, &e);
  absl::StatusOr<ExecuteRequest> exd = DecodeExecuteRequest(e);
  ASSERT_TRUE(exd.ok()) << exd.status();
  EXPECT_TRUE(exd->by_hash);
  EXPECT_EQ(exd->hash, hash);
  EXPECT_EQ(exd->function, "dht.get");
  EXPECT_EQ(exd->timeout_us, 1500u);
  EXPECT_EQ(exd->args, std::string_view("k\0y", 3));
  std::string no_name;
  ExecuteRequest unnamed;
  EncodeExecuteRequest(unnamed, &no_name);
  EXPECT_FALSE(DecodeExecuteRequest(no_name).ok());
  EXPECT_FALSE(DecodeExecuteRequest("\5").ok());

  std::vector<StatsEntry> stats = {{"requests.ping", 3}, {"errors", 0}};
  std::string s;
  EncodeStatsResponse(stats, &s);
  absl::StatusOr<std::vector<StatsEntry>> sd = DecodeStatsResponse(s, {});
  ASSERT_TRUE(sd.ok());
  EXPECT_THAT(*sd, ElementsAre(StatsEntry{"requests.ping", 3}, StatsEntry{"errors", 0}));
}

// Every decoder on `payload`, as the server and client run them.
void DecodeAll(std::string_view payload, const WireLimits& limits) {
  (void)DecodeHeader(payload, limits);
  (void)DecodeReadRequest(payload, limits);
  (void)DecodeWriteRequest(payload, limits);
  (void)DecodeCasRequest(payload);
  (void)DecodeFetchAddRequest(payload);
  (void)DecodeLoadRequest(payload);
  (void)DecodeExecuteRequest(payload);
  (void)DecodeStatsResponse(payload, limits);
}

// A few bytes that claim a huge count or length must be rejected before anything is sized by
// the claim: no decoder may allocate more than the payload could describe.
TEST(MessagesTest, UcxHelloRoundTripWithAndWithoutTheAnnouncedLimit) {
  UcxHello hello;
  hello.session = 0x1234;
  hello.worker_address = "worker";
  hello.regions.push_back(
      {.region = 0, .base = 4096, .size = 8192, .read_only = false, .rkey = "key"});
  hello.max_inflight = 77;
  std::string out;
  EncodeUcxHello(hello, &out);
  absl::StatusOr<UcxHello> back = DecodeUcxHello(out);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->session, 0x1234u);
  EXPECT_EQ(back->worker_address, "worker");
  ASSERT_EQ(back->regions.size(), 1u);
  EXPECT_EQ(back->regions[0].rkey, "key");
  EXPECT_EQ(back->max_inflight, 77u);
  // A server before the limit was announced: it ends after the regions.
  absl::StatusOr<UcxHello> old = DecodeUcxHello(std::string_view(out).substr(0, out.size() - 4));
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->max_inflight, 0u);
  EXPECT_FALSE(DecodeUcxHello(std::string_view(out).substr(0, out.size() - 2)).ok());
  EXPECT_FALSE(DecodeUcxHello(out + "x").ok());
}

TEST(MessagesTest, UcxConnectCarriesTheClientsPeerErrorHandling) {
  std::string out;
  EncodeUcxConnectRequest({.worker_address = "addr", .peer_error_handling = true}, &out);
  absl::StatusOr<UcxConnectRequest> back = DecodeUcxConnectRequest(out);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->worker_address, "addr");
  EXPECT_TRUE(back->peer_error_handling);
  // A client before the flags byte: no peer error handling.
  absl::StatusOr<UcxConnectRequest> old = DecodeUcxConnectRequest(out.substr(0, out.size() - 1));
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_FALSE(old->peer_error_handling);
  std::string unknown_flag = out;
  unknown_flag.back() = 2;
  EXPECT_FALSE(DecodeUcxConnectRequest(unknown_flag).ok());
  EXPECT_FALSE(DecodeUcxConnectRequest(out + "x").ok());
}

TEST(MessagesTest, DecodersNeverAllocateFromAClaimedLength) {
  WireLimits generous{.max_payload_bytes = 1u << 30, .max_batch_entries = UINT32_MAX};
  for (uint32_t claim : {0x7fffffffu, 0xffffffffu, 1u << 24, 100000u}) {
    std::string payload;
    ByteWriter w(&payload);
    w.U32(claim);  // a batch count, a string length, ...
    w.U32(claim);  // ... or the second field's length
    w.U64(1);
    w.U16(0xffff);  // a str16 length
    payload.append(20, 'x');
    size_t largest = LargestAllocation([&] { DecodeAll(payload, generous); });
    EXPECT_LT(largest, 4096u) << "claim " << claim << " made a decoder allocate " << largest;
  }
}

// Random bytes never crash a decoder and never make it allocate more than a few KiB.
TEST(MessagesTest, RandomPayloadsAreRejectedOrDecodedSafely) {
  std::mt19937_64 rng(12345);
  WireLimits limits;
  size_t largest = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string junk(rng() % 64, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    largest = std::max(largest, LargestAllocation([&] { DecodeAll(junk, limits); }));
  }
  EXPECT_LT(largest, 4096u);
}

}  // namespace
}  // namespace ardma::wire
