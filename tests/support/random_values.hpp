#pragma once
// Reproducible test inputs: n floats drawn from a normal distribution (mean `offset`, standard
// deviation `scale`) by a generator seeded with `seed`.
#include <cstdint>
#include <random>
#include <vector>

namespace chimera::testing {

inline std::vector<float> random_vec(std::size_t n, std::uint32_t seed, float scale = 1.0F,
                                     float offset = 0.0F) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0F, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = offset + normal(rng);
  return v;
}

}  // namespace chimera::testing
