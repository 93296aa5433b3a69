#include "chimera/data/utf8.hpp"

#include <cstdint>

namespace chimera::data {

namespace {

// Length of the valid UTF-8 sequence at text[i], or 0 when invalid; `consumed` is set to the
// length of the maximal invalid subpart (at least 1) in that case (Unicode §3.9, "U+FFFD
// substitution of maximal subparts", which CPython follows).
std::size_t valid_sequence_length(std::string_view text, std::size_t i, std::size_t& consumed) {
  const auto byte = [&](std::size_t k) { return static_cast<std::uint8_t>(text[k]); };
  const std::uint8_t lead = byte(i);
  consumed = 1;
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  std::uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) lo = 0xA0;  // no overlong forms
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) lo = 0x90;  // no overlong forms
    if (lead == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  for (std::size_t k = 1; k < length; ++k) {
    if (i + k >= text.size()) return 0;
    const std::uint8_t b = byte(i + k);
    const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return 0;
    consumed = k + 1;
  }
  return length;
}

}  // namespace

std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    // ASCII fast path: most text is ASCII, eight bytes at a time.
    while (i + 8 <= text.size()) {
      std::uint64_t word = 0;
      for (std::size_t k = 0; k < 8; ++k)
        word |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(text[i + k])) << (8 * k);
      if ((word & 0x8080808080808080ULL) != 0) break;
      i += 8;
    }
    if (i >= text.size()) break;
    std::size_t consumed = 0;
    const std::size_t length = valid_sequence_length(text, i, consumed);
    if (length == 0) return i;
    i += length;
  }
  return std::nullopt;
}

std::string replace_invalid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t consumed = 0;
    const std::size_t length = valid_sequence_length(text, i, consumed);
    if (length == 0) {
      out += "\xEF\xBF\xBD";
      i += consumed;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

}  // namespace chimera::data
