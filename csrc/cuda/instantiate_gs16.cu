// Kernel variants for group size 16 (one file per group size so that ninja compiles them in parallel).
#include "per_token_group_quant.cuh"

namespace sgl_quant {
SGLQ_FOR_EACH_VARIANT_OF_GROUP_SIZE(16, SGLQ_INSTANTIATE_LAUNCHER)
}  // namespace sgl_quant
