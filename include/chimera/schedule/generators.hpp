#pragma once
// Schedule generators (docs/DESIGN.md §3): each a small pure function (parameters) -> Schedule.
// Every generator checks its own rules and throws chimera::InputError with one line naming the
// rule that was broken; make_schedule() is the single entry point the CLI and `chimera train` use.
#include <string>
#include <vector>

#include "chimera/core/parallel_settings.hpp"
#include "chimera/schedule/ir.hpp"

namespace chimera::schedule {

// What the user asked for: the [parallel] section of the run config, or `chimera schedule` flags.
struct ScheduleRequest {
  // gpipe | 1f1b | gems | interleaved | chimera | zb-h1 | zb-v | dualpipev, or file:PATH (a
  // schedule JSON, or a torch CSV ending in .csv: read, verified, run as it is; stages and
  // micro_batches, where not 0, must be the file's D and N).
  std::string scheme;
  int stages = 0;          // D: workers of one pipeline group
  int micro_batches = 0;   // N: micro-batches per pipeline group and iteration
  std::string variant;     // chimera: direct (default) | doubling | halving
  int pipes = 0;           // chimera: 2f pipelines (0 = 2); other schemes: 0 or their own count
  int virtual_stages = 0;  // interleaved: v model stages per worker (0 = 2); others: 0 or 1
  int max_in_flight = 0;   // chimera-zb: most chunk-activations per worker (0 = 2D), simulate.hpp
};

// The generated schemes make_schedule accepts, in the order tables list them (and file:PATH);
// their settings are checked against one table (parallel_settings.hpp).
using chimera::scheme_names;

// Generates the requested schedule. Invalid requests throw chimera::InputError (exit status 2).
Schedule make_schedule(const ScheduleRequest& request);

// The generators. D = workers, N = micro-batches; each throws InputError on invalid parameters.
Schedule gpipe(int D, int N);               // all forwards, then all backwards
Schedule one_f_one_b(int D, int N);         // DAPPLE / PipeDream-Flush
Schedule gems(int D, int N);                // two replicas, one micro-batch pair at a time
Schedule interleaved(int D, int N, int v);  // Megatron virtual stages, stages = D * v
Schedule zb_h1(int D, int N);               // zero-bubble H1: backward split into I and W
// The V placements: stages = 2D, worker w holds stages w and 2D-1-w (detail in docs/schedules.md).
Schedule zb_v(int D, int N);       // zero-bubble V: I/W split, W's fill the bubbles, peak D
Schedule dualpipev(int D, int N);  // DeepSeek's DualPipeV, F&B pairs run in turn; N >= 2D
// Controllable memory (gen_v_half_min.cpp): about 1/2 and 1/3 of 1F1B's activations, W's at free
// slots of a 6-slot pattern per micro-batch.
Schedule v_half(int D, int N);
Schedule v_min(int D, int N);
// Chimera with `pipes` = 2f pipelines (f down, f up; f divides D/2) and variant
// direct (N = kD, units concatenated), doubling (one forward op covers two micro-batches) or
// halving (micro-batches split in two halves, mb_split = 2; forward ops cover two halves).
Schedule chimera(int D, int N, const std::string& variant, int pipes);
// Chimera's two pipelines with split backward: Chimera direct's F and I order, W ops filling the
// bubbles (gen_chimera_zb.cpp); at most `max_in_flight` chunk-activations per worker (0 = 2D).
Schedule chimera_zb(int D, int N, int max_in_flight);
// BitPipe: two V-shaped pipes of 2D stages in opposite directions, each stage on the mirror
// workers r and D-1-r (gen_bitpipe.cpp); D even, N a multiple of D, full backward.
Schedule bitpipe(int D, int N);
// BitPipe with split backward: BitPipe's F and I order, W ops filling the waits, at most 2D
// chunks' activations per worker.
Schedule bitpipe_zb(int D, int N);

// The forward-only schedule of evaluation: `training`'s F ops in the same order on the same
// workers, nothing else (forward_only = true). A subgraph of a deadlock-free schedule's
// dependencies, it is deadlock-free too; validation runs pipelined like training.
Schedule forward_only(const Schedule& training);
// One micro-batch (id 0) forward through `training`'s first pipe, each worker running its stages
// of that pipe in order (forward_only = true, mb_split = 1): text generation, token by token.
Schedule forward_one(const Schedule& training);

}  // namespace chimera::schedule
