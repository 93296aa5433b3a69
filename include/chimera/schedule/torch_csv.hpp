#pragma once
// PyTorch's compute-only schedule CSV (torch.distributed.pipelining, PipelineScheduleMulti's
// `_dump_csv` / `_load_csv`): one row per rank, in rank order, each cell one action written as
// stage index, computation type and micro-batch index: `0F0`, `1I3`, `1W3`, `2B1`. An empty cell
// is an idle step (PyTorch writes its `None`s that way). The letters are PyTorch's: F forward,
// B full backward, I input gradient, W weight gradient — the same as ours (docs/schedules.md).
//
// The format has one pipe and places each stage on exactly one rank: the rank whose row names it.
#include <string>
#include <string_view>

#include "chimera/schedule/ir.hpp"

namespace chimera::schedule {

// One row per worker, rows ended by "\r\n" as Python's csv writer ends them. A doubled forward
// becomes one action per micro-batch. Throws InputError (one line) for schedules the format
// cannot hold: a stage on two workers (PyTorch's validator rejects that), more than one pipe, or
// half micro-batches (mb_split > 1).
std::string schedule_to_torch_csv(const Schedule& schedule);

// Parses the format (rows ended by "\n" or "\r\n"; an empty line is a rank with no actions, as
// PyTorch's _load_csv reads it, trailing ones included; PyTorch's
// `(a;b)OVERLAP_F_B` cells read as their sub-actions in order). Builds a one-pipe schedule:
// scheme "torch-csv", workers = rows, stages = largest stage + 1, micro_batches = largest
// micro-batch + 1, placement from the rows, pipe_of all 0, forward_only when no row has a
// backward. Malformed text, an action the compute-only format does not have, or a stage on two
// rows throws InputError naming the row and cell. The result is not verified: call check().
Schedule schedule_from_torch_csv(std::string_view text);

}  // namespace chimera::schedule
