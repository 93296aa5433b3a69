#include "chimera/data/piece_encoder.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string_view>

#include "chimera/core/error.hpp"

namespace chimera::data {

namespace {

[[noreturn]] void fail_invalid_utf8(const std::string& path, std::string_view text, std::size_t bad,
                                    const InputPosition& start) {
  const auto before = text.substr(0, bad);
  const std::uint64_t line =
      start.line + static_cast<std::uint64_t>(std::count(before.begin(), before.end(), '\n'));
  throw InputError(fmt::format(
      "{}: line {}: invalid UTF-8 at byte offset {} (byte 0x{:02X}; pass --invalid-utf8 "
      "replace to replace invalid bytes by U+FFFD)",
      path, line, start.offset + bad, static_cast<unsigned char>(text[bad])));
}

EncodedPiece encode_text(const Tokenizer& tokenizer, const CorpusPiece& piece,
                         const std::string& path, const PieceEncoding& encoding) {
  EncodedPiece out;
  const std::int32_t eos = tokenizer.eos_token();
  if (piece.starts_file) out.tokens.push_back(eos);
  std::string_view text = piece.text;
  std::string replaced;
  if (encoding.invalid_utf8 == InvalidUtf8::Replace) {
    replaced = replace_invalid_utf8(text);
    text = replaced;
  } else if (const auto bad = first_invalid_utf8(text)) {
    fail_invalid_utf8(path, text, *bad, piece.start);
  }
  tokenizer.encode(text, out.tokens);
  out.documents = std::count(out.tokens.begin(), out.tokens.end(), eos);
  return out;
}

// Why a JSON line holds no document, or "" when it does (its text in `text`).
std::string document_of(std::string_view line, const std::string& key, std::string& text) {
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    return fmt::format("not valid JSON ({})", e.what());
  }
  if (!value.is_object()) return fmt::format("a JSON {}, expected an object", value.type_name());
  const auto it = value.find(key);
  if (it == value.end()) return fmt::format("no key \"{}\"", key);
  if (!it->is_string())
    return fmt::format("\"{}\" is a JSON {}, expected a string", key, it->type_name());
  text = it->get_ref<const std::string&>();
  return {};
}

bool blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; });
}

EncodedPiece encode_json_lines(const Tokenizer& tokenizer, const CorpusPiece& piece,
                               const std::string& path, const PieceEncoding& encoding) {
  EncodedPiece out;
  const std::string_view all = piece.text;
  std::string replaced, text;
  std::uint64_t line_number = piece.start.line;
  for (std::size_t begin = 0; begin < all.size(); ++line_number) {
    const std::size_t newline = all.find('\n', begin);
    const std::size_t end = newline == std::string_view::npos ? all.size() : newline;
    std::string_view line = all.substr(begin, end - begin);
    const std::size_t line_offset = begin;
    begin = end + 1;
    if (blank(line)) continue;
    if (encoding.invalid_utf8 == InvalidUtf8::Replace) {
      replaced = replace_invalid_utf8(line);
      line = replaced;
    } else if (const auto bad = first_invalid_utf8(line)) {
      fail_invalid_utf8(path, line, *bad,
                        {piece.start.file, piece.start.offset + line_offset, line_number});
    }
    const std::string why = document_of(line, encoding.jsonl_key, text);
    if (!why.empty()) {
      const std::string where = fmt::format("{}: line {}: {}", path, line_number, why);
      if (!encoding.skip_bad_lines)
        throw InputError(where + " (pass --skip-bad-lines to skip such lines and count them)");
      if (out.bad_lines++ == 0) out.first_bad_line = where;
      continue;
    }
    out.tokens.push_back(tokenizer.eos_token());
    tokenizer.encode_ordinary(text, out.tokens);
    ++out.documents;
  }
  return out;
}

}  // namespace

EncodedPiece encode_piece(const Tokenizer& tokenizer, const CorpusPiece& piece,
                          const std::string& path, const PieceEncoding& encoding) {
  return encoding.format == InputFormat::Text ? encode_text(tokenizer, piece, path, encoding)
                                              : encode_json_lines(tokenizer, piece, path, encoding);
}

}  // namespace chimera::data
