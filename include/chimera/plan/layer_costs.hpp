#pragma once
// Per-layer compute costs of GPT-2 on one device: the input of the performance model for a
// machine (`chimera plan --costs FILE`). The file format (TOML, docs/scaling.md):
//
//   machine = "Piz Daint XC50: one P100 16 GB per node"
//   [model]                 the layer shape the times are for (checked against --model)
//   n_embd = 1280
//   n_head = 20
//   seq_len = 632
//   vocab_size = 50257
//   [scaling]
//   micro_batch_size = 1    B0: the times below are for one op on B0 samples
//   overhead_ms = 0.0       part of each layer op that does not grow with the samples
//   stage_overhead_ms = 0.0 fixed cost of every stage op on top of its layers
//   optimizer_ns_per_param = 0.0    AdamW step time per parameter a device holds
//   [embedding]             token + position embedding (first stage)
//   forward_ms = 0.1
//   backward_ms = 0.2
//   [block]                 one transformer block
//   forward_ms = ...
//   backward_ms = ...
//   [head]                  final LayerNorm, LM head and cross-entropy (last stage)
//   forward_ms = ...
//   backward_ms = ...
//
// A layer op on b samples takes overhead + (t - overhead) * b / B0.
#include <string>
#include <string_view>

namespace chimera::plan {

struct OpCost {
  double forward_ms = 0.0;
  double backward_ms = 0.0;  // full backward (input and weight gradients)

  OpCost& operator+=(const OpCost& o) {
    forward_ms += o.forward_ms;
    backward_ms += o.backward_ms;
    return *this;
  }
};

struct LayerCosts {
  std::string machine;
  // The model shape the times were taken for.
  int n_embd = 0;
  int n_head = 0;
  int seq_len = 0;
  int vocab_size = 0;
  int micro_batch_size = 1;
  double overhead_ms = 0.0;
  double stage_overhead_ms = 0.0;
  double optimizer_ns_per_param = 0.0;
  OpCost embedding, block, head;

  // One layer op on `samples` samples.
  OpCost scaled(const OpCost& reference, double samples) const;
};

// Parses the TOML text; `origin` names the source in messages. Every key is required except
// `machine`, `overhead_ms`, `stage_overhead_ms` and `optimizer_ns_per_param`; unknown keys,
// wrong types and negative times are InputErrors naming the key.
LayerCosts parse_layer_costs(std::string_view toml_text, std::string_view origin);
LayerCosts load_layer_costs(const std::string& path);

}  // namespace chimera::plan
