#pragma once
// UTF-8 validation for the tokenizer. GPT-2's BPE is defined on Unicode text (its regex splits
// letters, numbers and spaces by Unicode class), so bytes that are not valid UTF-8 have no GPT-2
// encoding. Chimera either rejects them (naming the byte offset) or replaces each maximal invalid
// subsequence by U+FFFD, exactly as Python's bytes.decode("utf-8", errors="replace") does.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace chimera::data {

enum class InvalidUtf8 { Error, Replace };

// Byte offset of the first byte that does not start a valid UTF-8 sequence, or nullopt.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

// `text` with every maximal invalid subsequence replaced by U+FFFD (EF BF BD).
std::string replace_invalid_utf8(std::string_view text);

}  // namespace chimera::data
