// Kernel variants for group size 128, dense layout (one file per group size and layout, so that
// ninja compiles them in parallel).
#include "per_token_group_quant.cuh"

namespace sgl_quant {
SGLQ_FOR_EACH_VARIANT(128, false, SGLQ_INSTANTIATE_LAUNCHER)
}  // namespace sgl_quant
