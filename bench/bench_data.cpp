// Data-path throughput: GPT-2 tokenization of the bundled Austen corpus (target >= 5 MB/s of
// text on one core), and reading training micro-batches from an HDF5 token dataset.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "chimera/data/dataset.hpp"
#include "chimera/data/dataset_writer.hpp"
#include "chimera/data/prep.hpp"
#include "chimera/data/sampler.hpp"
#include "chimera/data/tokenizer.hpp"

namespace {

const std::string kTokenizerDir = std::string(CHIMERA_SOURCE_DIR) + "/inputs/gpt2-tokenizer";

const std::string& austen() {
  static const std::string text = chimera::data::read_text_file(std::string(CHIMERA_SOURCE_DIR) +
                                                                "/inputs/austen/austen.txt.gz");
  return text;
}

// Encoding the whole corpus with a fresh tokenizer each time: the word cache starts empty, as
// in `chimera prep`.
void BM_EncodeAustenColdCache(benchmark::State& state) {
  const std::string& text = austen();
  for (auto _ : state) {
    state.PauseTiming();
    auto tokenizer = chimera::data::Tokenizer::load(kTokenizerDir);
    std::vector<std::int32_t> ids;
    ids.reserve(text.size() / 3);
    state.ResumeTiming();
    tokenizer.encode(text, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
}
BENCHMARK(BM_EncodeAustenColdCache)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// Text whose words are all cached: the pre-tokenizer and cache lookups alone.
void BM_EncodeAustenWarmCache(benchmark::State& state) {
  const std::string& text = austen();
  const auto tokenizer = chimera::data::Tokenizer::load(kTokenizerDir);
  std::vector<std::int32_t> ids;
  tokenizer.encode(text, ids);
  for (auto _ : state) {
    ids.clear();
    tokenizer.encode(text, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
}
BENCHMARK(BM_EncodeAustenWarmCache)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// Reads shuffled micro-batches of B samples of length T, as a first-stage rank does each step.
void BM_ReadMicroBatch(benchmark::State& state) {
  const int B = static_cast<int>(state.range(0)), T = static_cast<int>(state.range(1));
  const std::string path =
      (std::filesystem::temp_directory_path() / "chimera_bench_tokens.h5").string();
  {
    chimera::data::TokenDatasetWriter writer(path, 50257, 50256, "gpt2");
    std::vector<std::int32_t> tokens(std::size_t{1} << 23);
    for (std::size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = static_cast<std::int32_t>(i % 50257);
    writer.append(tokens);
    writer.finish();
  }
  const auto ds = chimera::data::TokenDataset::open({path});
  const chimera::data::EpochShuffle shuffle(ds.num_samples(T), 1);
  const chimera::data::BatchLayout layout{1, 1, B};
  std::int64_t step = 0;
  for (auto _ : state) {
    const auto samples = chimera::data::train_micro_batch(
        shuffle, layout, chimera::data::batch_start(step++, layout), 0, 0);
    auto batch = chimera::data::read_batch(ds, samples, T);
    benchmark::DoNotOptimize(batch.inputs.data());
  }
  state.SetItemsProcessed(state.iterations() * B);
  std::filesystem::remove(path);
}
BENCHMARK(BM_ReadMicroBatch)->Args({8, 1024})->Args({32, 256})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
