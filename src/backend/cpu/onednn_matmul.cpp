// oneDNN matmul primitives for the CPU backend's GEMMs with bf16 operands (onednn_matmul.hpp).
#include "onednn_matmul.hpp"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <oneapi/dnnl/dnnl.hpp>

#include "chimera/core/error.hpp"
#include "scratch.hpp"

namespace chimera::backend::cpu {

namespace {

dnnl::memory::data_type data_type_of(OperandType t) {
  return t == OperandType::Bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

std::string isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return fmt::format("isa {:#x}", static_cast<unsigned>(isa));
  }
}

// The bits of every instruction-set level include those of the levels below it.
bool isa_includes(dnnl::cpu_isa isa, dnnl::cpu_isa level) {
  const auto bits = static_cast<unsigned>(level);
  return (static_cast<unsigned>(isa) & bits) == bits;
}

// A strided 2-D matrix as oneDNN sees it: element (i, j) of op(X) at i * row + j * col.
dnnl::memory::desc matrix(Index rows, Index cols, Index ld, Trans trans,
                          dnnl::memory::data_type type) {
  const dnnl::memory::dims strides =
      trans == Trans::No ? dnnl::memory::dims{ld, 1} : dnnl::memory::dims{1, ld};
  return {{rows, cols}, type, strides};
}

// While alive (and `active`), this thread's OpenMP regions, and oneDNN's plans, have one thread.
class OneThreadPlans {
 public:
  explicit OneThreadPlans(bool active) : saved_(active ? omp_get_max_threads() : 0) {
    if (saved_ > 0) omp_set_num_threads(1);
  }
  ~OneThreadPlans() {
    if (saved_ > 0) omp_set_num_threads(saved_);
  }
  OneThreadPlans(const OneThreadPlans&) = delete;
  OneThreadPlans& operator=(const OneThreadPlans&) = delete;

 private:
  int saved_;
};

// One engine for the process: every thread's stream belongs to it.
const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Each thread executes on a stream of its own, with a scratchpad that grows to the largest need.
struct ThreadContext {
  std::unique_ptr<dnnl::stream> stream;
  Scratch<std::byte> scratchpad;
  Scratch<float> product;  // op(A) op(B) before our own epilogue adds it to C
};

ThreadContext& thread_context() {
  thread_local ThreadContext context;
  if (!context.stream) context.stream = std::make_unique<dnnl::stream>(cpu_engine());
  return context;
}

}  // namespace

struct OnednnMatmul::Primitive {
  dnnl::matmul::primitive_desc desc;
  dnnl::matmul matmul;
  std::size_t scratchpad_bytes = 0;
  bool own_epilogue = false;  // alpha and beta applied by run() after oneDNN's plain product
};

OnednnMatmul::OnednnMatmul(OperandType operands, Epilogue epilogue, Threads threads)
    : operands_(operands),
      own_epilogue_(epilogue == Epilogue::Ours),
      one_thread_(threads == Threads::Caller) {
  if (const auto why = unsupported(operands)) throw InputError(*why);
}

OnednnMatmul::~OnednnMatmul() = default;

std::optional<std::string> OnednnMatmul::unsupported(OperandType operands) {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  if (operands == OperandType::Bf16 && !isa_includes(isa, dnnl::cpu_isa::avx512_core_bf16)) {
    return fmt::format(
        "this CPU has neither AMX-BF16 nor AVX-512-BF16 (oneDNN's kernels here: {}), so bf16 "
        "GEMMs would run emulated, slower than fp32",
        isa_name(isa));
  }
  try {
    const auto type = data_type_of(operands);
    const dnnl::memory::desc square({16, 16}, type, dnnl::memory::format_tag::ab);
    const dnnl::memory::desc result({16, 16}, dnnl::memory::data_type::f32,
                                    dnnl::memory::format_tag::ab);
    dnnl::matmul::primitive_desc(dnnl::matmul::desc(square, square, result), cpu_engine());
  } catch (const dnnl::error& e) {
    return fmt::format("oneDNN {} has no matmul for these operands on this CPU ({}): {}",
                       description(), isa_name(isa), e.what());
  }
  return std::nullopt;
}

bool OnednnMatmul::runs_avx512() {
  return isa_includes(dnnl::get_effective_cpu_isa(), dnnl::cpu_isa::avx512_core);
}

bool OnednnMatmul::runs_amx() {
  return isa_includes(dnnl::get_effective_cpu_isa(), dnnl::cpu_isa::avx512_core_amx);
}

std::string OnednnMatmul::description() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("oneDNN {}.{}.{} ({})", v->major, v->minor, v->patch,
                     isa_name(dnnl::get_effective_cpu_isa()));
}

const OnednnMatmul::Primitive& OnednnMatmul::primitive(const Key& key) {
  const std::lock_guard lock(mutex_);
  auto& slot = primitives_[key];
  if (slot) return *slot;
  const auto [ta, tb, m, n, k, lda, ldb, ldc, alpha_bits, accumulate] = key;
  const auto type = data_type_of(operands_);
  const auto src = matrix(m, k, lda, ta ? Trans::Yes : Trans::No, type);
  const auto weights = matrix(k, n, ldb, tb ? Trans::Yes : Trans::No, type);
  const float alpha = std::bit_cast<float>(alpha_bits);
  const bool needs_epilogue = alpha != 1.0F || accumulate;
  auto entry = std::make_unique<Primitive>();
  const auto make = [&](bool with_epilogue) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (with_epilogue && alpha != 1.0F) attr.set_output_scales(0, {alpha});
    if (with_epilogue && accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0F);
      attr.set_post_ops(ops);
    }
    // Without oneDNN's epilogue, an accumulating GEMM writes a dense buffer of its own first.
    const Index dst_ld = !with_epilogue && accumulate ? n : ldc;
    const auto dst = matrix(m, n, dst_ld, Trans::No, dnnl::memory::data_type::f32);
    entry->desc =
        dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), attr, cpu_engine());
    entry->own_epilogue = needs_epilogue && !with_epilogue;
  };
  // oneDNN reads the number of threads to plan for (omp_get_max_threads) as it creates the
  // primitive; this thread's setting is put back afterwards.
  const OneThreadPlans one_thread_plans(one_thread_);
  if (needs_epilogue && !own_epilogue_) {
    // oneDNN's output scale and sum post-op, where its kernel for these operands takes them.
    try {
      make(true);
    } catch (const dnnl::error&) {
      make(false);
    }
  } else {
    make(false);
  }
  entry->matmul = dnnl::matmul(entry->desc);
  entry->scratchpad_bytes = entry->desc.scratchpad_desc().get_size();
  slot = std::move(entry);
  return *slot;
}

void OnednnMatmul::run(Trans trans_a, Trans trans_b, Index m, Index n, Index k, float alpha,
                       const void* a, Index lda, const void* b, Index ldb, float beta, float* c,
                       Index ldc) {
  CHIMERA_CHECK(beta == 0.0F || beta == 1.0F, "oneDNN GEMM: beta {} is neither 0 nor 1", beta);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C = beta * C
    if (beta == 0.0F) {
      for (Index i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0.0F);
    }
    return;
  }
  const bool accumulate = beta == 1.0F;
  const Primitive& p = primitive({trans_a == Trans::Yes, trans_b == Trans::Yes, m, n, k, lda, ldb,
                                  ldc, std::bit_cast<std::uint32_t>(alpha), accumulate});
  ThreadContext& context = thread_context();
  const bool into_product = p.own_epilogue && accumulate;
  float* out = into_product ? context.product.get(static_cast<std::size_t>(m * n)) : c;
  const auto& d = p.desc;
  // oneDNN reads the operands only; its memory objects take non-const handles.
  const dnnl::memory src(d.src_desc(), cpu_engine(), const_cast<void*>(a));
  const dnnl::memory weights(d.weights_desc(), cpu_engine(), const_cast<void*>(b));
  const dnnl::memory dst(d.dst_desc(), cpu_engine(), out);
  const dnnl::memory scratchpad(d.scratchpad_desc(), cpu_engine(),
                                context.scratchpad.get(p.scratchpad_bytes));
  // A primitive planned for one thread runs on this one (oneDNN may otherwise open a region).
  const OneThreadPlans one_thread(one_thread_);
  p.matmul.execute(*context.stream, {{DNNL_ARG_SRC, src},
                                     {DNNL_ARG_WEIGHTS, weights},
                                     {DNNL_ARG_DST, dst},
                                     {DNNL_ARG_SCRATCHPAD, scratchpad}});
  context.stream->wait();
  if (!p.own_epilogue) return;
  // oneDNN's order: the fp32 product scaled by alpha, then C added.
  for (Index i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (into_product) {
      const float* product = out + i * n;
      for (Index j = 0; j < n; ++j) row[j] = alpha * product[j] + row[j];
    } else {
      for (Index j = 0; j < n; ++j) row[j] *= alpha;
    }
  }
}

}  // namespace chimera::backend::cpu
