// The eager allreduce really overlaps: in a Chimera D = 4 trace, the gradient allreduce of every
// stage whose last backward is not the worker's final op starts before that final op begins.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "runtime_testing.hpp"

namespace chimera::testing {
namespace {

// "B1d0" -> 0, "F12u3" -> 3: the stage is the number after the pipe letter.
int stage_of_label(const std::string& label) {
  const auto p = label.find_last_of("du");
  return std::stoi(label.substr(p + 1));
}

TEST(Overlap, EagerAllreduceStartsBeforeTheLastBackward) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks (Chimera D = 4)";
  const std::string dir = job_temp_dir("overlap");
  Config cfg = tiny_config("", "chimera", 4, 4, 2);
  cfg.runtime.compute = ComputeMode::Emulate;
  cfg.runtime.cost = "4:8";
  cfg.train.steps = 2;
  cfg.log.trace = dir + "/trace.json";
  train(cfg, MPI_COMM_WORLD);
  if (world_rank() != 0) return;

  std::ifstream in(cfg.log.trace);
  const auto trace = nlohmann::json::parse(in);
  struct Op {
    double ts = -1, end = -1;
    std::string name;
  };
  std::map<int, Op> last;                                    // pid -> final compute op of step 1
  std::map<int, std::vector<std::pair<int, double>>> eager;  // pid -> (stage, allreduce start)
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e["args"]["step"] != 1) continue;
    const int pid = e["pid"];
    const std::string name = e["name"];
    const double ts = e["ts"], dur = e["dur"];
    if (e["tid"] == 0 && ts + dur > last[pid].end) last[pid] = Op{ts, ts + dur, name};
    if (e["tid"] == 2 && name.rfind("allreduce stage ", 0) == 0) {
      eager[pid].emplace_back(std::stoi(name.substr(16)), ts);
    }
  }
  ASSERT_EQ(last.size(), 4U);
  for (const auto& [pid, op] : last) {
    int overlapped = 0;
    for (const auto& [stage, start] : eager[pid]) {
      if (stage == stage_of_label(op.name)) continue;  // its last backward is the final op
      EXPECT_LT(start, op.ts) << "rank " << pid << " stage " << stage << " allreduce starts at "
                              << start << " us, after the final op " << op.name;
      ++overlapped;
    }
    EXPECT_EQ(overlapped, 1) << "rank " << pid << ": one of its two stages finishes early";
  }
}

}  // namespace
}  // namespace chimera::testing
