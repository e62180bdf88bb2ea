// Argument validation shared by the CPU and CUDA implementations (docs/spec.md §3.3, §6.1).
// Every check runs here, before any launch, and every failure names the argument.
// Host code uses the LibTorch stable ABI only (torch::stable::Tensor, header-only types): the
// extension then loads in every torch from the one it targets on (docs/spec.md §7).
#pragma once

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "quant_params.h"

namespace sgl_quant {

using Tensor = torch::stable::Tensor;
using ScalarType = torch::headeronly::ScalarType;
using IntArrayRef = torch::headeronly::IntHeaderOnlyArrayRef;

namespace detail {

// Error messages are assembled from strings here: numbers go through std::to_string / snprintf,
// never through iostreams. Seen on the H200 image (2026-11-29): with its /opt/gcc toolchain the
// extension carries its own copy of libstdc++'s number formatting, and formatting an integer
// into an ostringstream segfaulted, turning every error with a number in it into a crash. (That
// is also why SGLQ_CHECK does not go through STD_TORCH_CHECK, which formats __LINE__ that way.)
inline void append(std::string& s, const char* v) { s += v; }
inline void append(std::string& s, const std::string& v) { s += v; }
inline void append(std::string& s, ScalarType v) { s += torch::headeronly::toString(v); }
void append(std::string& s, const torch::stable::Device& v);  // "cpu", "cuda:0"
inline void append(std::string& s, IntArrayRef v) {  // sizes and strides: "[a, b, c]"
  s += "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  s += "]";
}
inline void append(std::string& s, const std::vector<int64_t>& v) { append(s, IntArrayRef(v)); }
inline void append(std::string& s, double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  s += buf;
}
template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
void append(std::string& s, T v) {
  s += std::to_string(v);
}
template <typename... Args>
std::string message(const Args&... args) {
  std::string s;
  (append(s, args), ...);
  return s;
}
// The exception STD_TORCH_CHECK throws (torch turns it into a Python RuntimeError).
[[noreturn]] inline void fail(const std::string& msg) { throw std::runtime_error(msg); }

}  // namespace detail

// A check whose failure raises RuntimeError(message) in Python; the message (detail::message) is
// built only when the check fails.
#define SGLQ_CHECK(cond, ...)                                                    \
  do {                                                                           \
    if (!(cond)) ::sgl_quant::detail::fail(::sgl_quant::detail::message(__VA_ARGS__)); \
  } while (0)

// Validates the arguments of sgl_quant::per_token_group_quant_8bit_v2 and describes the problem.
// Returns params with num_groups() == 0 when there is nothing to do (M == 0, E == 0 or H == 0).
QuantParams make_v2_params(const Tensor& input, const Tensor& output_q, const Tensor& output_s, int64_t group_size,
                           double eps, double min_8bit, double max_8bit, bool scale_ue8m0, bool fuse_silu_and_mul,
                           const std::optional<Tensor>& masked_m);

// Validates the arguments of sgl_quant::per_token_group_quant_8bit_packed (vLLM's packed op: 2-D, packed UE8M0
// scales with strides (1, ceil4(M)), whose padding rows it writes with 0) and describes the problem.
QuantParams make_packed_params(const Tensor& input, const Tensor& output_q, const Tensor& output_s, int64_t group_size,
                               double eps, double min_8bit, double max_8bit);

// Validates the arguments of sgl_quant::per_token_group_quant_fp8_dsv4 and describes the problem
// (group size 128, eps 1e-10, UE8M0-rounded fp32 scales in the fp8_einsum layout).
QuantParams make_dsv4_params(const Tensor& input, const Tensor& output_q, const Tensor& output_s);

// Validates the arguments of sgl_quant::rmsnorm_per_token_group_quant_8bit (docs/spec.md §6.1) and describes
// the problem: `quant` reads the input rows and writes codes and scales as v2 would (2-D, one outer).
RmsNormQuantParams make_rmsnorm_params(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& residual,
                                       const Tensor& output_q, const Tensor& output_s,
                                       const std::optional<Tensor>& output_normed, int64_t group_size,
                                       double norm_eps, double eps, double min_8bit, double max_8bit,
                                       bool scale_ue8m0);

// Validate the arguments of sgl_quant::per_token_quant_8bit and sgl_quant::per_tensor_quant_8bit (docs/spec.md
// §8.2) and describe the problem; num_rows == 0 when there is nothing to do.
ScaledQuantParams make_per_token_params(const Tensor& input, const Tensor& output_q, const Tensor& output_s,
                                        const std::optional<Tensor>& output_azp, const std::optional<Tensor>& scale_ub,
                                        double eps, bool fuse_silu_and_mul);
ScaledQuantParams make_per_tensor_params(const Tensor& input, const Tensor& output_q, const Tensor& output_s,
                                         bool is_static, double eps, bool fuse_silu_and_mul);

// Validates the arguments of sgl_quant::rmsnorm_per_token_quant_8bit (is_static false: `scale` is output_s,
// one scale per row) and sgl_quant::rmsnorm_per_tensor_quant_8bit (is_static: `scale` is the static scale)
// (docs/spec.md §8.3); `op` names the op in errors.
RmsNormQuantParams make_rmsnorm_scaled_params(const char* op, const Tensor& input, const Tensor& weight,
                                              const std::optional<Tensor>& residual, const Tensor& output_q,
                                              const Tensor& scale, const std::optional<Tensor>& output_normed,
                                              const std::optional<Tensor>& scale_ub, double norm_eps, double eps,
                                              bool is_static);

// The element types of a call, for the dispatch to a kernel variant.
bool is_bf16(const Tensor& input);
bool is_fp8(const Tensor& output_q);

}  // namespace sgl_quant
