// v2 launchers of group size 128, dense and masked (one file per group size, so that ninja compiles them in parallel).
#include "per_token_group_quant.cuh"

namespace sgl_quant {
SGLQ_FOR_EACH_VARIANT(128, SGLQ_INSTANTIATE_LAUNCHER)
SGLQ_FOR_EACH_PACKED_PADDED_VARIANT(SGLQ_INSTANTIATE_LAUNCHER)
}  // namespace sgl_quant
