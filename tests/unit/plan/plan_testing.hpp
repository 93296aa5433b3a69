#pragma once
// The small model and emulated machine the planner and predictor tests share.
#include "chimera/plan/predict.hpp"

namespace chimera::plan::testing {

// GPT-2 with 8 blocks of C = 64 (so D <= 8), T = 64, V = 1000; samples of 32 tokens.
inline ModelShape small_model() {
  ModelConfig m;
  m.n_layer = 8;
  m.n_embd = 64;
  m.n_head = 4;
  m.n_ctx = 64;
  m.vocab_size = 1000;
  return ModelShape(m, 32);
}

// A machine whose stage ops cost F and B (per micro-batch through 1/D of the model).
inline Machine emulated(double f, double b, Network net = {}, double memory_bytes = 1e12) {
  Machine m;
  m.network = net;
  m.memory_bytes = memory_bytes;
  m.compute.emulated = {f, b};
  return m;
}

}  // namespace chimera::plan::testing
