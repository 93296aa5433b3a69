#pragma once
// Global-norm gradient clipping in two halves: every rank sums the squares of the gradients it
// owns (each parameter counted once across ranks), the runtime allreduces the sums, and the
// resulting scale goes into adamw_step as grad_scale.
#include <cstddef>

#include "chimera/backend/backend.hpp"

namespace chimera::optim {

// sum of grads[i]^2 in double (deterministic for any thread count on the CPU).
double sum_of_squares(backend::Backend& backend, const float* grads, std::size_t count);

// torch.nn.utils.clip_grad_norm_'s factor: min(1, max_norm / (global_norm + 1e-6)); 1 when
// max_norm <= 0 (clipping off).
double clip_scale(double global_norm, double max_norm);

}  // namespace chimera::optim
