// Every scheme over D in {2,4,6,8,16,32} x N in {D,2D,4D,8D}: accepted exactly where its rules
// say, verified, every (micro-batch, stage) run exactly once, and the makespan on its formula
// where one exists. (The published Chimera code drops operations for D=8, N >= 24; this must not.)
#include <gtest/gtest.h>

#include <functional>
#include <optional>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/simulate.hpp"
#include "chimera/schedule/verify.hpp"
#include "schedule_test_util.hpp"

namespace chimera::schedule {
namespace {

using testing::request;

struct Case {
  std::string name;
  std::function<ScheduleRequest(int D, int N)> make;
  std::function<bool(int D, int N)> accepts;
  // Costs and the makespan they must give, where the scheme has a closed form.
  std::function<std::optional<std::pair<Costs, double>>(int D, int N)> formula;
};

Costs split_costs(double f, double i, double w) {
  Costs c = Costs::forward_backward(f, i + w);
  c.I = i;
  c.W = w;
  return c;
}

std::vector<Case> cases() {
  const Costs unit = Costs::forward_backward(1, 1);
  const Costs double_b = Costs::forward_backward(1, 2);
  auto always = [](int, int) { return true; };
  std::vector<Case> out = {
      {"gpipe", [](int D, int N) { return request("gpipe", D, N); }, always,
       [=](int D, int N) { return std::make_pair(unit, 2.0 * (N + D - 1)); }},
      {"1f1b", [](int D, int N) { return request("1f1b", D, N); }, always,
       [=](int D, int N) { return std::make_pair(unit, 2.0 * (N + D - 1)); }},
      {"gems", [](int D, int N) { return request("gems", D, N); },
       [](int, int N) { return N % 2 == 0; },
       [=](int D, int N) { return std::make_pair(unit, (D + 1.0) * N + D - 1); }},
      {"zb-h1", [](int D, int N) { return request("zb-h1", D, N); }, always,
       [](int D, int N) -> std::optional<std::pair<Costs, double>> {
         // (D-1)(F+I-W) bubble once the pipeline is full.
         if (N < D) return std::nullopt;
         return std::make_pair(split_costs(1, 1, 1), 3.0 * N + (D - 1));
       }},
      // The V's: worker D-1 waits (D-1)/2 for its first input, then never idles (test_vshape;
      // zb-v's greedy reaches that bound up to D = 4 only).
      {"zb-v", [](int D, int N) { return request("zb-v", D, N); }, always,
       [](int D, int N) -> std::optional<std::pair<Costs, double>> {
         if (N < D || D > 4) return std::nullopt;
         return std::make_pair(split_costs(1, 1, 1), 3.0 * N + (D - 1) / 2.0);
       }},
      {"dualpipev", [](int D, int N) { return request("dualpipev", D, N); },
       [](int D, int N) { return N >= 2 * D; },
       [](int D, int N) { return std::make_pair(split_costs(1, 1, 1), 3.0 * N + (D - 1) / 2.0); }},
      // BitPipe: D - 2 chunk forwards idle per worker at F = B (test_bitpipe); bitpipe-zb only
      // the middle workers' start-up wait of D/2 - 1 chunk forwards.
      {"bitpipe", [](int D, int N) { return request("bitpipe", D, N); },
       [](int D, int N) { return D % 2 == 0 && N % D == 0; },
       [=](int D, int N) { return std::make_pair(unit, 2.0 * N + (D - 2) / 2.0); }},
      {"bitpipe-zb", [](int D, int N) { return request("bitpipe-zb", D, N); },
       [](int D, int N) { return D % 2 == 0 && N % D == 0; },
       [](int D, int N) {
         return std::make_pair(split_costs(1, 1, 1), 3.0 * N + (D / 2 - 1) / 2.0);
       }},
  };
  for (int v : {2, 3}) {
    out.push_back(
        {"interleaved v=" + std::to_string(v),
         [v](int D, int N) { return request("interleaved", D, N, "", 0, v); },
         [](int D, int N) { return N % D == 0; },
         [=](int D, int N) { return std::make_pair(unit, 2.0 * N + 2.0 * (D - 1) / v); }});
  }
  for (int f : {1, 2, 4, 8, 16}) {
    const int pipes = 2 * f;
    auto valid_f = [f](int D) { return f <= D / 2 && (D / 2) % f == 0; };
    const std::string suffix = " pipes=" + std::to_string(pipes);
    out.push_back({"chimera direct" + suffix,
                   [pipes](int D, int N) { return request("chimera", D, N, "direct", pipes); },
                   [=](int D, int N) { return valid_f(D) && N % D == 0; },
                   [=](int D, int N) { return std::make_pair(unit, 2.0 * N + D / f - 2); }});
    out.push_back({"chimera doubling" + suffix,
                   [pipes](int D, int N) { return request("chimera", D, N, "doubling", pipes); },
                   [=](int D, int N) { return valid_f(D) && (N / pipes) % 2 == 0; },
                   [=](int D, int N) -> std::optional<std::pair<Costs, double>> {
                     // A doubled forward (2F) fills a backward's slot; D/f-2 idle slots of B.
                     if (N < 2 * D) return std::nullopt;
                     return std::make_pair(double_b, 3.0 * N + 2.0 * (D / f - 2));
                   }});
    out.push_back({"chimera halving" + suffix,
                   [pipes](int D, int N) { return request("chimera", D, N, "halving", pipes); },
                   [=](int D, int N) { return valid_f(D) && N % pipes == 0; },
                   [=](int D, int N) {
                     // Forward (two halves) = F = halved backward: D/f-2 idle slots of F.
                     return std::make_pair(double_b, 3.0 * N + D / f - 2);
                   }});
  }
  return out;
}

// Every (micro-batch, stage) runs its forward once and its backward once (or I and W once),
// counted independently of the verifier.
void expect_each_op_once(const Schedule& s, const std::string& what) {
  std::vector<int> forwards(static_cast<std::size_t>(s.stages) * s.schedule_micro_batches, 0);
  std::vector<int> backwards(forwards.size(), 0);
  for (const auto& ops : s.ops) {
    for (const Op& op : ops) {
      for (int m : op.mbs) {
        const std::size_t cell = static_cast<std::size_t>(op.stage) * s.schedule_micro_batches + m;
        if (op.kind == OpKind::F) forwards[cell] += 2;
        if (op.kind == OpKind::B) backwards[cell] += 2;
        if (op.kind == OpKind::I || op.kind == OpKind::W) backwards[cell] += 1;
      }
    }
  }
  for (std::size_t cell = 0; cell < forwards.size(); ++cell) {
    ASSERT_EQ(forwards[cell], 2) << what << ": stage " << cell / s.schedule_micro_batches << " mb "
                                 << cell % s.schedule_micro_batches;
    ASSERT_EQ(backwards[cell], 2) << what << ": stage " << cell / s.schedule_micro_batches << " mb "
                                  << cell % s.schedule_micro_batches;
  }
}

TEST(Sweep, EverySchemeOverDepthsAndMicroBatches) {
  int generated = 0;
  for (const Case& c : cases()) {
    for (int D : {2, 4, 6, 8, 16, 32}) {
      for (int k : {1, 2, 4, 8}) {
        const int N = k * D;
        const std::string what = c.name + " D=" + std::to_string(D) + " N=" + std::to_string(N);
        std::optional<Schedule> s;
        try {
          s = make_schedule(c.make(D, N));
        } catch (const InputError& e) {
          EXPECT_FALSE(c.accepts(D, N)) << what << " was refused: " << e.what();
          continue;
        }
        ASSERT_TRUE(c.accepts(D, N)) << what << " should have been refused";
        ++generated;
        const VerifyResult verdict = check(*s);
        ASSERT_TRUE(verdict.ok) << what << ": " << verdict.problem;
        expect_each_op_once(*s, what);
        if (const auto formula = c.formula(D, N)) {
          // Relative tolerance: v = 3 sums thirds.
          EXPECT_NEAR(simulate(*s, formula->first).makespan, formula->second,
                      1e-9 * formula->second)
              << what;
        }
      }
    }
  }
  EXPECT_GT(generated, 250);
}

}  // namespace
}  // namespace chimera::schedule
