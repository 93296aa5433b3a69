#include "chimera/comm/stage_sum.hpp"

#include <climits>

#include "chimera/comm/peer_probe.hpp"
#include "chimera/comm/rank_hosts.hpp"
#include "chimera/core/timer.hpp"

namespace chimera::comm {

StageSum::StageSum(GradBuffer buffer) : buffer_(std::move(buffer)), timing_{buffer_.name} {}

void StageSum::start() {
  CHIMERA_CHECK(!started_, "allreduce '{}' started twice in one iteration", buffer_.name);
  timing_ = SumTiming{buffer_.name, now_seconds(), 0.0};
  begin();
  running_ = true;
  started_ = true;
}

bool StageSum::test() {
  if (running_ && arrived()) {
    timing_.done_s = now_seconds();
    running_ = false;
  }
  return !running_;
}

void StageSum::finish(const std::function<void()>& others, const WaitPolicy& policy,
                      const WaitLabel& context) {
  CHIMERA_CHECK(started_, "gradient '{}' was never marked ready this iteration (schedule bug)",
                buffer_.name);
  if (running_) {
    struct Wait {
      StageSum& sum;
      const std::function<void()>& others;
    } w{*this, others};
    wait_until(
        [](void* self) {
          auto& x = *static_cast<Wait*>(self);
          x.others();  // tests this sum too
          return x.sum.running() ? WaitState::Busy : WaitState::Done;
        },
        &w, policy, nullptr,
        [&] {
          const std::string over = participants();
          const std::string when = context ? fmt::format(" {}", context()) : std::string();
          return fmt::format("allreduce of gradient '{}'{}{}{}", buffer_.name, over, when,
                             silent_participants());
        });
  }
  started_ = false;
}

std::string MpiSum::participants() const {
  return ranks_and_hosts(comm_);
}

std::string MpiSum::silent_participants() const {
  return describe_silent_peers(comm_);
}

MpiSum::MpiSum(GradBuffer buffer, MPI_Comm comm) : StageSum(std::move(buffer)), comm_(comm) {
  CHIMERA_CHECK(this->buffer().count <= static_cast<std::size_t>(INT_MAX),
                "gradient buffer '{}' has {} floats, more than one MPI call can sum",
                this->buffer().name, this->buffer().count);
}

void MpiSum::begin() {
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buffer().data, static_cast<int>(buffer().count), MPI_FLOAT,
                           MPI_SUM, comm_, &request_));
}

bool MpiSum::arrived() {
  int done = 0;
  MPI_CHECK(MPI_Test(&request_, &done, MPI_STATUS_IGNORE));
  return done != 0;
}

int StageSums::add(const GradBuffer& buffer, MPI_Comm comm, const SumFactory& make) {
  if (comm == MPI_COMM_NULL) return -1;
  std::unique_ptr<StageSum> sum = make ? make(buffer, comm) : nullptr;
  sums_.push_back(sum ? std::move(sum) : std::make_unique<MpiSum>(buffer, comm));
  return static_cast<int>(sums_.size()) - 1;
}

bool StageSums::poll() {
  bool running = false;
  for (const auto& s : sums_) running = !s->test() || running;
  return running;
}

void StageSums::wait_all(const WaitPolicy& policy, const WaitLabel& context) {
  // poll() tests every running sum, so the others progress while one is awaited.
  for (const auto& s : sums_) s->finish([this] { poll(); }, policy, context);
}

std::vector<SumTiming> StageSums::timings() const {
  std::vector<SumTiming> out;
  out.reserve(sums_.size());
  for (const auto& s : sums_) out.push_back(s->timing());
  return out;
}

}  // namespace chimera::comm
