#include "chimera/schedule/program.hpp"

namespace chimera::schedule {

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
  }
  return "?";
}

}  // namespace chimera::schedule
