// Any bytes: invalid UTF-8 is reported as InputError; after U+FFFD replacement, encoding
// succeeds and decoding gives the text back exactly.
#include <cstdlib>

#include "chimera/core/error.hpp"
#include "chimera/data/tokenizer.hpp"
#include "chimera/data/utf8.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto tokenizer =
      chimera::data::Tokenizer::load(std::string(CHIMERA_SOURCE_DIR) + "/inputs/gpt2-tokenizer");
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  const bool valid = !chimera::data::first_invalid_utf8(raw).has_value();
  try {
    (void)tokenizer.encode(raw);
    if (!valid) std::abort();  // invalid UTF-8 must be refused
  } catch (const chimera::InputError&) {
    if (valid) std::abort();
  }
  const std::string text = chimera::data::replace_invalid_utf8(raw);
  if (tokenizer.decode(tokenizer.encode(text)) != text) std::abort();
  if (tokenizer.decode(tokenizer.encode_ordinary(text)) != text) std::abort();
  return 0;
}
