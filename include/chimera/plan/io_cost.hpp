#pragma once
// The I/O part of the performance model (docs/checkpoints.md, "I/O at scale"): what a
// checkpoint save costs the training loop, synchronous and asynchronous, and what a resume
// costs, for one layout on a file system of a given bandwidth.
//
// A checkpoint holds every parameter three times (weights and AdamW's two moments) in float32.
// Its writers are the owners of the stages (replica 0's pipeline group: D ranks, D/2 with
// Chimera's two pipelines, whose worker p owns stages p and D-1-p, D/k with k pipelines), and
// its readers on resume are the same ranks; each then broadcasts its tensors to the other
// holders of its stages (W per stage, kW with Chimera) over the network. A group of writers moves
// at most min(file system, writers x one node's link) bytes per unit of time.
#include "chimera/plan/network.hpp"
#include "chimera/plan/predict.hpp"

namespace chimera::plan {

struct FileSystem {
  double bytes_per_ms = 0.0;           // the file system's aggregate bandwidth for this job
  double node_bytes_per_ms = 0.0;      // one node's link to it
  double snapshot_bytes_per_ms = 0.0;  // device (or host) memory to the host snapshot
};

struct IoPrediction {
  double checkpoint_bytes = 0.0;
  int writers = 0;                   // ranks that write (and on resume read) the file
  int holders = 0;                   // ranks holding each stage, all replicas together
  double write_ms = 0.0;             // one save's file write
  double sync_stall_ms = 0.0;        // checkpoint.async = false: every rank waits for the write
  double async_stall_ms = 0.0;       // the snapshot, plus the wait for the save before when the
                                     // write outlasts the steps between two saves
  double resume_read_ms = 0.0;       // the owners read the file once
  double resume_broadcast_ms = 0.0;  // and broadcast it to the other holders
  double resume_ms() const { return resume_read_ms + resume_broadcast_ms; }
  double every_holder_reads_ms = 0.0;  // the resume this replaces: each holder reads its part
};

// `iteration_ms` and `save_every` (steps between saves; 0 = no periodic saves) give the time a
// background write has before the next save waits for it.
IoPrediction predict_io(double total_params, const Layout& layout, const Network& network,
                        const FileSystem& fs, double iteration_ms, int save_every);

}  // namespace chimera::plan
