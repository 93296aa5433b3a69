#pragma once
// Deterministic initialisation that does not depend on the partition: the initial value of
// element i of tensor `name` is a pure function of (seed, name, i), so D = 1 and D = 4 runs (and
// any rank, for any slice) start from identical weights. The generator is counter-based:
//   key  = mix(mix(seed) + fnv1a64(name)),  bits = mix(key ^ mix(i + 0x9E3779B97F4A7C15))
//   u1   = (bits >> 32 + 1) / 2^32 in (0, 1],   u2 = (bits & 0xFFFFFFFF) / 2^32 in [0, 1)
//   z    = sqrt(-2 ln u1) cos(2 pi u2)                (Box-Muller, in double)
// with mix = SplitMix64's finaliser. Normal tensors get std * z (0.02, or 0.02 / sqrt(2L) for the
// residual projections attn.c_proj.weight and mlp.c_proj.weight); biases 0; LayerNorm weights 1.
#include <cstdint>
#include <span>
#include <string_view>

#include "chimera/model/parameters.hpp"

namespace chimera::model {

double standard_normal_at(std::uint64_t seed, std::string_view tensor_name, std::uint64_t index);

// The initial values of tensor `t` in its Hugging Face layout (t.numel floats).
void initial_values(const TensorInfo& t, std::uint64_t seed, std::span<float> out);

}  // namespace chimera::model
