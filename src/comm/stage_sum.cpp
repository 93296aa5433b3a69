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
  if (running_) await(&StageSum::running, "allreduce of gradient", others, policy, context);
  started_ = false;
}

void StageSum::start_gather() {
  if (!gathers()) return;
  CHIMERA_CHECK(!gathering_ && !running_, "all-gather of '{}' started while its sums run",
                buffer_.name);
  begin_gather();
  gathering_ = true;
}

bool StageSum::test_gather() {
  if (gathering_ && gather_arrived()) gathering_ = false;
  return !gathering_;
}

void StageSum::finish_gather(const std::function<void()>& others, const WaitPolicy& policy,
                             const WaitLabel& context) {
  if (gathering_) await(&StageSum::gathering, "all-gather of weights", others, policy, context);
}

void StageSum::await(bool (StageSum::*busy)() const, const char* what,
                     const std::function<void()>& others, const WaitPolicy& policy,
                     const WaitLabel& context) {
  struct Wait {
    StageSum& sum;
    bool (StageSum::*busy)() const;
    const std::function<void()>& others;
  } w{*this, busy, others};
  wait_until(
      [](void* self) {
        auto& x = *static_cast<Wait*>(self);
        x.others();  // tests this one too
        return (x.sum.*x.busy)() ? WaitState::Busy : WaitState::Done;
      },
      &w, policy, nullptr,
      [&] {
        const std::string over = participants();
        const std::string when = context ? fmt::format(" {}", context()) : std::string();
        return fmt::format("{} '{}'{}{}{}", what, buffer_.name, over, when, silent_participants());
      });
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
  for (const auto& s : sums_) {
    running = !s->test() || running;
    running = !s->test_gather() || running;
  }
  return running;
}

void StageSums::start_gathers() {
  for (const auto& s : sums_) s->start_gather();
}

void StageSums::wait_gather(int key, const WaitPolicy& policy, const WaitLabel& context) {
  if (key < 0) return;
  sums_.at(static_cast<std::size_t>(key))->finish_gather([this] { poll(); }, policy, context);
}

void StageSums::wait_gathers(const WaitPolicy& policy, const WaitLabel& context) {
  for (const auto& s : sums_) s->finish_gather([this] { poll(); }, policy, context);
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
