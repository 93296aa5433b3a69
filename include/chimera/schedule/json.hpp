#pragma once
// The schedule JSON of docs/DESIGN.md §3, the contract other tools read:
//   {"scheme":"chimera","variant":"direct","stages":4,"micro_batches":8,"pipes":2,
//    "placement":[[0,1,2,3],[3,2,1,0]],"pipe_of":[0,0,0,0,1,1,1,1],
//    "workers":[[{"op":"F","pipe":0,"stage":0,"mbs":[0]}, ...], ...]}
// The number of workers is the length of "workers". Halving schedules (mb_split = 2) also carry
// "mb_split": 2 after "micro_batches"; it is 1 when absent. Forward-only schedules carry
// "forward_only": true. With the lowered program, two keys follow "workers":
//   "sums_in_one_order": true,   (verify.hpp ProgramFacts)
//   "program": [[{"instr":"post","payload":"activation","pipe":0,"stage":0,"mb":1,"from":0,
//                 "to":1}, {"instr":"compute","op":0}, {"instr":"grad-ready","stage":0},
//                {"instr":"tied-grad-ready"}, {"instr":"wait-sums"}, ...], ...]
// one instruction list per worker (program.hpp). The parser ignores both.
#include <string>
#include <string_view>

#include "chimera/schedule/ir.hpp"
#include "chimera/schedule/program.hpp"

namespace chimera::schedule {

// Keys in the order above, one worker per line. With `program` (the schedule's lowering, checked
// by verify_program), its instructions too.
std::string schedule_to_json(const Schedule& schedule, const Program* program = nullptr);

// Parses the format above. Malformed text, a missing key or a wrong type throws
// chimera::InputError naming it. The result is not verified: call verify() or check().
Schedule schedule_from_json(std::string_view text);

}  // namespace chimera::schedule
