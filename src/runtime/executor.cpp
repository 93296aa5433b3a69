#include "executor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "chimera/comm/doorbell.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/core/error.hpp"
#include "chimera/core/timer.hpp"

namespace chimera::runtime {

using schedule::Instr;
using schedule::InstrKind;
using schedule::Message;
using schedule::Op;
using schedule::OpKind;
using schedule::Payload;

struct Executor::Impl {
  const schedule::Schedule& sched;
  const comm::Topology& topo;
  const comm::Communicators& comms;
  StageCompute& compute;
  comm::GradSync& grad_sync;
  comm::WaitPolicy wait_policy;
  const std::vector<Instr>& program;
  // Senders ring their receivers, and receivers their senders once a message is in, so that a
  // waiting worker sleeps until then instead of polling (comm/doorbell.hpp).
  std::optional<comm::Doorbells> bells;

  std::vector<int> stage_key;  // model stage -> GradSync key (-1 if not held)
  int tied_key = -1;
  int tag_ub = 0;
  std::int64_t step = 0;  // the iteration running, for the watchdog's message

  // Message buffers (from compute.allocate_message): every activation and activation gradient
  // has the same size (B*T*C).
  std::vector<float*> storage;
  std::vector<float*> free_buffers;
  std::unordered_map<std::uint64_t, float*> mailbox;  // produced or received, not yet consumed
  struct PendingRecv {
    float* buffer;
    MPI_Request request;
  };
  std::unordered_map<std::uint64_t, PendingRecv> receives;
  struct PendingSend {
    float* buffer;
    MPI_Request request;
    int dst;
  };
  std::vector<PendingSend> sends;

  Impl(const schedule::Schedule& s, const schedule::Program& p, const comm::Topology& t,
       const comm::Communicators& c, StageCompute& sc, comm::GradSync& gs, comm::WaitPolicy wp)
      : sched(s),
        topo(t),
        comms(c),
        compute(sc),
        grad_sync(gs),
        wait_policy(wp),
        program(p.workers.at(static_cast<std::size_t>(t.worker))) {
    if (wp.doorbells) bells.emplace(c.pipeline());
    stage_key.assign(static_cast<std::size_t>(sched.stages), -1);
    for (const auto& g : compute.grad_buffers()) {
      const MPI_Comm comm = g.stage >= 0 ? comms.stage(g.stage) : comms.tied();
      auto sum = compute.make_grad_sum(g, comm);
      const int k = sum ? grad_sync.add(g.name, std::move(sum))
                        : grad_sync.add(g.name, g.data, g.count, comm);
      (g.stage >= 0 ? stage_key[static_cast<std::size_t>(g.stage)] : tied_key) = k;
    }
    void* value = nullptr;
    int flag = 0;
    MPI_CHECK(MPI_Comm_get_attr(comms.pipeline(), MPI_TAG_UB, &value, &flag));
    tag_ub = flag != 0 ? *static_cast<int*>(value) : 32767;
    const long long max_tag = 2LL * sched.stages * sched.micro_batches - 1;
    CHIMERA_REQUIRE(max_tag <= tag_ub,
                    "this MPI allows message tags up to {}, but {} stages x {} micro-batches need "
                    "{}: use fewer micro-batches per iteration",
                    tag_ub, sched.stages, sched.micro_batches, max_tag);
  }

  ~Impl() {
    for (float* b : storage) compute.deallocate_message(b);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  static std::uint64_t key(Payload payload, int stage, int mb) {
    return (static_cast<std::uint64_t>(stage) << 33) |
           (static_cast<std::uint64_t>(payload == Payload::Gradient) << 32) |
           static_cast<std::uint32_t>(mb);
  }
  int tag(const Message& m) const {
    return (m.stage * 2 + (m.payload == Payload::Gradient ? 1 : 0)) * sched.micro_batches + m.mb;
  }

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

  float* take(Payload payload, int stage, int mb) {
    const auto it = mailbox.find(key(payload, stage, mb));
    CHIMERA_CHECK(it != mailbox.end(),
                  "worker {}: {} of stage {} micro-batch {} is needed but was never received or "
                  "produced (lowering bug)",
                  topo.worker, payload == Payload::Gradient ? "gradient" : "activation", stage, mb);
    float* b = it->second;
    mailbox.erase(it);
    return b;
  }
  void put(Payload payload, int stage, int mb, float* buffer) {
    const bool fresh = mailbox.emplace(key(payload, stage, mb), buffer).second;
    CHIMERA_CHECK(fresh, "stage {} micro-batch {} produced twice", stage, mb);
  }

  // Completes finished sends (recycling their buffers) and progresses the allreduces; returns
  // whether an allreduce still runs.
  bool poll_allreduces() {
    for (std::size_t i = 0; i < sends.size();) {
      int done = 0;
      MPI_CHECK(MPI_Test(&sends[i].request, &done, MPI_STATUS_IGNORE));
      if (done != 0) {
        release(sends[i].buffer);
        sends[i] = sends.back();
        sends.pop_back();
      } else {
        ++i;
      }
    }
    return grad_sync.poll();
  }
  // The same; returns whether anything outstanding needs this worker's progress: a running
  // allreduce, or a send (a large message without a single-copy transport moves in fragments
  // that its sender pushes). A wait keeps its sleeps short while this holds.
  bool poll() { return poll_allreduces() || !sends.empty(); }
  static bool poll_cb(void* self) { return static_cast<Impl*>(self)->poll(); }

  // The world rank of worker `peer` of this pipeline group, as users see ranks.
  int world_rank(int peer) const { return topo.world_rank(topo.replica, peer); }

  // This worker's doorbell when `peer` can ring it, else null (the wait polls).
  const comm::Doorbells* bell_from(int peer) const {
    return bells && bells->shared_with(peer) ? &*bells : nullptr;
  }

  // Completes every outstanding send. The wait must not run poll(), which recycles completed
  // sends out of the very list being drained (a buffer released twice would be handed out
  // twice); it only progresses the allreduces.
  void drain_sends() {
    while (!sends.empty()) {
      const int dst = sends.back().dst;
      comm::wait(
          sends.back().request, wait_policy,
          [](void* gs) {
            static_cast<comm::GradSync*>(gs)->poll();
            return true;  // the send itself may need this worker's progress
          },
          &grad_sync, bell_from(dst),
          [&] { return fmt::format("send to rank {} (step {})", world_rank(dst), step + 1); });
      release(sends.back().buffer);
      sends.pop_back();
    }
  }

  void post_recv(const Message& m) {
    float* b = get_buffer();
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Irecv(b, static_cast<int>(compute.message_floats()), MPI_FLOAT, m.src, tag(m),
                        comms.pipeline(), &r));
    const bool fresh = receives.emplace(key(m.payload, m.stage, m.mb), PendingRecv{b, r}).second;
    CHIMERA_CHECK(fresh, "receive for stage {} micro-batch {} posted twice", m.stage, m.mb);
  }

  void wait_recv(const Message& m) {
    const auto it = receives.find(key(m.payload, m.stage, m.mb));
    CHIMERA_CHECK(it != receives.end(), "wait for a receive that was never posted (stage {} mb {})",
                  m.stage, m.mb);
    comm::wait(it->second.request, wait_policy, &poll_cb, this, bell_from(m.src), [&] {
      return fmt::format("recv of the {} of stage {}, micro-batch {} from rank {} (step {})",
                         m.payload == Payload::Gradient ? "gradient" : "activation", m.stage, m.mb,
                         world_rank(m.src), step + 1);
    });
    if (bells) bells->ring(m.src);  // the sender may be draining its sends
    put(m.payload, m.stage, m.mb, it->second.buffer);
    receives.erase(it);
  }

  void send(const Message& m) {
    float* b = take(m.payload, m.stage, m.mb);
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Isend(b, static_cast<int>(compute.message_floats()), MPI_FLOAT, m.dst, tag(m),
                        comms.pipeline(), &r));
    sends.push_back(PendingSend{b, r, m.dst});
    if (bells) bells->ring(m.dst);
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
          float* x = op.stage == 0 ? nullptr : take(Payload::Activation, op.stage - 1, mb);
          float* y = op.stage == last ? nullptr : get_buffer();
          loss_sum += compute.forward(op.stage, mb, x, op.stage == 0 ? in.tokens.at(umb) : nullptr,
                                      op.stage == last ? in.targets.at(umb) : nullptr, y);
          if (x != nullptr) release(x);
          if (y != nullptr) put(Payload::Activation, op.stage, mb, y);
          break;
        }
        case OpKind::B:
        case OpKind::I: {
          float* dy = op.stage == last ? nullptr : take(Payload::Gradient, op.stage + 1, mb);
          float* dx = op.stage == 0 ? nullptr : get_buffer();
          if (op.kind == OpKind::B) {
            compute.backward(op.stage, mb, dy, dx, loss_scale);
          } else {
            compute.backward_input(op.stage, mb, dy, dx, loss_scale);
          }
          if (dy != nullptr) release(dy);
          if (dx != nullptr) put(Payload::Gradient, op.stage, mb, dx);
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
    grad_sync.start(k);
  }
  void tied_grad_ready() {
    CHIMERA_CHECK(tied_key >= 0, "tied gradient ready on a worker that does not hold it");
    compute.finalize_tied_grads();
    grad_sync.start(tied_key);
  }
};

Executor::Executor(const schedule::Schedule& sched, const schedule::Program& program,
                   const comm::Topology& topo, const comm::Communicators& comms,
                   StageCompute& compute, comm::WaitPolicy wait_policy)
    : impl_(std::make_unique<Impl>(sched, program, topo, comms, compute, grad_sync_, wait_policy)) {
  // An emulated op wakes up only for allreduces: a real op does not progress messages either.
  compute.set_progress([impl = impl_.get()] { return impl->poll_allreduces(); });
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
  // Run-queue time inside and outside compute ops: what of the idle time was core sharing.
  const std::optional<double> queued_at_start = run_queue_.seconds();
  double compute_queued_s = 0.0;
  bool queue_known = queued_at_start.has_value();
  const auto& ops = x.sched.ops.at(static_cast<std::size_t>(x.topo.worker));
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
        break;
    }
    x.poll();
  }
  CHIMERA_CHECK(x.mailbox.empty() && x.receives.empty(),
                "worker {} ended the iteration with {} unconsumed messages (lowering bug)",
                x.topo.worker, x.mailbox.size() + x.receives.size());
  const double tail = now_seconds();
  x.drain_sends();
  grad_sync_.wait_all(x.wait_policy, [&] { return fmt::format("(step {})", step + 1); });
  const double end = now_seconds();
  r.grad_wait_s = end - tail;
  r.wall_s = end - start;
  const std::optional<double> queued_at_end = run_queue_.seconds();
  if (queue_known && queued_at_end)
    r.idle_queued_s = std::max(0.0, *queued_at_end - *queued_at_start - compute_queued_s);
  if (trace != nullptr) {
    for (const auto& t : grad_sync_.timings()) {
      record("allreduce " + t.name, io::TraceLane::Allreduce, t.start_s, t.done_s);
    }
  }
  return r;
}

}  // namespace chimera::runtime
