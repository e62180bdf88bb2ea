// Fused RMSNorm launchers of group size 256 (one file per group size, so that ninja compiles them in parallel).
#include "rmsnorm_launch.cuh"

namespace sgl_quant {
SGLQ_FOR_EACH_RMSNORM_VARIANT(256, SGLQ_INSTANTIATE_RMSNORM_LAUNCHER)
}  // namespace sgl_quant
