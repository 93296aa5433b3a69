#include "chimera/schedule/program.hpp"

namespace chimera::schedule {

int MessageKey::index(int micro_batches) const {
  return (stage * 2 + (payload == Payload::Gradient ? 1 : 0)) * micro_batches + mb;
}

std::int64_t message_key_count(const Schedule& schedule) {
  return 2LL * schedule.stages * schedule.schedule_micro_batches;
}

const char* instr_name(InstrKind kind) {
  switch (kind) {
    case InstrKind::PostRecv:
      return "post";
    case InstrKind::WaitRecv:
      return "wait";
    case InstrKind::Compute:
      return "compute";
    case InstrKind::Send:
      return "send";
    case InstrKind::GradReady:
      return "grad-ready";
    case InstrKind::TiedGradReady:
      return "tied-grad-ready";
    case InstrKind::WaitSums:
      return "wait-sums";
    case InstrKind::WaitGather:
      return "wait-gather";
  }
  return "?";
}

}  // namespace chimera::schedule
