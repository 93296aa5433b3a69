// The schedule library's speed: the planner generates and simulates many schedules, the runtime
// lowers one per run. Target: generate + lower + verify + simulate Chimera D=64, N=512 well
// under one second.
#include <benchmark/benchmark.h>

#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/lower.hpp"
#include "chimera/schedule/simulate.hpp"
#include "chimera/schedule/verify.hpp"

namespace {

using namespace chimera::schedule;

ScheduleRequest chimera_request(const benchmark::State& state, const char* variant) {
  return {"chimera", static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), variant, 0,
          0};
}

void set_ops_counter(benchmark::State& state, const Schedule& s) {
  std::size_t ops = 0;
  for (const auto& w : s.ops) ops += w.size();
  state.counters["ops"] = static_cast<double>(ops);
}

// The whole path the issue asks for, one iteration = one schedule.
void BM_ChimeraGenerateLowerVerifySimulate(benchmark::State& state, const char* variant) {
  const Costs costs = Costs::forward_backward(1, 2);
  for (auto _ : state) {
    const Schedule s = make_schedule(chimera_request(state, variant));
    const Program p = lower(s);
    verify(s);
    const SimResult r = simulate(s, costs);
    benchmark::DoNotOptimize(p.workers.data());
    benchmark::DoNotOptimize(r.makespan);
  }
  set_ops_counter(state, make_schedule(chimera_request(state, variant)));
}
BENCHMARK_CAPTURE(BM_ChimeraGenerateLowerVerifySimulate, direct, "direct")
    ->Args({64, 512})
    ->Args({8, 32})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ChimeraGenerateLowerVerifySimulate, halving, "halving")
    ->Args({64, 512})
    ->Unit(benchmark::kMillisecond);

// The parts on their own, for Chimera D=64, N=512.
void BM_Generate(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(make_schedule(chimera_request(state, "direct")));
}
BENCHMARK(BM_Generate)->Args({64, 512})->Unit(benchmark::kMillisecond);

void BM_Lower(benchmark::State& state) {
  const Schedule s = make_schedule(chimera_request(state, "direct"));
  for (auto _ : state) benchmark::DoNotOptimize(lower(s));
}
BENCHMARK(BM_Lower)->Args({64, 512})->Unit(benchmark::kMillisecond);

void BM_Verify(benchmark::State& state) {
  const Schedule s = make_schedule(chimera_request(state, "direct"));
  for (auto _ : state) benchmark::DoNotOptimize(check(s).ok);
}
BENCHMARK(BM_Verify)->Args({64, 512})->Unit(benchmark::kMillisecond);

// What the planner repeats: one prepared Simulator, new costs each run.
void BM_SimulatorRun(benchmark::State& state) {
  const Simulator sim(make_schedule(chimera_request(state, "direct")));
  double b = 1;
  for (auto _ : state) {
    b = b > 3 ? 1 : b + 0.25;
    benchmark::DoNotOptimize(sim.run(Costs::forward_backward(1, b)).makespan);
  }
}
BENCHMARK(BM_SimulatorRun)->Args({64, 512})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
