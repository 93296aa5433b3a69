#pragma once
// The dependency graph of a schedule, shared by the verifier, lowering and the simulator.
// Nodes are compute ops, numbered worker by worker in program order; edges are program order
// (implicit: id-1 on the same worker) and data inputs (explicit, one per micro-batch).
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "chimera/schedule/ir.hpp"
#include "chimera/schedule/lower.hpp"
#include "chimera/schedule/program.hpp"

namespace chimera::schedule::detail {

// One data input of an op.
struct OpInput {
  int producer = 0;  // op id
  int mb = 0;
  enum class Kind : std::uint8_t {
    Activation,  // F <- F of the previous stage
    Gradient,    // B/I <- B/I of the next stage
    Stash,       // B/I <- own F, W <- own I: always on the same worker, never a message
  } kind = Kind::Stash;
  bool remote = false;  // producer runs on another worker: a message
};

class OpGraph {
 public:
  // Checks the schedule's shape and completeness and builds the graph; on the first problem
  // returns nullopt and sets `problem` to one line describing it. Does not check for cycles.
  static std::optional<OpGraph> build(const Schedule& schedule, std::string& problem);

  int size() const { return static_cast<int>(worker_of_.size()); }
  int id(int worker, int index) const { return offset_[worker] + index; }
  int worker(int id) const { return worker_of_[id]; }
  int index(int id) const { return id - offset_[worker_of_[id]]; }
  std::span<const OpInput> inputs(int id) const {
    return {inputs_.data() + input_begin_[id], inputs_.data() + input_begin_[id + 1]};
  }
  std::span<const int> consumers(int id) const {
    return {consumers_.data() + consumer_begin_[id], consumers_.data() + consumer_begin_[id + 1]};
  }

  // Ops in an order that respects every edge; shorter than size() when there is a cycle.
  std::vector<int> topological_order() const;
  // A shortest cycle among the ops a failed topological_order() left, in one line: each op, the
  // op it waits for, and why (a data input, or program order).
  std::string describe_cycle(const Schedule& schedule, const std::vector<int>& order) const;

 private:
  std::vector<int> offset_;     // [worker] id of its first op; [workers] = size
  std::vector<int> worker_of_;  // [id]
  std::vector<int> input_begin_;
  std::vector<OpInput> inputs_;
  std::vector<int> consumer_begin_;
  std::vector<int> consumers_;
};

// "FIRST waits for STEP0, which waits for STEP1, ..." in one line, the middle elided when long.
std::string describe_waits(const std::string& first, const std::vector<std::string>& steps);

// The graph of a schedule that passes the verifier; throws chimera::Error (as verify() does)
// describing the first problem otherwise.
OpGraph verified_graph(const Schedule& schedule);

// lower() on a graph already verified (the simulator builds one anyway).
Program lower(const Schedule& schedule, const OpGraph& graph, const LowerOptions& options = {});

// The message an input becomes when it crosses workers.
Message input_message(const Schedule& schedule, const OpGraph& graph, int consumer,
                      const OpInput& input);

}  // namespace chimera::schedule::detail
