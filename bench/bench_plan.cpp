// The planner's speed: a full search for GPT-2 1.3B on 2,048 nodes (every W x D, B, scheme and
// variant, with and without recomputation), and one prediction with its schedule already built.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "chimera/core/config.hpp"
#include "chimera/plan/planner.hpp"

namespace {

using chimera::plan::Layout;
using chimera::plan::Machine;
using chimera::plan::ModelShape;
using chimera::plan::Predictor;

// The paper's GPT-2 1.3B and the P100 machine of jobscripts/configs/.
Predictor paper_predictor() {
  const std::filesystem::path configs =
      std::filesystem::path(__FILE__).parent_path().parent_path() / "jobscripts" / "configs";
  const chimera::Config config = chimera::Config::from_file(configs / "gpt2-1.3b.toml");
  Machine machine;
  machine.network = chimera::plan::parse_network("10us,8GB/s");
  machine.memory_bytes = 16.0 * (1 << 30);
  machine.reserve_bytes = 1.0 * (1 << 30);
  machine.compute.layers = chimera::plan::load_layer_costs(configs / "p100-costs.toml");
  machine.compute.optimizer_ns_per_param = machine.compute.layers->optimizer_ns_per_param;
  return Predictor(ModelShape(config.model, config.data.seq_len), machine);
}

void BM_PlanSearch2048Nodes(benchmark::State& state) {
  chimera::plan::PlanRequest request;
  request.nodes = 2048;
  request.global_batch = 2048;
  int layouts = 0;
  for (auto _ : state) {
    Predictor predict = paper_predictor();  // nothing cached between searches
    const chimera::plan::PlanResult r = chimera::plan::plan(request, predict);
    layouts = r.layouts;
    benchmark::DoNotOptimize(r.ranked.data());
  }
  state.counters["layouts"] = layouts;
  state.counters["layouts/s"] = benchmark::Counter(static_cast<double>(layouts),
                                                   benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PlanSearch2048Nodes)->Unit(benchmark::kMillisecond);

void BM_PredictChimera8PipesD32(benchmark::State& state) {
  Predictor predict = paper_predictor();
  const Layout layout{"chimera", "direct", 8, 0, 64, 32, 32, 1, false, false};
  predict(layout);  // builds and caches the schedule and simulator
  for (auto _ : state) benchmark::DoNotOptimize(predict(layout).iteration_ms);
}
BENCHMARK(BM_PredictChimera8PipesD32)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
