#include "chimera/schedule/ir.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "chimera/core/error.hpp"

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

int schedule_micro_batch_size(const Schedule& schedule, int micro_batch_size,
                              std::string_view what) {
  const int split = schedule.mb_split;
  CHIMERA_REQUIRE(micro_batch_size % split == 0,
                  "{} = {} must be a multiple of {}: {}{}{} splits every micro-batch in {}", what,
                  micro_batch_size, split, schedule.scheme, schedule.variant.empty() ? "" : " ",
                  schedule.variant, split);
  return micro_batch_size / split;
}

}  // namespace chimera::schedule
