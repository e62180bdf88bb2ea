// Fused RMSNorm launchers with per-token / per-tensor codes (docs/spec.md §8.3), in a file of their own so that
// ninja compiles them in parallel with the others.
#include "rmsnorm_launch.cuh"

namespace sgl_quant {
SGLQ_FOR_EACH_RMSNORM_SCALED_VARIANT(SGLQ_INSTANTIATE_RMSNORM_SCALED_LAUNCHER)
}  // namespace sgl_quant
