// Per-token and per-tensor quantization launchers (docs/spec.md §8): the kernel variant of a call's types.
#include <type_traits>

#include "scaled_quant.cuh"

namespace sgl_quant {

cudaError_t scaled_quant_workspace(const ScaledQuantParams& p, bool bf16, const LaunchOptions& opt, int& entries) {
  if (bf16) {
    return p.fuse_silu_and_mul ? scaled_quant_workspace<__nv_bfloat16, true>(p, opt, entries)
                               : scaled_quant_workspace<__nv_bfloat16, false>(p, opt, entries);
  }
  return p.fuse_silu_and_mul ? scaled_quant_workspace<__half, true>(p, opt, entries)
                             : scaled_quant_workspace<__half, false>(p, opt, entries);
}

cudaError_t launch_scaled_quant(const ScaledQuantParams& p, bool bf16, bool fp8, uint32_t* partials, int num_partials,
                                const LaunchOptions& opt) {
#define SGLQ_LAUNCH_SCALED(T, R, SILU)                                                                 \
  if (bf16 == std::is_same_v<T, __nv_bfloat16> && fp8 == R::kIsFp8 && p.fuse_silu_and_mul == SILU) { \
    return launch_scaled_quant<T, R, SILU>(p, partials, num_partials, opt);                            \
  }
  SGLQ_FOR_EACH_SCALED_VARIANT(SGLQ_LAUNCH_SCALED)
#undef SGLQ_LAUNCH_SCALED
  return cudaErrorInvalidValue;
}

}  // namespace sgl_quant
