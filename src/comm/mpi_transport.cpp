#include "chimera/comm/mpi_transport.hpp"

#include <fmt/format.h>

#include "chimera/comm/rank_hosts.hpp"
#include "chimera/core/error.hpp"

namespace chimera::comm {

using schedule::Message;
using schedule::Payload;

MpiTransport::MpiTransport(const schedule::Schedule& sched, const Topology& topo,
                           const Communicators& comms, WaitPolicy policy,
                           std::size_t message_floats, SumFactory make_sum)
    : micro_batches_(sched.schedule_micro_batches),
      topo_(topo),
      comms_(comms),
      policy_(policy),
      floats_(message_floats),
      make_sum_(std::move(make_sum)) {
  CHIMERA_CHECK(floats_ <= static_cast<std::size_t>(INT_MAX),
                "a message of {} floats is more than one MPI call can send", floats_);
  if (policy.doorbells) bells_.emplace(comms.pipeline());
  int group = 0;
  MPI_CHECK(MPI_Comm_size(comms.pipeline(), &group));
  received_from_.assign(static_cast<std::size_t>(group), 0);
  void* value = nullptr;
  int flag = 0;
  MPI_CHECK(MPI_Comm_get_attr(comms.pipeline(), MPI_TAG_UB, &value, &flag));
  const int tag_ub = flag != 0 ? *static_cast<int*>(value) : 32767;
  const std::int64_t max_tag = schedule::message_key_count(sched) - 1;
  CHIMERA_REQUIRE(max_tag <= tag_ub,
                  "this MPI allows message tags up to {}, but {} stages x {} micro-batches need "
                  "{}: use fewer micro-batches per iteration",
                  tag_ub, sched.stages, sched.schedule_micro_batches, max_tag);
}

int MpiTransport::tag(const Message& m) const {
  return m.key().index(micro_batches_);
}

Transport::Request MpiTransport::add(MPI_Request request, int peer, bool send) {
  const Pending p{request, peer, send, false};
  if (free_.empty()) {
    pending_.push_back(p);
    return static_cast<Request>(pending_.size()) - 1;
  }
  const Request r = free_.back();
  free_.pop_back();
  pending_[static_cast<std::size_t>(r)] = p;
  return r;
}

Transport::Request MpiTransport::post_recv(const Message& m, float* buffer) {
  MPI_Request r = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Irecv(buffer, static_cast<int>(floats_), MPI_FLOAT, m.src, tag(m),
                      comms_.pipeline(), &r));
  return add(r, m.src, false);
}

Transport::Request MpiTransport::send(const Message& m, const float* buffer) {
  MPI_Request r = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Isend(buffer, static_cast<int>(floats_), MPI_FLOAT, m.dst, tag(m),
                      comms_.pipeline(), &r));
  if (bells_) bells_->announce(m.dst);
  return add(r, m.dst, true);
}

bool MpiTransport::test(Request r) {
  Pending& p = pending_.at(static_cast<std::size_t>(r));
  if (!p.done && !p.send) {  // progress_all() has just tested the sends
    int done = 0;
    MPI_CHECK(MPI_Test(&p.request, &done, MPI_STATUS_IGNORE));
    p.done = done != 0;
    if (p.done) ++received_from_[static_cast<std::size_t>(p.peer)];
  }
  if (p.done) free_.push_back(r);
  return p.done;
}

MpiTransport::Outstanding MpiTransport::progress_all() {
  bool sending = false;
  for (Pending& p : pending_) {
    if (!p.send || p.done || p.request == MPI_REQUEST_NULL) continue;
    int done = 0;
    MPI_CHECK(MPI_Test(&p.request, &done, MPI_STATUS_IGNORE));
    p.done = done != 0;
    sending = sending || !p.done;
  }
  const bool summing = sums_.poll();
  return {summing, sending};
}

void MpiTransport::wait(Request r, const WaitLabel& label) {
  Pending& p = pending_.at(static_cast<std::size_t>(r));
  if (!p.done) {
    // Between tests, the other sends and the sums progress; a send's wait stays short, since
    // the send itself may need this rank's progress.
    const bool is_send = p.send;
    struct Poll {
      MpiTransport* self;
      bool is_send;
    } poll{this, is_send};
    comm::wait(
        p.request, policy_,
        [](void* arg) {
          auto& x = *static_cast<Poll*>(arg);
          const Outstanding o = x.self->progress_all();
          return o.sums || o.sends || x.is_send;
        },
        &poll, bells_ && bells_->shared_with(p.peer) ? &*bells_ : nullptr, label,
        p.send ? std::nullopt
               : std::optional<Announced>(
                     Announced{p.peer, received_from_[static_cast<std::size_t>(p.peer)]}));
    p.done = true;
    if (!p.send) ++received_from_[static_cast<std::size_t>(p.peer)];
  }
  // A sender draining its sends may sleep on its bell: tell it its message is in.
  if (!p.send && bells_) bells_->ring(p.peer);
  free_.push_back(r);
}

int MpiTransport::add_sum(const GradBuffer& g) {
  const MPI_Comm comm = g.stage >= 0 ? comms_.stage(g.stage) : comms_.tied();
  return sums_.add(g, comm, make_sum_);
}

void MpiTransport::start_sum(int key) {
  sums_.start(key);
}

bool MpiTransport::progress() {
  return progress_all().sums;
}

void MpiTransport::wait_sums(const WaitLabel& context) {
  sums_.wait_all(policy_, context);
}

void MpiTransport::start_gathers() {
  sums_.start_gathers();
}

void MpiTransport::wait_gather(int key, const WaitLabel& context) {
  sums_.wait_gather(key, policy_, context);
}

void MpiTransport::wait_gathers() {
  sums_.wait_gathers(policy_);
}

std::vector<SumTiming> MpiTransport::sum_timings() const {
  return sums_.timings();
}

std::string MpiTransport::peer_name(int worker) const {
  const int world_rank = topo_.world_rank(topo_.replica, worker);
  return fmt::format("rank {}{}", world_rank, on_host(world_rank));
}

}  // namespace chimera::comm
