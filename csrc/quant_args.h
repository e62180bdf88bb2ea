// Argument validation shared by the CPU and CUDA implementations (SPEC §3.3).
// Every check runs here, before any launch, and every failure names the argument.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

#include "quant_params.h"

namespace sgl_quant {

// Validates the arguments of sgl_quant::per_token_group_quant_8bit_v2 and describes the problem.
// Returns params with num_groups() == 0 when there is nothing to do (M == 0, E == 0 or H == 0).
QuantParams make_v2_params(const at::Tensor& input, const at::Tensor& output_q, const at::Tensor& output_s,
                           int64_t group_size, double eps, double min_8bit, double max_8bit, bool scale_ue8m0,
                           bool fuse_silu_and_mul, const std::optional<at::Tensor>& masked_m);

// Validates the arguments of sgl_quant::per_token_group_quant_fp8_dsv4 and describes the problem
// (group size 128, eps 1e-10, UE8M0-rounded fp32 scales in the fp8_einsum layout).
QuantParams make_dsv4_params(const at::Tensor& input, const at::Tensor& output_q, const at::Tensor& output_s);

}  // namespace sgl_quant
