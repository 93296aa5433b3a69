#pragma once
// GPT-2's shape, validated: every rule broken is an InputError (exit status 2) naming the config
// key and what would be right.
#include <cstdint>

#include "chimera/core/config.hpp"

namespace chimera::model {

struct GPT2Config {
  // Rows of the token table are padded to a multiple of this (aligned rows; the padded logits
  // are never computed and the padded rows never stored).
  static constexpr int kVocabPadding = 128;

  int n_layer = 0;            // L transformer blocks
  int n_embd = 0;             // C
  int n_head = 0;             // H (divides C)
  int n_ctx = 0;              // rows of the position table: the longest sequence
  int vocab_size = 0;         // V
  int padded_vocab_size = 0;  // V rounded up to kVocabPadding

  // Validates [model]: every size >= 1 and n_embd % n_head == 0.
  static GPT2Config from(const ModelConfig& model);

  int head_size() const { return n_embd / n_head; }
  // seq_len (config data.seq_len) must be in [1, n_ctx].
  void require_seq_len(int seq_len) const;
};

}  // namespace chimera::model
