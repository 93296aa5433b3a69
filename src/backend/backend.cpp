#include "chimera/backend/backend.hpp"

#include <dlfcn.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "chimera/core/error.hpp"
#include "cpu/cpu_backend.hpp"

namespace chimera::backend {

namespace cuda {
// Defined in cuda/cuda_backend.cpp, which the GPU tests link; null in every other binary. The
// `chimera` binary loads the same code as a plugin instead (below).
[[gnu::weak]] std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options);
}  // namespace cuda

namespace {
using CudaFactory = std::unique_ptr<Backend> (*)(const BackendOptions&);

bool cuda_linked() {
  return &cuda::make_cuda_backend != nullptr;
}

#ifdef CHIMERA_CUDA_PLUGIN_FILE
// The CUDA backend of the `chimera` binary is a plugin (lib/ beside the binary's bin/, in the build
// tree and in the GPU bundle alike), opened only when runtime.backend = 'cuda': cuBLAS's static
// initialisers cost every process 0.4 s at start, and a CPU node without the CUDA libraries could
// not start the binary at all. CHIMERA_CUDA_PLUGIN names another file.
std::filesystem::path cuda_plugin_path() {
  if (const char* path = std::getenv("CHIMERA_CUDA_PLUGIN"); path != nullptr && *path != '\0') {
    return path;
  }
  std::error_code failed;
  const auto binary = std::filesystem::read_symlink("/proc/self/exe", failed);
  if (failed) return CHIMERA_CUDA_PLUGIN_FILE;
  return binary.parent_path().parent_path() / "lib" / CHIMERA_CUDA_PLUGIN_FILE;
}

CudaFactory load_cuda_plugin() {
  static const CudaFactory factory = [] {
    const auto path = cuda_plugin_path();
    // RTLD_NOW: a library or symbol the plugin lacks is named here, not at its first call. The
    // plugin stays loaded until the process ends (its backend may live that long).
    void* plugin = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    CHIMERA_REQUIRE(plugin != nullptr,
                    "runtime.backend = 'cuda': cannot load the CUDA backend: {}; the CUDA "
                    "libraries it names must be on this node's library path (docs/cuda.md)",
                    dlerror());
    void* entry = dlsym(plugin, "chimera_cuda_backend_factory");
    CHIMERA_REQUIRE(entry != nullptr, "runtime.backend = 'cuda': {} is not a Chimera CUDA plugin",
                    path.string());
    return reinterpret_cast<CudaFactory (*)()>(entry)();
  }();
  return factory;
}
#endif

bool cuda_built() {
#ifdef CHIMERA_CUDA_PLUGIN_FILE
  return true;
#else
  return cuda_linked();
#endif
}
}  // namespace

std::unique_ptr<DeviceGroup> Backend::join_device_group(const std::string& /*id*/, int /*size*/,
                                                        int /*rank*/) {
  throw Error(
      fmt::format("{}backend '{}' has no device collectives", rank_prefix(), description()));
}

void Backend::move_rows(float* dst, float* src, Index rows, Index C,
                        const std::int32_t* /*touched*/, Index /*count*/) {
  accumulate(dst, src, rows * C);
  fill_zero(src, static_cast<std::size_t>(rows * C) * sizeof(float));
}

void Backend::softmax_rows(float* x, Index N, Index V, Index ld) {
  // Targets 0 (zero bytes are int32 zeros) and losses, in this backend's memory.
  const std::size_t bytes = static_cast<std::size_t>(N) * (sizeof(std::int32_t) + sizeof(float));
  void* scratch = allocate(bytes);
  fill_zero(scratch, bytes);
  auto* targets = static_cast<std::int32_t*>(scratch);
  softmax_cross_entropy_forward(x, reinterpret_cast<float*>(targets + N), targets, N, V, ld);
  deallocate(scratch);
}

void Backend::lm_head_cross_entropy(float* losses, float* dx, float* dwte, const float* x,
                                    const float* wte, const std::int32_t* targets, Index N, Index C,
                                    Index V, float grad_scale, float* logits, Index ld,
                                    Index chunk_rows) {
  for (Index begin = 0; begin < N; begin += chunk_rows) {
    const Index rows = std::min(chunk_rows, N - begin);
    const float* x_rows = x + begin * C;
    gemm(Trans::No, Trans::Yes, rows, V, C, 1.0F, x_rows, C, wte, C, 0.0F, logits, ld);
    softmax_cross_entropy_forward(logits, losses + begin, targets + begin, rows, V, ld);
    if (grad_scale == 0.0F) continue;
    softmax_cross_entropy_backward(logits, targets + begin, rows, ld);
    gemm(Trans::No, Trans::No, rows, C, V, grad_scale, logits, ld, wte, C, 0.0F, dx + begin * C, C);
    gemm(Trans::Yes, Trans::No, V, C, rows, grad_scale, logits, ld, x_rows, C, 1.0F, dwte, C);
  }
}

std::vector<std::string> available_backends() {
  if (cuda_built()) return {"cpu", "cuda"};
  return {"cpu"};
}

std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options) {
  if (kind == BackendKind::Cpu) {
    return cpu::make_cpu_backend(options.precision, options.cpu_bf16_engine);
  }
  if (cuda_linked()) return cuda::make_cuda_backend(options);
#ifdef CHIMERA_CUDA_PLUGIN_FILE
  return load_cuda_plugin()(options);
#else
  throw InputError(
      fmt::format("runtime.backend = 'cuda': this build has no CUDA backend (built: {}); "
                  "configure with CUDA (cmake --preset cuda, see docs/cuda.md)",
                  fmt::join(available_backends(), ", ")));
#endif
}

}  // namespace chimera::backend
