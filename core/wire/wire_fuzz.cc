// libFuzzer target for the wire decoders: any bytes, as a header and as every op's payload. Built
// with clang by scripts/fuzz.sh (the decoders have no Asio so that this builds there).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/wire/frame.h"
#include "core/wire/messages.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  ardma::wire::WireLimits limits;
  limits.max_payload_bytes = 1 << 20;
  limits.max_batch_entries = 1024;
  (void)ardma::wire::DecodeHeader(bytes, limits);
  (void)ardma::wire::DecodeReadRequest(bytes, limits);
  (void)ardma::wire::DecodeWriteRequest(bytes, limits);
  (void)ardma::wire::DecodeCasRequest(bytes);
  (void)ardma::wire::DecodeFetchAddRequest(bytes);
  (void)ardma::wire::DecodeLoadRequest(bytes);
  (void)ardma::wire::DecodeHash(bytes);
  (void)ardma::wire::DecodeHasCodeResponse(bytes);
  (void)ardma::wire::DecodeExecuteRequest(bytes);
  (void)ardma::wire::DecodeU64Response(bytes);
  (void)ardma::wire::DecodeStatsResponse(bytes, limits);
  (void)ardma::wire::StatusFromWire(size > 0 ? data[0] : 0, bytes);
  return 0;
}
