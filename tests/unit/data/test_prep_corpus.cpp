// `prep` on corpora as they are shipped: JSON lines (.jsonl, .gz, .zst), several threads, shards,
// resuming, and the errors of bad lines, empty inputs and full disks. The token stream must not
// depend on the format, the thread count or the sharding.
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chimera/core/error.hpp"
#include "chimera/data/dataset.hpp"
#include "chimera/data/input_file.hpp"
#include "chimera/data/prep.hpp"
#include "chimera/data/prep_state.hpp"
#include "chimera/data/shard_paths.hpp"
#include "chimera/data/tokenizer.hpp"
#include "prep_testing.hpp"

namespace chimera::data {
namespace {

namespace fs = std::filesystem;

using namespace testing;  // the prep test helpers (prep_testing.hpp)

const std::string kSource = CHIMERA_SOURCE_DIR;
const std::string kFixtures = kSource + "/tests/unit/data/fixtures/";
const std::string kAusten = kSource + "/inputs/austen/austen.txt.gz";

fs::path temp_dir(const std::string& name) {
  return testing::temp_dir("chimera_prep_corpus_test", name);
}

// Train and val streams, one after the other.
std::vector<std::int32_t> both_splits(const PrepResult& r) {
  auto tokens = all_tokens(r.train_paths);
  if (!r.val_paths.empty()) {
    const auto val = all_tokens(r.val_paths);
    tokens.insert(tokens.end(), val.begin(), val.end());
  }
  return tokens;
}

std::string json_line(const std::string& text) {
  return nlohmann::json{{"id", 7}, {"text", text}}.dump() + "\n";
}

void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile out = gzopen(path.c_str(), "wb");
  gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(out);
}

// With a checksum, as the zstd command line writes by default.
void write_zstd(const std::string& path, const std::string& bytes) {
  std::string out(ZSTD_compressBound(bytes.size()), '\0');
  ZSTD_CCtx* context = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1);
  const std::size_t n = ZSTD_compress2(context, out.data(), out.size(), bytes.data(), bytes.size());
  ZSTD_freeCCtx(context);
  ASSERT_EQ(ZSTD_isError(n), 0U);
  out.resize(n);
  write_bytes(path, out);
}

PrepOptions options_for(const fs::path& out, std::vector<std::string> inputs) {
  PrepOptions o;
  o.tokenizer_dir = kTokenizerDir;
  o.output_dir = out.string();
  o.inputs = std::move(inputs);
  return o;
}

std::string error_of(const PrepOptions& options) {
  try {
    prepare_dataset(options);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

class PrepCorpusTest : public WithTokenizer {};

// GPT-2's ids of the multilingual fixture (from the Python reference), read through JSON lines
// in every compression, at 1 and 3 threads, sharded or not.
TEST_F(PrepCorpusTest, JsonLinesGiveGpt2IdsAtAnyThreadCountAndSharding) {
  const fs::path dir = temp_dir("jsonl");
  const std::string fixture = read_bytes(kFixtures + "multilingual.txt");
  const auto reference = nlohmann::json::parse(read_bytes(kFixtures + "multilingual.ids.json"))
                             .at("ordinary")
                             .get<std::vector<std::int32_t>>();
  const std::string second = "A second document, with a literal <|endoftext|> as text.";
  const std::string lines = json_line(fixture) + "\n" + json_line(second);  // a blank line too
  write_bytes((dir / "c.jsonl").string(), lines);
  write_gzip((dir / "c.jsonl.gz").string(), lines);
  write_zstd((dir / "c.jsonl.zst").string(), lines);
  const std::int32_t eos = tokenizer_->eos_token();
  std::vector<std::int32_t> expected{eos};
  expected.insert(expected.end(), reference.begin(), reference.end());
  expected.push_back(eos);
  tokenizer_->encode_ordinary(second, expected);

  int run = 0;
  for (const std::string name : {"c.jsonl", "c.jsonl.gz", "c.jsonl.zst"}) {
    for (const int threads : {1, 3}) {
      for (const std::int64_t shard_tokens : {0, 100}) {
        PrepOptions o = options_for(dir / fmt::format("out{}", run++), {(dir / name).string()});
        o.jsonl_key = "text";
        o.val_fraction = 0;
        o.threads = threads;
        o.shard_tokens = shard_tokens;
        o.piece_bytes = 200;  // several pieces, lines cut nowhere but at their ends
        const PrepResult r = prepare_dataset(o);
        SCOPED_TRACE(fmt::format("{}, {} threads, shards of {}", name, threads, shard_tokens));
        EXPECT_EQ(all_tokens(r.train_paths), expected);
        EXPECT_EQ(r.documents, 2);
        if (shard_tokens > 0) {
          EXPECT_EQ(r.train_paths.size(), (expected.size() + 99) / 100);
          for (const std::string& path : r.train_paths)
            EXPECT_LE(TokenDataset::open({path}).num_tokens(), 100);
        }
      }
    }
  }
}

// The bundled corpus: text or JSON lines, 1 or 2 threads, sharded or not: one token stream, and
// the unsharded files are the same bytes at any thread count.
TEST_F(PrepCorpusTest, BundledCorpusIsTheSameStreamThroughEveryPath) {
  const fs::path dir = temp_dir("austen");
  const std::string text = read_text_file(kAusten);
  write_bytes((dir / "austen.jsonl").string(), json_line(text));

  PrepOptions o = options_for(dir / "text1", {kAusten});
  o.threads = 1;
  o.piece_bytes = 256 << 10;
  const PrepResult one = prepare_dataset(o);
  const auto reference = both_splits(one);
  EXPECT_GT(reference.size(), 900000U);

  o.output_dir = (dir / "text3").string();
  o.threads = 3;
  const PrepResult three = prepare_dataset(o);
  EXPECT_EQ(read_bytes(one.train_paths[0]), read_bytes(three.train_paths[0]));
  EXPECT_EQ(read_bytes(one.val_paths[0]), read_bytes(three.val_paths[0]));

  o.output_dir = (dir / "sharded").string();
  o.threads = 2;
  o.shard_tokens = 300000;
  const PrepResult sharded = prepare_dataset(o);
  EXPECT_EQ(sharded.train_paths.size(), 4U);
  EXPECT_EQ(both_splits(sharded), reference);

  // One JSON line holding the whole text: the same ids (no literal <|endoftext|> in it).
  PrepOptions j = options_for(dir / "jsonl", {(dir / "austen.jsonl").string()});
  j.jsonl_key = "text";
  j.threads = 2;
  EXPECT_EQ(both_splits(prepare_dataset(j)), reference);
}

TEST_F(PrepCorpusTest, MalformedLinesNameFileAndLineOrAreSkippedAndCounted) {
  const fs::path dir = temp_dir("bad_lines");
  const std::string path = (dir / "bad.jsonl").string();
  write_bytes(path, json_line("one") + "not json\n[1, 2]\n{\"other\": \"x\"}\n{\"text\": 5}\n\n" +
                        json_line("two"));
  PrepOptions o = options_for(dir / "out", {path});
  o.jsonl_key = "text";
  o.val_fraction = 0;
  const std::string what = error_of(o);
  EXPECT_NE(what.find(path + ": line 2: not valid JSON"), std::string::npos) << what;
  EXPECT_NE(what.find("--skip-bad-lines"), std::string::npos) << what;
  EXPECT_FALSE(fs::exists(dir / "out" / "train.h5"));
  EXPECT_FALSE(fs::exists(dir / "out" / "train.h5.tmp"));

  o.skip_bad_lines = true;
  o.threads = 2;
  o.piece_bytes = 16;
  const PrepResult r = prepare_dataset(o);
  EXPECT_EQ(r.documents, 2);
  EXPECT_EQ(r.bad_lines, 4);
  EXPECT_EQ(r.first_bad_line.rfind(path + ": line 2:", 0), 0U) << r.first_bad_line;
  EXPECT_EQ(tokenizer_->decode(all_tokens(r.train_paths)), "<|endoftext|>one<|endoftext|>two");

  // The other kinds of bad line, each named.
  o.skip_bad_lines = false;
  for (const auto& [line, why] : std::vector<std::pair<std::string, std::string>>{
           {"[1, 2]", "a JSON array, expected an object"},
           {"{\"other\": \"x\"}", "no key \"text\""},
           {"{\"text\": 5}", "\"text\" is a JSON number, expected a string"}}) {
    write_bytes(path, json_line("one") + line + "\n");
    const std::string message = error_of(o);
    EXPECT_NE(message.find(path + ": line 2: " + why), std::string::npos) << message;
  }

  // The first error in corpus order is the one reported, whatever the read-ahead: not the empty
  // file after the bad line.
  const std::string empty = (dir / "empty.jsonl").string();
  write_bytes(empty, "");
  o.inputs = {path, empty};
  for (const int threads : {1, 3}) {
    o.threads = threads;
    const std::string message = error_of(o);
    EXPECT_NE(message.find(path + ": line 2: "), std::string::npos) << message;
  }
}

TEST_F(PrepCorpusTest, InvalidUtf8NamesFileLineAndByteOffset) {
  const fs::path dir = temp_dir("utf8");
  const std::string jsonl = (dir / "bad.jsonl").string();
  write_bytes(jsonl, json_line("fine") + "{\"text\": \"bad \xFF byte\"}\n");
  PrepOptions o = options_for(dir / "out", {jsonl});
  o.jsonl_key = "text";
  o.val_fraction = 0;
  std::string what = error_of(o);
  // Line 1 is 23 bytes; the bad byte is at offset 14 of line 2.
  EXPECT_NE(what.find(jsonl + ": line 2: invalid UTF-8 at byte offset 37"), std::string::npos)
      << what;
  o.invalid_utf8 = InvalidUtf8::Replace;
  EXPECT_EQ(tokenizer_->decode(all_tokens(prepare_dataset(o).train_paths)),
            "<|endoftext|>fine<|endoftext|>bad \xEF\xBF\xBD byte");

  const std::string text = (dir / "bad.txt").string();
  write_bytes(text, "line one\nline two\nbad \xFF here\n");
  o = options_for(dir / "out2", {text});
  o.threads = 2;
  o.piece_bytes = 8;
  what = error_of(o);
  EXPECT_NE(what.find(text + ": line 3: invalid UTF-8 at byte offset 22"), std::string::npos)
      << what;
}

TEST_F(PrepCorpusTest, EmptyInputsAndEmptyCorporaAreErrorsNamingThem) {
  const fs::path dir = temp_dir("empty");
  const std::string empty = (dir / "empty.txt").string();
  write_bytes(empty, "");
  const std::string fine = (dir / "fine.txt").string();
  write_bytes(fine, "Some text.");
  std::string what = error_of(options_for(dir / "out", {fine, empty}));
  EXPECT_NE(what.find(empty + ": empty input file"), std::string::npos) << what;

  const std::string gz = (dir / "empty.txt.gz").string();
  write_gzip(gz, "");
  what = error_of(options_for(dir / "out", {gz}));
  EXPECT_NE(what.find(gz + ": empty input file"), std::string::npos) << what;

  const std::string blank = (dir / "blank.jsonl").string();
  write_bytes(blank, "\n  \n");
  PrepOptions o = options_for(dir / "out", {blank});
  o.jsonl_key = "text";
  what = error_of(o);
  EXPECT_NE(what.find(blank + ": holds no documents"), std::string::npos) << what;

  const std::string bad = (dir / "bad.jsonl").string();
  write_bytes(bad, "{}\n");
  o = options_for(dir / "out", {bad});
  o.jsonl_key = "text";
  o.skip_bad_lines = true;
  what = error_of(o);
  EXPECT_NE(what.find(bad + ": holds no documents"), std::string::npos) << what;
  EXPECT_FALSE(fs::exists(dir / "out" / "train.h5"));

  // A .jsonl file read as text is refused: the JSON would be tokenized as prose.
  what = error_of(options_for(dir / "out", {bad}));
  EXPECT_NE(what.find("--jsonl-key"), std::string::npos) << what;
}

TEST_F(PrepCorpusTest, DamagedCompressedInputIsAnErrorNamingTheFile) {
  const fs::path dir = temp_dir("damaged");
  const std::string text = read_bytes(kFixtures + "multilingual.txt");
  const std::string zst = (dir / "c.txt.zst").string();
  write_zstd(zst, text);
  std::string bytes = read_bytes(zst);
  EXPECT_EQ(read_text_file(zst), text);
  write_bytes(zst, bytes.substr(0, bytes.size() / 2));
  std::string what = error_of(options_for(dir / "out", {zst}));
  EXPECT_NE(what.find(zst + ": the zstd data is truncated"), std::string::npos) << what;
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x5A);
  bytes[bytes.size() / 2 + 1] = static_cast<char>(bytes[bytes.size() / 2 + 1] ^ 0x5A);
  write_bytes(zst, bytes);
  what = error_of(options_for(dir / "out", {zst}));
  EXPECT_EQ(what.rfind(zst + ": damaged zstd data", 0), 0U) << what;
  EXPECT_FALSE(fs::exists(dir / "out" / "train.h5"));
}

TEST_F(PrepCorpusTest, ShardsAreGlobbedInNameOrder) {
  const fs::path dir = temp_dir("glob");
  PrepOptions o = options_for(dir / "out", {kFixtures + "multilingual.txt"});
  o.val_fraction = 0;
  o.shard_tokens = 90;
  const PrepResult r = prepare_dataset(o);
  ASSERT_GE(r.train_paths.size(), 11U);  // train-00010.h5 sorts after train-00009.h5
  const TokenDataset globbed = TokenDataset::open({(dir / "out" / "train-*.h5").string()});
  ASSERT_EQ(globbed.shards().size(), r.train_paths.size());
  for (std::size_t i = 0; i < r.train_paths.size(); ++i)
    EXPECT_EQ(globbed.shards()[i].path, r.train_paths[i]);
  EXPECT_EQ(expand_shard_paths({r.train_paths[1], r.train_paths[0]}),
            (std::vector<std::string>{r.train_paths[1], r.train_paths[0]}));
  EXPECT_THROW(TokenDataset::open({(dir / "out" / "val-*.h5").string()}), InputError);
  // A rerun without shards removes the earlier shards: a glob must not mix two runs.
  o.shard_tokens = 0;
  prepare_dataset(o);
  EXPECT_FALSE(fs::exists(r.train_paths[0]));
  EXPECT_FALSE(fs::exists(dir / "out" / kPrepStateFile));
}

// A run stopped by an error part way: --resume keeps the complete shards, redoes the rest, and
// the result is the same files as an uninterrupted run.
TEST_F(PrepCorpusTest, ResumeKeepsCompleteShardsAndFinishesIdentically) {
  const fs::path dir = temp_dir("resume");
  PrepOptions o = options_for(dir / "clean", {kAusten});
  o.shard_tokens = 100000;
  o.split_block = 4096;
  o.piece_bytes = 128 << 10;
  o.threads = 2;
  const PrepResult clean = prepare_dataset(o);
  ASSERT_EQ(clean.train_paths.size(), 10U);

  o.output_dir = (dir / "cut").string();
  int pieces = 0;
  o.on_progress = [&](const PrepProgress&) {
    if (++pieces == 20) throw InputError("interrupted");
  };
  EXPECT_EQ(error_of(o), "interrupted");
  const auto state = read_prep_state(o.output_dir);
  ASSERT_TRUE(state.has_value());
  EXPECT_FALSE(state->finished);
  ASSERT_GT(state->train_shards, 0);
  EXPECT_TRUE(fs::exists(clean.train_paths[0]));
  for (const auto& entry : fs::directory_iterator(o.output_dir))
    EXPECT_FALSE(entry.path().string().ends_with(".tmp")) << entry.path();

  // Other settings are refused, naming the one that differs.
  o.on_progress = nullptr;
  o.resume = true;
  o.val_fraction = 0.1;
  EXPECT_NE(error_of(o).find("val_fraction is 0.1 now but was 0.05"), std::string::npos)
      << error_of(o);
  o.val_fraction = 0.05;

  const auto kept = fs::last_write_time(fs::path(o.output_dir) / "train-00000.h5");
  const PrepResult resumed = prepare_dataset(o);
  EXPECT_TRUE(resumed.resumed);
  EXPECT_LT(resumed.text_bytes, clean.text_bytes);  // it did not start over
  EXPECT_EQ(fs::last_write_time(fs::path(o.output_dir) / "train-00000.h5"), kept);
  EXPECT_EQ(resumed.documents, clean.documents);
  EXPECT_EQ(resumed.train_tokens, clean.train_tokens);
  ASSERT_EQ(resumed.train_paths.size(), clean.train_paths.size());
  ASSERT_EQ(resumed.val_paths.size(), clean.val_paths.size());
  for (std::size_t i = 0; i < clean.train_paths.size(); ++i)
    EXPECT_EQ(read_bytes(resumed.train_paths[i]), read_bytes(clean.train_paths[i])) << i;
  for (std::size_t i = 0; i < clean.val_paths.size(); ++i)
    EXPECT_EQ(read_bytes(resumed.val_paths[i]), read_bytes(clean.val_paths[i])) << i;

  // Resuming a finished run does nothing; a damaged complete shard is refused.
  EXPECT_TRUE(prepare_dataset(o).already_finished);
  write_bytes(resumed.train_paths[1], "not hdf5");
  EXPECT_NE(error_of(o).find("rerun without --resume"), std::string::npos);
}

}  // namespace
}  // namespace chimera::data
