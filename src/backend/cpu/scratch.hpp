#pragma once
// Per-thread working memory of the CPU kernels that grows to the largest request and is never
// initialised: every use overwrites what it reads. (A std::vector resized from a small request
// back to a large one zero-fills the difference: 206 MB per step for the LM head's dlogits.)
#include <cstddef>
#include <memory>
#include <type_traits>

namespace chimera::backend::cpu {

template <typename T>
class Scratch {
  static_assert(std::is_trivially_default_constructible_v<T>);

 public:
  // At least n elements of unspecified values; earlier pointers are invalid after a growth.
  T* get(std::size_t n) {
    if (n > capacity_) {
      data_.reset();  // free the old block before the larger one is taken
      data_ = std::make_unique_for_overwrite<T[]>(n);
      capacity_ = n;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<T[]> data_;
  std::size_t capacity_ = 0;
};

}  // namespace chimera::backend::cpu
