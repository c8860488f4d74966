// Little-endian, bounds-checked reading and writing of wire fields.
//
// ByteWriter appends to a std::string it borrows for its lifetime. ByteReader borrows the bytes it
// reads; every Read* fails (returns false and leaves the reader in a failed state) instead of
// reading past the end, so a decoder checks `ok()` once at the end. Neither type allocates from a
// length it has read: callers check lengths against their limits before using them.
// Not thread-safe; one per encode/decode call.
#ifndef ARDMA_CORE_WIRE_BYTE_IO_H_
#define ARDMA_CORE_WIRE_BYTE_IO_H_

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ardma::wire {

class ByteWriter {
 public:
  explicit ByteWriter(std::string* out) : out_(out) {}

  void U8(uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void U16(uint16_t v) { Fixed(v); }
  void U32(uint32_t v) { Fixed(v); }
  void U64(uint64_t v) { Fixed(v); }
  void Bytes(std::string_view bytes) { out_->append(bytes.data(), bytes.size()); }
  // str16: u16 length, then the bytes. The caller has checked size <= 65535.
  void Str16(std::string_view s) {
    U16(static_cast<uint16_t>(s.size()));
    Bytes(s);
  }
  // bytes32: u32 length, then the bytes.
  void Bytes32(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    Bytes(s);
  }

 private:
  template <typename T>
  void Fixed(T v) {
    static_assert(std::endian::native == std::endian::little,
                  "wire encoding assumes little-endian");
    char buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));
    out_->append(buf, sizeof(T));
  }

  std::string* out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}

  bool U8(uint8_t* v) { return Fixed(v); }
  bool U16(uint16_t* v) { return Fixed(v); }
  bool U32(uint32_t* v) { return Fixed(v); }
  bool U64(uint64_t* v) { return Fixed(v); }
  // Borrows `n` bytes from the input.
  bool Bytes(size_t n, std::string_view* out) {
    if (!ok_ || n > in_.size() - pos_) return Fail();
    *out = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool Str16(std::string_view* out) {
    uint16_t n;
    return U16(&n) && Bytes(n, out);
  }
  bool Bytes32(std::string_view* out) {
    uint32_t n;
    return U32(&n) && Bytes(n, out);
  }
  // Everything not read yet.
  std::string_view Rest() {
    std::string_view rest = ok_ ? in_.substr(pos_) : std::string_view();
    pos_ = in_.size();
    return rest;
  }

  bool ok() const { return ok_; }
  size_t remaining() const { return ok_ ? in_.size() - pos_ : 0; }
  bool AtEnd() const { return ok_ && pos_ == in_.size(); }

 private:
  template <typename T>
  bool Fixed(T* v) {
    if (!ok_ || sizeof(T) > in_.size() - pos_) return Fail();
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool Fail() {
    ok_ = false;
    return false;
  }

  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace ardma::wire

#endif  // ARDMA_CORE_WIRE_BYTE_IO_H_
