#include "chimera/model/init.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "chimera/core/config.hpp"
#include "chimera/core/error.hpp"

namespace chimera::model {

namespace {

std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::uint64_t tensor_key(std::uint64_t seed, std::string_view tensor_name) {
  return mix(mix(seed) + fnv1a64(tensor_name));
}

double normal_from_key(std::uint64_t key, std::uint64_t index) {
  const std::uint64_t bits = mix(key ^ mix(index + 0x9E3779B97F4A7C15ULL));
  const double u1 = (static_cast<double>(bits >> 32) + 1.0) * 0x1p-32;
  const double u2 = static_cast<double>(bits & 0xFFFFFFFFULL) * 0x1p-32;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace

double standard_normal_at(std::uint64_t seed, std::string_view tensor_name, std::uint64_t index) {
  return normal_from_key(tensor_key(seed, tensor_name), index);
}

void initial_values(const TensorInfo& t, std::uint64_t seed, std::span<float> out) {
  CHIMERA_CHECK(out.size() == t.numel, "{} has {} elements, buffer {}", t.name, t.numel,
                out.size());
  const auto n = static_cast<std::int64_t>(out.size());
  switch (t.init) {
    case Init::Zeros:
      std::fill(out.begin(), out.end(), 0.0F);
      break;
    case Init::Ones:
      std::fill(out.begin(), out.end(), 1.0F);
      break;
    case Init::Normal: {
      const std::uint64_t key = tensor_key(seed, t.name);
      const double std = t.init_std;
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < n; ++i) {
        out[static_cast<std::size_t>(i)] =
            static_cast<float>(std * normal_from_key(key, static_cast<std::uint64_t>(i)));
      }
      break;
    }
  }
}

}  // namespace chimera::model
