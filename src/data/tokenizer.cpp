#include "chimera/data/tokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>

#include "chimera/core/error.hpp"
#include "chimera/data/utf8.hpp"

namespace chimera::data {

namespace {

// GPT-2's pre-tokenization pattern (encoder.py), unchanged.
constexpr std::string_view kPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Words longer than this are encoded but not cached, so a pathological input (a megabyte
// without spaces) cannot fill memory; the cache is dropped when it reaches kCacheEntries.
constexpr std::size_t kMaxCachedWordBytes = 128;
constexpr std::size_t kCacheEntries = std::size_t{1} << 20;

// GPT-2's byte alphabet: printable bytes stand for themselves, the other 68 bytes are shifted
// to code points 256.. in byte order. Returns the code point of every byte.
std::array<char32_t, 256> byte_alphabet() {
  std::array<char32_t, 256> code{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    code[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
  }
  return code;
}

// Decodes one UTF-8 code point of a well-formed (JSON-parsed) string.
char32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto u = [&](std::size_t k) {
    return static_cast<char32_t>(static_cast<unsigned char>(s[k]));
  };
  const char32_t lead = u(i);
  if (lead < 0x80) return ++i, lead;
  const std::size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
  char32_t cp = lead & (0x7F >> length);
  for (std::size_t k = 1; k < length && i + k < s.size(); ++k) cp = (cp << 6) | (u(i + k) & 0x3F);
  i += length;
  return cp;
}

struct TransparentHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Merge {
  std::int32_t rank;
  std::int32_t merged;
};

std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
         static_cast<std::uint32_t>(right);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  CHIMERA_REQUIRE(in.good(), "{}: cannot read the tokenizer file (expected GPT-2's {})", path,
                  path.ends_with(".json") ? "encoder.json" : "vocab.bpe");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Pcre2Code {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
struct Pcre2MatchData {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

}  // namespace

struct Tokenizer::Impl {
  std::vector<std::string> bytes_of;  // token id -> the bytes it stands for
  std::unordered_map<std::string, std::int32_t, TransparentHash, std::equal_to<>> id_of;
  std::array<std::int32_t, 256> byte_token{};
  std::unordered_map<std::uint64_t, Merge> merges;
  std::int32_t eos = -1;
  std::unique_ptr<pcre2_code, Pcre2Code> pattern;
  std::unique_ptr<pcre2_match_data, Pcre2MatchData> match;
  bool jit = false;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>, TransparentHash,
                             std::equal_to<>>
      cache;

  void compile_pattern();
  void bpe(std::string_view word, std::vector<std::int32_t>& out) const;
  void encode_pieces(std::string_view text, std::vector<std::int32_t>& out) const;
};

void Tokenizer::Impl::compile_pattern() {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pattern.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern.data()), kPattern.size(),
                              PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr));
  CHIMERA_CHECK(pattern != nullptr, "GPT-2 pattern does not compile (PCRE2 error {})", error);
  jit = pcre2_jit_compile(pattern.get(), PCRE2_JIT_COMPLETE) == 0;
  match.reset(pcre2_match_data_create_from_pattern(pattern.get(), nullptr));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string& dir) {
  auto impl = std::make_unique<Impl>();
  const std::string encoder_path = dir + "/encoder.json";
  const std::string merges_path = dir + "/vocab.bpe";

  // encoder.json: token (in GPT-2's byte alphabet) -> id.
  std::array<int, 0x200> byte_of_code;
  byte_of_code.fill(-1);
  const auto alphabet = byte_alphabet();
  for (int b = 0; b < 256; ++b) byte_of_code[alphabet[static_cast<std::size_t>(b)]] = b;
  nlohmann::json encoder;
  try {
    encoder = nlohmann::json::parse(read_file(encoder_path));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not valid JSON ({})", encoder_path, e.what()));
  }
  CHIMERA_REQUIRE(encoder.is_object() && !encoder.empty(),
                  "{}: expected a JSON object of token -> id", encoder_path);
  const std::size_t vocab = encoder.size();
  impl->bytes_of.resize(vocab);
  std::vector<bool> seen(vocab, false);
  for (const auto& [token, value] : encoder.items()) {
    CHIMERA_REQUIRE(value.is_number_integer() && value.get<std::int64_t>() >= 0 &&
                        value.get<std::uint64_t>() < vocab && !seen[value.get<std::size_t>()],
                    "{}: token '{}' has id {}, expected a distinct id in [0, {})", encoder_path,
                    token, value.dump(), vocab);
    const auto id = value.get<std::int32_t>();
    seen[static_cast<std::size_t>(id)] = true;
    std::string bytes;
    if (token == kEndOfText) {
      bytes = token;
      impl->eos = id;
    } else {
      for (std::size_t i = 0; i < token.size();) {
        const char32_t cp = next_code_point(token, i);
        CHIMERA_REQUIRE(cp < byte_of_code.size() && byte_of_code[cp] >= 0,
                        "{}: token '{}' has a character outside GPT-2's byte alphabet",
                        encoder_path, token);
        bytes.push_back(static_cast<char>(byte_of_code[cp]));
      }
      impl->id_of.emplace(bytes, id);
    }
    impl->bytes_of[static_cast<std::size_t>(id)] = std::move(bytes);
  }
  CHIMERA_REQUIRE(impl->eos >= 0, "{}: has no '{}' token", encoder_path, kEndOfText);
  for (int b = 0; b < 256; ++b) {
    const auto it = impl->id_of.find(std::string(1, static_cast<char>(b)));
    CHIMERA_REQUIRE(it != impl->id_of.end(), "{}: has no token for byte {}", encoder_path, b);
    impl->byte_token[static_cast<std::size_t>(b)] = it->second;
  }

  // vocab.bpe: "#version" line, then one merge "left right" per line, in rank order.
  const std::string merges_text = read_file(merges_path);
  std::istringstream lines(merges_text);
  std::string line;
  int line_number = 0;
  std::int32_t rank = 0;
  const auto to_bytes = [&](std::string_view token) {
    std::string bytes;
    for (std::size_t i = 0; i < token.size();) {
      const char32_t cp = next_code_point(token, i);
      CHIMERA_REQUIRE(cp < byte_of_code.size() && byte_of_code[cp] >= 0,
                      "{}:{}: '{}' has a character outside GPT-2's byte alphabet", merges_path,
                      line_number, token);
      bytes.push_back(static_cast<char>(byte_of_code[cp]));
    }
    return bytes;
  };
  while (std::getline(lines, line)) {
    ++line_number;
    if (line.empty() || (line_number == 1 && line.starts_with("#"))) continue;
    const std::size_t space = line.find(' ');
    CHIMERA_REQUIRE(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                        line.find(' ', space + 1) == std::string::npos,
                    "{}:{}: expected 'left right', found '{}'", merges_path, line_number, line);
    const std::string left = to_bytes(std::string_view(line).substr(0, space));
    const std::string right = to_bytes(std::string_view(line).substr(space + 1));
    const auto l = impl->id_of.find(left), r = impl->id_of.find(right),
               m = impl->id_of.find(left + right);
    CHIMERA_REQUIRE(l != impl->id_of.end() && r != impl->id_of.end() && m != impl->id_of.end(),
                    "{}:{}: merge '{}' uses or makes a token that {} does not have", merges_path,
                    line_number, line, encoder_path);
    impl->merges.emplace(pair_key(l->second, r->second), Merge{rank++, m->second});
  }
  CHIMERA_REQUIRE(rank > 0, "{}: has no merges", merges_path);

  impl->compile_pattern();
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::clone() const {
  auto impl = std::make_unique<Impl>();
  impl->bytes_of = impl_->bytes_of;
  impl->id_of = impl_->id_of;
  impl->byte_token = impl_->byte_token;
  impl->merges = impl_->merges;
  impl->eos = impl_->eos;
  impl->compile_pattern();
  return Tokenizer(std::move(impl));
}

// Applies the merges to one pre-token, lowest rank first; equal ranks (the same pair at several
// places) left to right, which is GPT-2's order. A heap of candidate pairs keeps long words
// O(n log n); entries made stale by a neighbouring merge are skipped when popped.
void Tokenizer::Impl::bpe(std::string_view word, std::vector<std::int32_t>& out) const {
  if (const auto hit = cache.find(word); hit != cache.end()) {
    out.insert(out.end(), hit->second.begin(), hit->second.end());
    return;
  }
  const std::size_t n = word.size();
  std::vector<std::int32_t> id(n);
  std::vector<std::int32_t> prev(n), next(n);  // linked list of live symbols; -1/n = none
  for (std::size_t i = 0; i < n; ++i) {
    id[i] = byte_token[static_cast<unsigned char>(word[i])];
    prev[i] = static_cast<std::int32_t>(i) - 1;
    next[i] = static_cast<std::int32_t>(i) + 1;
  }
  struct Candidate {
    std::int32_t rank, left, left_id, right_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto push = [&](std::int32_t left) {
    if (left < 0 || next[static_cast<std::size_t>(left)] >= static_cast<std::int32_t>(n)) return;
    const std::int32_t right = next[static_cast<std::size_t>(left)];
    const auto m = merges.find(
        pair_key(id[static_cast<std::size_t>(left)], id[static_cast<std::size_t>(right)]));
    if (m != merges.end())
      heap.push({m->second.rank, left, id[static_cast<std::size_t>(left)],
                 id[static_cast<std::size_t>(right)]});
  };
  for (std::size_t i = 0; i + 1 < n; ++i) push(static_cast<std::int32_t>(i));
  std::vector<bool> alive(n, true);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const auto left = static_cast<std::size_t>(c.left);
    if (!alive[left] || id[left] != c.left_id || next[left] >= static_cast<std::int32_t>(n))
      continue;
    const auto right = static_cast<std::size_t>(next[left]);
    if (id[right] != c.right_id) continue;
    id[left] = merges.at(pair_key(c.left_id, c.right_id)).merged;
    alive[right] = false;
    next[left] = next[right];
    if (next[left] < static_cast<std::int32_t>(n))
      prev[static_cast<std::size_t>(next[left])] = c.left;
    push(prev[left]);
    push(c.left);
  }
  std::vector<std::int32_t> result;
  for (std::int32_t i = 0; i < static_cast<std::int32_t>(n); i = next[static_cast<std::size_t>(i)])
    result.push_back(id[static_cast<std::size_t>(i)]);
  out.insert(out.end(), result.begin(), result.end());
  if (n <= kMaxCachedWordBytes) {
    if (cache.size() >= kCacheEntries) cache.clear();
    cache.emplace(std::string(word), std::move(result));
  }
}

void Tokenizer::Impl::encode_pieces(std::string_view text, std::vector<std::int32_t>& out) const {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  PCRE2_SIZE start = 0;
  while (start < text.size()) {
    // The text was validated as UTF-8 by the caller: skip PCRE2's own (repeated) check.
    const int rc = jit ? pcre2_jit_match(pattern.get(), subject, text.size(), start,
                                         PCRE2_NO_UTF_CHECK, match.get(), nullptr)
                       : pcre2_match(pattern.get(), subject, text.size(), start, PCRE2_NO_UTF_CHECK,
                                     match.get(), nullptr);
    CHIMERA_CHECK(rc > 0, "the GPT-2 pattern found no match at byte {} (PCRE2 status {})", start,
                  rc);
    const PCRE2_SIZE* range = pcre2_get_ovector_pointer(match.get());
    // The pattern matches every character class (its last alternatives cover all whitespace,
    // the others all non-whitespace), so matches are contiguous and never empty.
    CHIMERA_CHECK(range[0] == start && range[1] > start, "GPT-2 pattern skipped text at byte {}",
                  start);
    bpe(text.substr(range[0], range[1] - range[0]), out);
    start = range[1];
  }
}

std::vector<std::int32_t> Tokenizer::encode_ordinary(std::string_view text) const {
  std::vector<std::int32_t> out;
  encode_ordinary(text, out);
  return out;
}

void Tokenizer::encode_ordinary(std::string_view text, std::vector<std::int32_t>& out) const {
  const auto bad = first_invalid_utf8(text);
  CHIMERA_REQUIRE(!bad, "invalid UTF-8 at byte offset {} (byte 0x{:02X})", *bad,
                  static_cast<unsigned char>(text[*bad]));
  impl_->encode_pieces(text, out);
}

void Tokenizer::encode(std::string_view text, std::vector<std::int32_t>& out,
                       std::size_t offset_base) const {
  const auto bad = first_invalid_utf8(text);
  CHIMERA_REQUIRE(!bad, "invalid UTF-8 at byte offset {} (byte 0x{:02X})", offset_base + *bad,
                  static_cast<unsigned char>(text[*bad]));
  std::size_t begin = 0;
  while (true) {
    const std::size_t special = text.find(kEndOfText, begin);
    impl_->encode_pieces(text.substr(begin, special - begin), out);
    if (special == std::string_view::npos) break;
    out.push_back(impl_->eos);
    begin = special + kEndOfText.size();
  }
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> out;
  encode(text, out);
  return out;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string text;
  for (const std::int32_t id : ids) text += token_bytes(id);
  return text;
}

std::string_view Tokenizer::token_bytes(std::int32_t id) const {
  CHIMERA_REQUIRE(id >= 0 && id < vocab_size(), "token id {} is outside the vocabulary [0, {})", id,
                  vocab_size());
  return impl_->bytes_of[static_cast<std::size_t>(id)];
}

int Tokenizer::vocab_size() const {
  return static_cast<int>(impl_->bytes_of.size());
}
std::int32_t Tokenizer::eos_token() const {
  return impl_->eos;
}

std::size_t safe_split_point(std::string_view text, std::size_t limit) {
  const auto plain = [](char c) { return c > ' ' && c <= '~'; };  // ASCII, not space
  for (std::size_t cut = std::min(limit, text.size()); cut >= 2; --cut) {
    if (text[cut - 1] == '\n' && plain(text[cut - 2]) && cut < text.size() && plain(text[cut]))
      return cut;
  }
  return 0;
}

}  // namespace chimera::data
