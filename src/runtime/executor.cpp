#include "executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "chimera/core/error.hpp"
#include "chimera/core/timer.hpp"

namespace chimera::runtime {

using schedule::Instr;
using schedule::InstrKind;
using schedule::Message;
using schedule::MessageKey;
using schedule::Op;
using schedule::OpKind;
using schedule::Payload;

struct Executor::Impl {
  const schedule::Schedule& sched;
  int worker;
  StageCompute& compute;
  comm::Transport& transport;
  const std::vector<Instr>& program;

  std::vector<int> stage_key;  // model stage -> sum key (-1 if not held)
  int tied_key = -1;
  std::int64_t step = 0;  // the iteration running, for the labels of waits

  // Message buffers (from compute.allocate_message): every activation and activation gradient
  // has the same size (B*T*C).
  std::vector<float*> storage;
  std::vector<float*> free_buffers;
  std::unordered_map<int, float*> mailbox;  // produced or received, not yet consumed
  struct PendingRecv {
    float* buffer;
    comm::Transport::Request request;
  };
  std::unordered_map<int, PendingRecv> receives;
  struct PendingSend {
    float* buffer;
    comm::Transport::Request request;
    int dst;
  };
  std::vector<PendingSend> sends;

  Impl(const schedule::Schedule& s, const schedule::Program& p, int w, StageCompute& sc,
       comm::Transport& t)
      : sched(s),
        worker(w),
        compute(sc),
        transport(t),
        program(p.workers.at(static_cast<std::size_t>(w))) {
    stage_key.assign(static_cast<std::size_t>(sched.stages), -1);
    if (sched.forward_only) return;  // no gradient is summed
    for (const auto& g : compute.grad_buffers()) {
      const int k = transport.add_sum(g);
      (g.stage >= 0 ? stage_key.at(static_cast<std::size_t>(g.stage)) : tied_key) = k;
    }
  }

  ~Impl() {
    for (float* b : storage) compute.deallocate_message(b);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  int key(const MessageKey& k) const { return k.index(sched.schedule_micro_batches); }

  float* get_buffer() {
    if (free_buffers.empty()) {
      storage.push_back(compute.allocate_message());
      return storage.back();
    }
    float* b = free_buffers.back();
    free_buffers.pop_back();
    return b;
  }
  void release(float* b) { free_buffers.push_back(b); }

  float* take(const MessageKey& k) {
    const auto it = mailbox.find(key(k));
    CHIMERA_CHECK(it != mailbox.end(),
                  "worker {}: {} of stage {} micro-batch {} is needed but was never received or "
                  "produced (lowering bug)",
                  worker, k.payload == Payload::Gradient ? "gradient" : "activation", k.stage,
                  k.mb);
    float* b = it->second;
    mailbox.erase(it);
    return b;
  }
  void put(const MessageKey& k, float* buffer) {
    const bool fresh = mailbox.emplace(key(k), buffer).second;
    CHIMERA_CHECK(fresh, "stage {} micro-batch {} produced twice", k.stage, k.mb);
  }

  // Progresses sends and sums, then recycles the buffers of completed sends.
  void poll() {
    transport.progress();
    for (std::size_t i = 0; i < sends.size();) {
      if (transport.test(sends[i].request)) {
        release(sends[i].buffer);
        sends[i] = sends.back();
        sends.pop_back();
      } else {
        ++i;
      }
    }
  }

  std::string message_label(const Message& m, bool send) const {
    const char* what = m.payload == Payload::Gradient ? "gradient" : "activation";
    return send ? fmt::format("send of the {} of stage {}, micro-batch {} to {} (step {})", what,
                              m.stage, m.mb, transport.peer_name(m.dst), step + 1)
                : fmt::format("recv of the {} of stage {}, micro-batch {} from {} (step {})", what,
                              m.stage, m.mb, transport.peer_name(m.src), step + 1);
  }

  void post_recv(const Message& m) {
    float* b = get_buffer();
    const auto r = transport.post_recv(m, b);
    const bool fresh = receives.emplace(key(m.key()), PendingRecv{b, r}).second;
    CHIMERA_CHECK(fresh, "receive for stage {} micro-batch {} posted twice", m.stage, m.mb);
  }

  void wait_recv(const Message& m) {
    const auto it = receives.find(key(m.key()));
    CHIMERA_CHECK(it != receives.end(), "wait for a receive that was never posted (stage {} mb {})",
                  m.stage, m.mb);
    transport.wait(it->second.request, [&] { return message_label(m, false); });
    put(m.key(), it->second.buffer);
    receives.erase(it);
  }

  void send(const Message& m) {
    float* b = take(m.key());
    sends.push_back(PendingSend{b, transport.send(m, b), m.dst});
  }

  // WaitSums: every send completed, then every sum.
  void wait_sums() {
    while (!sends.empty()) {
      const PendingSend s = sends.back();
      sends.pop_back();
      transport.wait(s.request, [&] {
        return fmt::format("send to {} (step {})", transport.peer_name(s.dst), step + 1);
      });
      release(s.buffer);
    }
    if (!sched.forward_only) {
      transport.wait_sums([&] { return fmt::format("(step {})", step + 1); });
    }
  }

  // WaitGather(s): the stage's weights are whole again (the all-gather after the last optimizer
  // step); with them the tied token table's, which the forwards of the first and last stages read.
  void wait_gather(int stage) {
    const auto label = [&] { return fmt::format("(step {})", step + 1); };
    transport.wait_gather(stage_key.at(static_cast<std::size_t>(stage)), label);
    if (stage == 0 || stage == sched.stages - 1) transport.wait_gather(tied_key, label);
  }

  // Output of (pipe, stage) for `mb` goes to the mailbox: a Send takes it from there, or the
  // next stage on this same worker consumes it directly.
  double run_op(const Op& op, const MicroBatchInputs& in, float loss_scale) {
    const int last = sched.stages - 1;
    double loss_sum = 0.0;
    for (const int mb : op.mbs) {
      const auto umb = static_cast<std::size_t>(mb);
      switch (op.kind) {
        case OpKind::F: {
          float* x =
              op.stage == 0 ? nullptr : take({Payload::Activation, op.pipe, op.stage - 1, mb});
          float* y = op.stage == last ? nullptr : get_buffer();
          loss_sum += compute.forward(op.stage, mb, x, op.stage == 0 ? in.tokens.at(umb) : nullptr,
                                      op.stage == last ? in.targets.at(umb) : nullptr, y,
                                      sched.forward_only ? 0.0F : loss_scale);
          if (x != nullptr) release(x);
          if (y != nullptr) put({Payload::Activation, op.pipe, op.stage, mb}, y);
          break;
        }
        case OpKind::B:
        case OpKind::I: {
          float* dy =
              op.stage == last ? nullptr : take({Payload::Gradient, op.pipe, op.stage + 1, mb});
          float* dx = op.stage == 0 ? nullptr : get_buffer();
          if (op.kind == OpKind::B) {
            compute.backward(op.stage, mb, dy, dx);
          } else {
            compute.backward_input(op.stage, mb, dy, dx);
          }
          if (dy != nullptr) release(dy);
          if (dx != nullptr) put({Payload::Gradient, op.pipe, op.stage, mb}, dx);
          break;
        }
        case OpKind::W:
          compute.backward_weight(op.stage, mb);
          break;
      }
    }
    return loss_sum;
  }

  void grad_ready(int stage) {
    const int k = stage_key.at(static_cast<std::size_t>(stage));
    CHIMERA_CHECK(k >= 0, "gradient of stage {} marked ready on a worker that does not hold it",
                  stage);
    transport.start_sum(k);
  }

  void tied_grad_ready() {
    CHIMERA_CHECK(tied_key >= 0, "tied gradient ready on a worker that does not hold it");
    compute.finalize_tied_grads();
    transport.start_sum(tied_key);
  }
};

Executor::Executor(const schedule::Schedule& sched, const schedule::Program& program, int worker,
                   StageCompute& compute, comm::Transport& transport)
    : impl_(std::make_unique<Impl>(sched, program, worker, compute, transport)) {
  // Ops progress the messages and sums between their blocks (StageCompute::set_progress).
  compute.set_progress([impl = impl_.get()] { return impl->transport.progress(); });
}

Executor::~Executor() {
  impl_->compute.set_progress({});
}

IterationResult Executor::run(std::int64_t step, const MicroBatchInputs& inputs, float loss_scale,
                              std::vector<io::TraceEvent>* trace, double trace_origin_s) {
  Impl& x = *impl_;
  CHIMERA_CHECK(x.mailbox.empty() && x.receives.empty() && x.sends.empty(),
                "messages left over from the previous iteration");
  x.step = step;
  auto record = [&](std::string name, io::TraceLane lane, double t0, double t1) {
    if (trace != nullptr) {
      trace->push_back(io::TraceEvent{std::move(name), lane, (t0 - trace_origin_s) * 1e6,
                                      (t1 - t0) * 1e6, step});
    }
  };

  IterationResult r;
  const double start = now_seconds();
  double tail = start;  // when WaitSums began
  // Run-queue time inside and outside compute ops: what of the idle time was core sharing.
  const std::optional<double> queued_at_start = run_queue_.seconds();
  double compute_queued_s = 0.0;
  bool queue_known = queued_at_start.has_value();
  const auto& ops = x.sched.ops.at(static_cast<std::size_t>(x.worker));
  for (const Instr& in : x.program) {
    switch (in.kind) {
      case InstrKind::PostRecv:
        x.post_recv(in.msg);
        break;
      case InstrKind::WaitRecv: {
        const double t0 = now_seconds();
        x.wait_recv(in.msg);
        const double t1 = now_seconds();
        if (t1 - t0 > 20e-6) {  // only waits long enough to matter; keeps traces small
          record(fmt::format("wait {}{} s{}", in.msg.payload == Payload::Gradient ? "dX" : "X",
                             in.msg.mb, in.msg.stage),
                 io::TraceLane::P2P, t0, t1);
        }
        break;
      }
      case InstrKind::Compute: {
        const Op& op = ops.at(static_cast<std::size_t>(in.op_index));
        const std::optional<double> q0 = run_queue_.seconds();
        const double t0 = now_seconds();
        const double loss = x.run_op(op, inputs, loss_scale);
        const double t1 = now_seconds();
        const std::optional<double> q1 = run_queue_.seconds();
        r.compute_s += t1 - t0;
        if (q0 && q1) {
          compute_queued_s += *q1 - *q0;
        } else {
          queue_known = false;
        }
        if (op.kind == OpKind::F && op.stage == x.sched.stages - 1) {
          r.loss_sum += loss;
          r.loss_count += static_cast<int>(op.mbs.size());
        }
        record(schedule::op_label(x.sched, op), io::TraceLane::Compute, t0, t1);
        break;
      }
      case InstrKind::Send:
        x.send(in.msg);
        break;
      case InstrKind::GradReady:
        x.grad_ready(in.stage);
        break;
      case InstrKind::TiedGradReady:
        x.tied_grad_ready();
        break;
      case InstrKind::WaitSums:
        CHIMERA_CHECK(x.mailbox.empty() && x.receives.empty(),
                      "worker {} ended the iteration with {} unconsumed messages (lowering bug)",
                      x.worker, x.mailbox.size() + x.receives.size());
        tail = now_seconds();
        x.wait_sums();
        break;
      case InstrKind::WaitGather: {
        const double t0 = now_seconds();
        x.wait_gather(in.stage);
        const double t1 = now_seconds();
        if (t1 - t0 > 20e-6)
          record(fmt::format("wait gather s{}", in.stage), io::TraceLane::P2P, t0, t1);
        break;
      }
    }
    x.poll();
  }
  const double end = now_seconds();
  r.grad_wait_s = end - tail;
  r.wall_s = end - start;
  const std::optional<double> queued_at_end = run_queue_.seconds();
  if (queue_known && queued_at_end)
    r.idle_queued_s = std::max(0.0, *queued_at_end - *queued_at_start - compute_queued_s);
  if (trace != nullptr) {
    for (const auto& t : x.transport.sum_timings()) {
      if (t.start_s > 0)
        record("allreduce " + t.name, io::TraceLane::Allreduce, t.start_s, t.done_s);
    }
  }
  return r;
}

}  // namespace chimera::runtime
