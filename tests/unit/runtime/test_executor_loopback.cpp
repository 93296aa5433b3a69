// The executor run directly, without MPI: every worker of every replica as a thread on the
// in-process loopback transport. Property: for every generator over a grid of D, N and variants,
// and for randomly reordered but valid schedules, every program completes and every rank ends
// with exactly the summed gradients a sequential reference computes; an invalid reordering is
// refused by the verifier before anything runs, and a broken program fails by a timed-out wait,
// never by a hang.
#include <gtest/gtest.h>

#include <exception>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "chimera/comm/loopback_transport.hpp"
#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/lower.hpp"
#include "chimera/schedule/verify.hpp"
#include "executor.hpp"  // src/runtime: internal to the runtime

namespace chimera::runtime {
namespace {

using schedule::Schedule;

constexpr std::size_t kFloats = 3;  // floats per message

// Small integers keep every product and sum exact in float, so results compare bit for bit.
float parameter(int stage, std::size_t i) {
  return 1.0F + static_cast<float>((stage + static_cast<int>(i)) % 2);
}
std::int32_t token(int replica, int mb, std::size_t i) {
  return 1 + (replica + mb + static_cast<int>(i)) % 3;
}
std::int32_t target(int replica, int mb, std::size_t i) {
  return 1 + (replica * 7 + mb * 3 + static_cast<int>(i)) % 2;
}

// A toy model: stage s scales its input elementwise by its parameter; the last stage's loss is
// sum(a * x * target). Stage 0 and the last stage also feed a "tied" parameter's gradient (the
// sum of their inputs), added to the tied buffer only in finalize_tied_grads, like GPT-2's token
// table. Split backward: I makes the input gradient, W the parameter gradient.
class ToyCompute final : public StageCompute {
 public:
  // `inference`: forward only, nothing kept for a backward (evaluation).
  ToyCompute(int stages, const std::vector<int>& held, bool inference)
      : stages_(stages), inference_(inference) {
    for (const int s : held) grads_[s].assign(kFloats, 0.0F);
    if (grads_.count(0) > 0 || grads_.count(stages - 1) > 0) grads_[-1].assign(kFloats, 0.0F);
    tied_pending_.assign(kFloats, 0.0F);
  }

  std::size_t message_floats() const override { return kFloats; }

  // A sharded optimizer's programs: the stages (-1: tied) whose weights were awaited since the
  // last optimizer step; a forward must find its stage's there (and at either end the tied one).
  void require_whole_weights(const std::set<int>* whole) { whole_ = whole; }

  float forward(int stage, int mb, const float* in, const std::int32_t* tokens,
                const std::int32_t* targets, float* out, float loss_scale) override {
    if (whole_ != nullptr) {
      EXPECT_TRUE(whole_->contains(stage)) << "forward of stage " << stage << " before its gather";
      if (stage == 0 || stage == stages_ - 1) {
        EXPECT_TRUE(whole_->contains(-1))
            << "forward of stage " << stage << " before the tied gather";
      }
    }
    // Training forwards carry the loss gradient's scale (the last stage computes it there);
    // evaluation forwards carry none.
    EXPECT_EQ(loss_scale != 0.0F, !inference_);
    std::vector<float> x(kFloats);
    for (std::size_t i = 0; i < kFloats; ++i) {
      x[i] = stage == 0 ? static_cast<float>(tokens[i]) : in[i];
    }
    if (!inference_) saved_x_[{stage, mb}] = x;
    if (stage == stages_ - 1) {
      std::vector<float> t(kFloats);
      float loss = 0.0F;
      for (std::size_t i = 0; i < kFloats; ++i) {
        t[i] = static_cast<float>(targets[i]);
        loss += parameter(stage, i) * x[i] * t[i];
      }
      if (!inference_) saved_dy_[{stage, mb}] = t;  // d loss / d (a * x) = target
      return loss;
    }
    for (std::size_t i = 0; i < kFloats; ++i) out[i] = parameter(stage, i) * x[i];
    return 0.0F;
  }

  void backward(int stage, int mb, const float* grad_out, float* grad_in) override {
    backward_input(stage, mb, grad_out, grad_in);
    backward_weight(stage, mb);
  }
  void backward_input(int stage, int mb, const float* grad_out, float* grad_in) override {
    if (stage != stages_ - 1) saved_dy_[{stage, mb}].assign(grad_out, grad_out + kFloats);
    const auto& dy = saved_dy_.at({stage, mb});
    if (grad_in != nullptr) {
      for (std::size_t i = 0; i < kFloats; ++i) grad_in[i] = parameter(stage, i) * dy[i];
    }
  }
  void backward_weight(int stage, int mb) override {
    const auto x = saved_x_.at({stage, mb});
    const auto dy = saved_dy_.at({stage, mb});
    auto& g = grads_.at(stage);
    for (std::size_t i = 0; i < kFloats; ++i) {
      g[i] += x[i] * dy[i];
      if (stage == 0 || stage == stages_ - 1) tied_pending_[i] += x[i];
    }
    saved_x_.erase({stage, mb});
    saved_dy_.erase({stage, mb});
  }

  void zero_grad() override {
    for (auto& [stage, g] : grads_) std::fill(g.begin(), g.end(), 0.0F);
  }
  void finalize_tied_grads() override {
    auto& g = grads_.at(-1);
    for (std::size_t i = 0; i < kFloats; ++i) g[i] += tied_pending_[i];
    std::fill(tied_pending_.begin(), tied_pending_.end(), 0.0F);
  }
  std::vector<GradBuffer> grad_buffers() override {
    std::vector<GradBuffer> out;
    for (auto& [stage, g] : grads_) {
      out.push_back(
          {stage < 0 ? "tied" : "stage " + std::to_string(stage), stage, g.data(), g.size()});
    }
    return out;
  }
  std::int64_t peak_activation_bytes() const override { return 0; }
  void reset_peak_activation_bytes() override {}

  const std::map<int, std::vector<float>>& grads() const { return grads_; }
  bool holds_activations() const { return !saved_x_.empty(); }

 private:
  int stages_;
  bool inference_;
  std::map<int, std::vector<float>> grads_;  // stage (-1: tied) -> gradient
  std::vector<float> tied_pending_;
  std::map<std::pair<int, int>, std::vector<float>> saved_x_, saved_dy_;
  const std::set<int>* whole_ = nullptr;
};

// The loopback transport, recording which buffers' gathered weights the executor awaited
// (sharded optimizer); start_gathers() (after the optimizer step) makes every buffer's stale.
class GatherRecorder final : public comm::Transport {
 public:
  explicit GatherRecorder(comm::Transport& inner) : inner_(inner) {}
  const std::set<int>& whole() const { return whole_; }

  Request post_recv(const schedule::Message& m, float* buffer) override {
    return inner_.post_recv(m, buffer);
  }
  Request send(const schedule::Message& m, const float* buffer) override {
    return inner_.send(m, buffer);
  }
  bool test(Request r) override { return inner_.test(r); }
  void wait(Request r, const comm::WaitLabel& label) override { inner_.wait(r, label); }
  int add_sum(const GradBuffer& buffer) override {
    const int key = inner_.add_sum(buffer);
    stage_of_key_[key] = buffer.stage;
    return key;
  }
  void start_sum(int key) override { inner_.start_sum(key); }
  bool progress() override { return inner_.progress(); }
  void wait_sums(const comm::WaitLabel& context) override { inner_.wait_sums(context); }
  void start_gathers() override { whole_.clear(); }
  void wait_gather(int key, const comm::WaitLabel& /*context*/) override {
    if (key >= 0) whole_.insert(stage_of_key_.at(key));
  }
  std::vector<comm::SumTiming> sum_timings() const override { return inner_.sum_timings(); }
  std::string peer_name(int worker) const override { return inner_.peer_name(worker); }

 private:
  comm::Transport& inner_;
  std::map<int, int> stage_of_key_;
  std::set<int> whole_;
};

struct Expected {
  std::map<int, std::vector<float>> grads;  // summed over replicas and micro-batches
  double loss = 0.0;                        // summed over replicas and micro-batches
};

// The same model run one micro-batch at a time, stage after stage.
Expected reference(int stages, int micro_batches, int replicas, bool forward_only) {
  Expected e;
  for (int s = -1; s < stages; ++s) e.grads[s].assign(kFloats, 0.0F);
  for (int r = 0; r < replicas; ++r) {
    for (int m = 0; m < micro_batches; ++m) {
      std::vector<std::vector<float>> x(static_cast<std::size_t>(stages),
                                        std::vector<float>(kFloats));
      for (std::size_t i = 0; i < kFloats; ++i) x[0][i] = static_cast<float>(token(r, m, i));
      for (int s = 1; s < stages; ++s) {
        for (std::size_t i = 0; i < kFloats; ++i) x[s][i] = parameter(s - 1, i) * x[s - 1][i];
      }
      std::vector<float> dy(kFloats);
      for (std::size_t i = 0; i < kFloats; ++i) {
        dy[i] = static_cast<float>(target(r, m, i));
        e.loss += parameter(stages - 1, i) * x[stages - 1][i] * dy[i];
      }
      if (forward_only) continue;
      for (int s = stages - 1; s >= 0; --s) {
        for (std::size_t i = 0; i < kFloats; ++i) {
          e.grads[s][i] += x[s][i] * dy[i];
          if (s == 0 || s == stages - 1) e.grads[-1][i] += x[s][i];
          dy[i] *= parameter(s, i);
        }
      }
    }
  }
  return e;
}

std::string name(const Schedule& s) {
  return s.scheme + " " + s.variant + " D=" + std::to_string(s.workers) +
         " stages=" + std::to_string(s.stages) + " N=" + std::to_string(s.schedule_micro_batches) +
         " pipes=" + std::to_string(s.pipes());
}

struct RunResult {
  std::vector<std::vector<std::map<int, std::vector<float>>>> grads;  // [replica][worker]
  double loss = 0.0;
};

// Runs `iterations` of `program` on replicas x workers threads; rethrows the first failure.
// `sharded`: the program has WaitGathers, and each forward checks that its stage's weights were
// awaited since the last optimizer step (start_gathers between iterations).
RunResult run_loopback(const Schedule& s, const schedule::Program& program, int replicas,
                       int iterations, double timeout_s = 20.0, bool sharded = false) {
  comm::LoopbackHub hub(kFloats, timeout_s);
  const int D = s.workers;
  std::vector<std::unique_ptr<comm::LoopbackTransport>> loopbacks;
  std::vector<std::unique_ptr<GatherRecorder>> transports;
  std::vector<std::unique_ptr<ToyCompute>> computes;
  std::vector<std::unique_ptr<Executor>> executors;
  std::vector<MicroBatchInputs> inputs(static_cast<std::size_t>(replicas * D));
  std::vector<std::vector<std::int32_t>> token_data, target_data;
  // Every executor registers its sums before any thread starts one.
  for (int r = 0; r < replicas; ++r) {
    for (int w = 0; w < D; ++w) {
      std::vector<int> held;
      for (const auto& pipe : s.placement) {
        for (int st = 0; st < s.stages; ++st) {
          if (pipe[static_cast<std::size_t>(st)] == w &&
              std::find(held.begin(), held.end(), st) == held.end()) {
            held.push_back(st);
          }
        }
      }
      loopbacks.push_back(std::make_unique<comm::LoopbackTransport>(hub, r, w));
      transports.push_back(std::make_unique<GatherRecorder>(*loopbacks.back()));
      computes.push_back(std::make_unique<ToyCompute>(s.stages, held, s.forward_only));
      if (sharded) computes.back()->require_whole_weights(&transports.back()->whole());
      executors.push_back(
          std::make_unique<Executor>(s, program, w, *computes.back(), *transports.back()));
      for (int m = 0; m < s.schedule_micro_batches; ++m) {
        std::vector<std::int32_t> tok(kFloats), tgt(kFloats);
        for (std::size_t i = 0; i < kFloats; ++i) {
          tok[i] = token(r, m, i);
          tgt[i] = target(r, m, i);
        }
        token_data.push_back(tok);
        target_data.push_back(tgt);
      }
    }
  }
  std::size_t row = 0;
  for (auto& in : inputs) {
    for (int m = 0; m < s.schedule_micro_batches; ++m, ++row) {
      in.tokens.push_back(token_data[row].data());
      in.targets.push_back(target_data[row].data());
    }
  }
  std::vector<std::exception_ptr> errors(executors.size());
  std::vector<double> losses(executors.size(), 0.0);
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < executors.size(); ++k) {
    threads.emplace_back([&, k] {
      try {
        for (int it = 0; it < iterations; ++it) {
          computes[k]->zero_grad();
          const IterationResult res = executors[k]->run(it, inputs[k], 1.0F, nullptr, 0.0);
          losses[k] = res.loss_sum;
          transports[k]->start_gathers();  // the optimizer step: every weight is stale
        }
      } catch (...) {
        errors[k] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  RunResult out;
  out.grads.resize(static_cast<std::size_t>(replicas));
  for (int r = 0; r < replicas; ++r) {
    for (int w = 0; w < D; ++w) {
      const auto& c = *computes[static_cast<std::size_t>(r * D + w)];
      EXPECT_FALSE(c.holds_activations()) << name(s) << ": activations left after the iteration";
      out.grads[static_cast<std::size_t>(r)].push_back(c.grads());
      out.loss += losses[static_cast<std::size_t>(r * D + w)];
    }
  }
  return out;
}

// Runs the schedule and checks losses and every rank's summed gradients against the reference.
void expect_right_gradients(const Schedule& s, int replicas) {
  const schedule::Program program = schedule::lower(s);
  const RunResult got = run_loopback(s, program, replicas, 2);
  const Expected want = reference(s.stages, s.schedule_micro_batches, replicas, s.forward_only);
  EXPECT_EQ(got.loss, want.loss) << name(s) << " W=" << replicas;
  for (int r = 0; r < replicas; ++r) {
    for (int w = 0; w < s.workers; ++w) {
      for (const auto& [stage, g] :
           got.grads[static_cast<std::size_t>(r)][static_cast<std::size_t>(w)]) {
        const auto& expect =
            s.forward_only ? std::vector<float>(kFloats, 0.0F) : want.grads.at(stage);
        EXPECT_EQ(g, expect) << name(s) << " W=" << replicas << " replica " << r << " worker " << w
                             << (stage < 0 ? " tied" : " stage " + std::to_string(stage));
      }
    }
  }
}

std::vector<Schedule> grid() {
  std::vector<Schedule> out;
  auto add = [&](const std::string& scheme, int D, int N, const std::string& variant = "",
                 int pipes = 0, int v = 0) {
    out.push_back(schedule::make_schedule({scheme, D, N, variant, pipes, v}));
  };
  for (const int D : {2, 4, 6}) {
    for (const int N : {D, 2 * D}) {
      add("gpipe", D, N);
      add("1f1b", D, N);
      add("gems", D, N);
      add("zb-h1", D, N);
      add("zb-v", D, N);
      if (N >= 2 * D) add("dualpipev", D, N);
      add("interleaved", D, N, "", 0, 2);
      add("chimera", D, N, "direct");
      add("chimera", D, N, "halving");
      add("chimera-zb", D, N);
      if ((N / 2) % 2 == 0) add("chimera", D, N, "doubling");
      add("bitpipe", D, N);
      add("bitpipe-zb", D, N);
      add("v-half", D, N);
      add("v-min", D, N);
    }
  }
  add("chimera", 8, 16, "direct", 4);
  add("chimera", 8, 8, "doubling");
  add("gems", 3, 4);
  add("1f1b", 5, 7);
  add("zb-v", 3, 1);  // fewer micro-batches than workers
  add("dualpipev", 3, 7);
  add("v-half", 3, 1);
  add("v-min", 3, 2);
  return out;
}

TEST(ExecutorLoopback, EveryGeneratorGivesTheSequentialGradients) {
  for (const Schedule& s : grid()) {
    for (const int replicas : {1, 2}) expect_right_gradients(s, replicas);
  }
}

// With a sharded optimizer every forward of a stage finds the stage's weights (and at either end
// the tied table's) awaited since the last optimizer step: the program's WaitGathers, which the
// executor turns into the transport's waits.
TEST(ExecutorLoopback, ShardedProgramsAwaitEachStagesWeightsBeforeItsForwards) {
  for (const Schedule& s : grid()) {
    const schedule::Program program = schedule::lower(s, {.shard_optimizer = true});
    run_loopback(s, program, 2, 2, 20.0, /*sharded=*/true);
  }
}

TEST(ExecutorLoopback, ForwardOnlySchedulesGiveTheLossAndSumNothing) {
  for (const Schedule& s : grid()) expect_right_gradients(schedule::forward_only(s), 2);
}

TEST(ExecutorLoopback, RandomValidReorderingsRunAndInvalidOnesAreRefused) {
  std::mt19937 rng(20261203);
  int valid = 0, refused = 0;
  for (const Schedule& base : grid()) {
    Schedule s = base;
    for (int attempt = 0; attempt < 12; ++attempt) {
      std::uniform_int_distribution<int> pick_worker(0, s.workers - 1);
      auto& ops = s.ops[static_cast<std::size_t>(pick_worker(rng))];
      if (ops.size() < 2) continue;
      std::uniform_int_distribution<std::size_t> pick(0, ops.size() - 2);
      const std::size_t k = pick(rng);
      std::swap(ops[k], ops[k + 1]);
      if (schedule::check(s).ok) {
        ++valid;
        continue;
      }
      ++refused;
      EXPECT_THROW(schedule::lower(s), Error) << name(s);
      std::swap(ops[k], ops[k + 1]);  // back to the last valid order
    }
    ASSERT_TRUE(schedule::check(s).ok);
    expect_right_gradients(s, 2);
  }
  // Both kinds happened (the property is not vacuous).
  EXPECT_GT(valid, 50);
  EXPECT_GT(refused, 20);
}

TEST(ExecutorLoopback, ABrokenProgramFailsByATimedOutWaitNotAHang) {
  const Schedule s = schedule::make_schedule({"1f1b", 4, 4, "", 0, 0});
  schedule::Program program = schedule::lower(s);
  auto& code = program.workers[1];
  code.erase(std::find_if(code.begin(), code.end(), [](const schedule::Instr& in) {
    return in.kind == schedule::InstrKind::Send;
  }));
  EXPECT_THROW(verify_program(s, program), Error);  // the verifier catches it first
  try {
    run_loopback(s, program, 1, 1, 1.0);
    ADD_FAILURE() << "a program missing a send completed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(deadlock?)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace chimera::runtime
