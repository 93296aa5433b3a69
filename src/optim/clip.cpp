#include "chimera/optim/clip.hpp"

#include <algorithm>

namespace chimera::optim {

double sum_of_squares(backend::Backend& backend, const float* grads, std::size_t count) {
  return backend.sum_of_squares(grads, static_cast<backend::Index>(count));
}

double clip_scale(double global_norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0;
  return std::min(1.0, max_norm / (global_norm + 1e-6));
}

}  // namespace chimera::optim
