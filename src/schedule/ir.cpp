#include "chimera/schedule/ir.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace chimera::schedule {

char op_letter(OpKind kind) {
  switch (kind) {
    case OpKind::F:
      return 'F';
    case OpKind::B:
      return 'B';
    case OpKind::I:
      return 'I';
    case OpKind::W:
      return 'W';
  }
  return '?';
}

std::string op_label(const Schedule& schedule, const Op& op) {
  const int pipes = schedule.pipes();
  const bool up = pipes % 2 == 0 && op.pipe >= pipes / 2;
  return fmt::format("{}{}{}{}", op_letter(op.kind), fmt::join(op.mbs, "+"), up ? 'u' : 'd',
                     op.stage);
}

}  // namespace chimera::schedule
