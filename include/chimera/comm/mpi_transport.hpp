#pragma once
// The executor's transport over MPI (transport.hpp): messages through MPI_Isend/MPI_Irecv on the
// pipeline communicator, one tag per message key (program.hpp); a receiver sleeps on its
// doorbell until the sender rings (runtime.wait = doorbell); one StageSum per gradient buffer
// (stage_sum.hpp) over its stage's communicator: MPI_Iallreduce, or what the SumFactory makes.
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "chimera/comm/communicators.hpp"
#include "chimera/comm/doorbell.hpp"
#include "chimera/comm/topology.hpp"
#include "chimera/comm/transport.hpp"

namespace chimera::comm {

class MpiTransport final : public Transport {
 public:
  // InputError if this MPI's tags cannot number the schedule's messages.
  MpiTransport(const schedule::Schedule& sched, const Topology& topo, const Communicators& comms,
               WaitPolicy policy, std::size_t message_floats, SumFactory make_sum = {});

  Request post_recv(const schedule::Message& m, float* buffer) override;
  Request send(const schedule::Message& m, const float* buffer) override;
  bool test(Request r) override;
  void wait(Request r, const WaitLabel& label) override;
  int add_sum(const GradBuffer& buffer) override;
  void start_sum(int key) override;
  bool progress() override;
  void wait_sums(const WaitLabel& context) override;
  void start_gathers() override;
  void wait_gather(int key, const WaitLabel& context) override;
  void wait_gathers() override;
  std::vector<SumTiming> sum_timings() const override;
  std::string peer_name(int worker) const override;

 private:
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    int peer = -1;
    bool send = false;
    bool done = false;  // seen complete by a progress() during some wait
  };
  int tag(const schedule::Message& m) const;
  Request add(MPI_Request request, int peer, bool send);
  // What still needs this rank's MPI progress: a running sum, or a send (a large message
  // without a single-copy transport moves in fragments its sender pushes). A wait sleeps short
  // while either does.
  struct Outstanding {
    bool sums = false;
    bool sends = false;
  };
  // Tests every outstanding send and sum.
  Outstanding progress_all();

  int micro_batches_;
  const Topology& topo_;
  const Communicators& comms_;
  WaitPolicy policy_;
  std::size_t floats_;
  SumFactory make_sum_;
  std::optional<Doorbells> bells_;
  StageSums sums_;
  std::vector<Pending> pending_;  // by request id; ids are reused through free_
  // [rank of the pipeline group] the messages received from it so far: while it has announced
  // more (Doorbells::announced_by), one of its messages is under way.
  std::vector<std::uint32_t> received_from_;
  std::vector<Request> free_;
};

}  // namespace chimera::comm
