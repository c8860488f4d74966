#include "core/client/transport.h"

#include "core/wire/frame_reader.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

// A frame of the request as values.
std::string Framed(const OutgoingRequest& request) {
  std::string out;
  AppendFrame(request, 7, 9, &out);
  return out;
}

// A data operation given as values is framed exactly as its encoded payload would be, so the
// server reads the same bytes whichever form the client used.
TEST(AppendFrameTest, ValuesAreFramedAsTheirEncodedPayload) {
  wire::ReadEntry read{3, 4096, 8};
  wire::WriteEntry writes[2] = {{0, 64, "abc"}, {1, 128, "defgh"}};
  wire::CasRequest cas{0, 8, 1, 2};
  wire::FetchAddRequest add{2, 16, 5};
  std::string encoded_read, encoded_write, encoded_cas, encoded_add;
  wire::EncodeReadRequest({&read, 1}, &encoded_read);
  wire::EncodeWriteRequest(writes, &encoded_write);
  wire::EncodeCasRequest(cas, &encoded_cas);
  wire::EncodeFetchAddRequest(add, &encoded_add);

  EXPECT_EQ(Framed({wire::Op::kRead, {}, OutgoingRequest::Reads{read}}),
            Framed({wire::Op::kRead, encoded_read}));
  EXPECT_EQ(Framed({wire::Op::kWrite, {}, OutgoingRequest::Writes{writes[0], writes[1]}}),
            Framed({wire::Op::kWrite, encoded_write}));
  EXPECT_EQ(Framed({wire::Op::kCas, {}, cas}), Framed({wire::Op::kCas, encoded_cas}));
  EXPECT_EQ(Framed({wire::Op::kFetchAdd, {}, add}), Framed({wire::Op::kFetchAdd, encoded_add}));
  for (bool by_hash : {false, true}) {
    wire::ExecuteRequest execute{.by_hash = by_hash,
                                 .function = "dht.get",
                                 .timeout_us = 1500,
                                 .args = std::string_view("k\0y", 3)};
    execute.hash[0] = 0xab;
    std::string encoded_execute;
    wire::EncodeExecuteRequest(execute, &encoded_execute);
    EXPECT_EQ(Framed({wire::Op::kExecute, {}, execute, wire::kFlagPeer}),
              Framed({wire::Op::kExecute, encoded_execute, {}, wire::kFlagPeer}));
  }

  std::string frame = Framed({wire::Op::kPing, "hi"});
  absl::StatusOr<wire::Frame> parsed = wire::ParseWholeFrame(frame, wire::WireLimits());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->header.op, wire::Op::kPing);
  EXPECT_EQ(parsed->header.request_id, 7u);
  EXPECT_EQ(parsed->header.client_id, 9u);
  EXPECT_EQ(parsed->payload, "hi");
}

}  // namespace
}  // namespace ardma
