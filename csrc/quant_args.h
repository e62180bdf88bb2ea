// Argument validation shared by the CPU and CUDA implementations (SPEC §3.3).
// Every check runs here, before any launch, and every failure names the argument.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdio>
#include <optional>
#include <string>
#include <type_traits>

#include "quant_params.h"

namespace sgl_quant {
namespace detail {

// Error messages are assembled from strings here: numbers go through std::to_string / snprintf,
// never through iostreams. Seen on the H200 image (2026-11-29): with its /opt/gcc toolchain the
// extension carries its own copy of libstdc++'s number formatting, and formatting an integer
// into c10::str's ostringstream segfaulted, turning every error with a number in it into a crash.
inline void append(std::string& s, const char* v) { s += v; }
inline void append(std::string& s, const std::string& v) { s += v; }
inline void append(std::string& s, at::ScalarType v) { s += c10::toString(v); }
inline void append(std::string& s, const at::Device& v) { s += v.str(); }
inline void append(std::string& s, at::IntArrayRef v) {  // sizes and strides: "[a, b, c]"
  s += "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  s += "]";
}
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

}  // namespace detail

// TORCH_CHECK with a message built by detail::message (evaluated only when the check fails).
#define SGLQ_CHECK(cond, ...) TORCH_CHECK(cond, ::sgl_quant::detail::message(__VA_ARGS__))

// Validates the arguments of sgl_quant::per_token_group_quant_8bit_v2 and describes the problem.
// Returns params with num_groups() == 0 when there is nothing to do (M == 0, E == 0 or H == 0).
QuantParams make_v2_params(const at::Tensor& input, const at::Tensor& output_q, const at::Tensor& output_s,
                           int64_t group_size, double eps, double min_8bit, double max_8bit, bool scale_ue8m0,
                           bool fuse_silu_and_mul, const std::optional<at::Tensor>& masked_m);

// Validates the arguments of sgl_quant::per_token_group_quant_fp8_dsv4 and describes the problem
// (group size 128, eps 1e-10, UE8M0-rounded fp32 scales in the fp8_einsum layout).
QuantParams make_dsv4_params(const at::Tensor& input, const at::Tensor& output_q, const at::Tensor& output_s);

}  // namespace sgl_quant
