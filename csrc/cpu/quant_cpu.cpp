// C++ CPU implementation of the ops: the math of docs/spec.md §1 and §6.2 written plainly, one group (one
// row) at a time. It is the reference for devices without CUDA and the oracle the CUDA tests compare
// against. Bit-exactness with the CUDA kernels (built with --use_fast_math) holds where docs/spec.md §1.1
// says so; elsewhere (float-scale codes, fused SiLU in fp16) a rare code may be one step off. The
// RMSNorm part (docs/spec.md §6.3) uses the kernel's summation order and IEEE steps: the same bytes.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Float8_e4m3fn.h>
#include <torch/headeronly/util/Half.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../quant_args.h"

namespace sgl_quant {
namespace {

// The functions marked SGLQ_CPU_CLONES are compiled twice on x86-64 with GCC >= 11 (which names
// x86-64-v3): for x86-64-v3 (AVX2, FMA) and for the baseline; the dynamic loader picks one per CPU
// (function multiversioning, an ifunc). Both run the same IEEE operations in the same order
// (-ffp-contract=off forbids contraction; no reassociation without -ffast-math; std::fma is an
// instruction in one and glibc's exact fmaf in the other; the headers pick their fp16/bf16 conversions
// by macros, the same in both): the same bytes, faster (tests/test_cpu_bytes.py pins them).
// CPPFLAGS=-DSGLQ_CPU_NO_CLONES builds the baseline alone.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 && \
    !defined(SGLQ_CPU_NO_CLONES)
#define SGLQ_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SGLQ_CPU_CLONES
#endif

using BFloat16 = torch::headeronly::BFloat16;
using Half = torch::headeronly::Half;
using Float8_e4m3fn = torch::headeronly::Float8_e4m3fn;

// fp32 arithmetic under --use_fast_math flushes subnormal operands and results to zero (keeping the
// sign); the SiLU product does the same here, so that a subnormal bf16 `up` gives the kernel's (and
// the reference's) zero, not a tiny product that could become the group's amax.
inline float flush_subnormal(float x) {
  return std::fabs(x) < std::numeric_limits<float>::min() ? std::copysign(0.0f, x) : x;  // zeros stay as they are
}

// The activation values v of docs/spec.md §1 of one group of n elements (rounded to T exactly where the kernel
// rounds); up is null without fused SiLU.
template <typename T>
SGLQ_CPU_CLONES void activation(const T* gate, const T* up, int64_t n, float* v) {
  if (up == nullptr) {
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(gate[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float z = flush_subnormal(static_cast<float>(gate[i]));
    const T a = static_cast<T>(flush_subnormal(z / (1.0f + std::exp(-z))));
    const float product = flush_subnormal(static_cast<float>(a) * flush_subnormal(static_cast<float>(up[i])));
    v[i] = static_cast<float>(static_cast<T>(product));
  }
}

// The codes of n finite activation values at the reciprocal scale y (docs/spec.md §1).
template <typename Q, typename R>
void encode(const float* v, float y, Q* q, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float c = std::min(std::max(v[i] * y, R::kMin), R::kMax);
    if constexpr (std::is_same_v<Q, int8_t>) {
      q[i] = static_cast<int8_t>(c);  // truncation toward zero, as the reference kernel does
    } else {
      reinterpret_cast<uint8_t*>(q)[i] = fp8_e4m3_bits(c);
    }
  }
}

template <typename Q>
Q nan_code() {
  if constexpr (std::is_same_v<Q, int8_t>) {
    return 0;
  } else {
    return Q(kFp8NanCode, Q::from_bits());
  }
}

// docs/spec.md §1 for one group: codes q[0, group_size) and scale g of the row whose scales start at s_row
// (in elements of output_s) from the activation values v. Shared by every op.
template <typename Q, typename R>
SGLQ_CPU_CLONES void quantize_group(const QuantParams& p, const float* v, Q* q, int64_t s_row, int64_t g) {
  const int64_t gs = p.group_size;
  uint32_t amax_bits = 0;
  for (int64_t i = 0; i < gs; ++i) amax_bits = std::max(amax_bits, float_bits(v[i]) & 0x7fffffffu);
  const bool finite = amax_bits < kNonFiniteBits;
  const float amax = std::max(bits_to_float(amax_bits), p.eps);
  float s, y;
  int e = 0;
  if (p.scale_kind == ScaleKind::kFloat) {
    s = amax * R::kInvMax;
    y = R::kMax * (1.0f / amax);  // closest to the kernel's fast-math division (docs/spec.md §1.1)
  } else {
    e = ceil_log2_from_bits(amax * R::kInvMax);
    s = pow2_from_bits(e);
    y = pow2_from_bits(-e);
  }
  if (finite) {
    encode<Q, R>(v, y, q, gs);
  } else {
    std::fill(q, q + gs, nan_code<Q>());
  }
  if (p.scale_kind == ScaleKind::kPackedUE8M0) {
    uint8_t* word = static_cast<uint8_t*>(p.output_s) + 4 * (s_row + (g / 4) * p.s_group_stride);
    word[g % 4] = finite ? static_cast<uint8_t>(e + 127) : kUE8M0NanByte;
    if (g == p.groups_per_row - 1) {
      for (int64_t k = g % 4 + 1; k < 4; ++k) word[k] = 0;  // pad bytes of the last word
    }
  } else {
    static_cast<float*>(p.output_s)[s_row + g * p.s_group_stride] = finite ? s : bits_to_float(kNanBits);
  }
}

// Rows [begin, end) in parallel, with a grain of about 16K elements.
template <typename F>
void for_each_row(int64_t rows, int64_t hidden, const F& f) {
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(hidden, 1));
  torch::stable::parallel_for(0, rows, grain, f);
}

// v2/DSV4 rows [begin, end) of the flattened (outer, row) range.
template <typename T, typename Q, typename R>
SGLQ_CPU_CLONES void quantize_rows(const QuantParams& p, int64_t begin, int64_t end) {
  const int64_t gs = p.group_size, G = p.groups_per_row, H = p.hidden;
  std::vector<float> v(gs);
  for (int64_t r = begin; r < end; ++r) {
    const int64_t outer = r / p.rows_per_outer, row = r % p.rows_per_outer;
    if (p.masked_m != nullptr) {
      const int64_t count = std::clamp<int64_t>(p.masked_m[outer], 0, p.rows_per_outer);
      if (row >= count) continue;  // rows beyond the expert's count are not written
    }
    const T* in_row = static_cast<const T*>(p.input) + outer * p.in_outer_stride + row * p.in_row_stride;
    Q* q_row = static_cast<Q*>(p.output_q) + r * p.q_row_stride;
    const int64_t s_row = outer * p.s_outer_stride + row * p.s_row_stride;
    for (int64_t g = 0; g < G; ++g) {
      const T* gate = in_row + g * gs;
      activation(gate, p.fuse_silu_and_mul ? gate + H : nullptr, gs, v.data());
      quantize_group<Q, R>(p, v.data(), q_row + g * gs, s_row, g);
    }
    if (p.s_pad_rows > 0 && r == p.num_rows() - 1) {  // vLLM's packed op: the padding rows' words, but the last column's
      for (int64_t c = 0; c + 1 < (G + 3) / 4; ++c) {
        for (int64_t k = 1; k <= p.s_pad_rows; ++k) static_cast<int32_t*>(p.output_s)[s_row + c * p.s_group_stride + k] = 0;
      }
    }
  }
}

template <typename T, typename Q, typename R>
void quantize_cpu(const QuantParams& p) {
  for_each_row(p.num_rows(), p.hidden, [&](int64_t begin, int64_t end) { quantize_rows<T, Q, R>(p, begin, end); });
}

// ---------------------------------------------------------------------------------------------
// Per-token and per-tensor quantization (docs/spec.md §8.1): the scalar steps are quant_params.h's, shared
// with the CUDA kernels.

// The code of c = v * y (an IEEE product; NaN only for a NaN v under a static scale).
template <typename Q, typename R>
Q code_rn(float c, int32_t zp) {
  if constexpr (std::is_same_v<Q, int8_t>) {
    return int8_code_rn(c, zp);
  } else {
    return std::isnan(c) ? nan_code<Q>() : Q(fp8_e4m3_bits(std::min(std::max(c, R::kMin), R::kMax)), Q::from_bits());
  }
}

// The largest |v| of a row as fp32 bits (NaN/Inf patterns sort above every finite value).
inline uint32_t abs_max_bits(const float* v, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, float_bits(v[i]) & 0x7fffffffu);
  return m;
}

// The row's activation values (docs/spec.md §1's front).
template <typename T>
void row_values(const ScaledQuantParams& p, int64_t r, float* v) {
  const T* gate = static_cast<const T*>(p.input) + r * p.in_row_stride;
  activation(gate, p.fuse_silu_and_mul ? gate + p.hidden : nullptr, p.hidden, v);
}

// docs/spec.md §8.1 for one row of activation values v[0, H): per token, its scale (and zero point) into *s_out
// (*azp_out), then its codes; per tensor, its codes at the tensor's reciprocal scale y (finite: false when
// every code is NaN / 0).
template <typename Q, typename R>
SGLQ_CPU_CLONES void scaled_quantize_row(const float* v, int64_t H, Granularity granularity, float eps,
                                         const float* scale_ub, float y, bool finite, float* s_out, int32_t* azp_out,
                                         Q* q) {
  int32_t zp = 0;
  if (granularity == Granularity::kPerToken || granularity == Granularity::kPerTokenAsym) {
    const uint32_t amax = abs_max_bits(v, H);
    finite = amax < kNonFiniteBits;
    float s;
    if (granularity == Granularity::kPerTokenAsym) {
      int32_t lo = INT32_MAX, hi = INT32_MIN;  // ordered keys, as the kernel compares them
      for (int64_t i = 0; i < H; ++i) lo = std::min(lo, ordered_key(v[i])), hi = std::max(hi, ordered_key(v[i]));
      s = asymmetric_scale(from_ordered_key(lo), from_ordered_key(hi), eps);
      y = ieee_div(1.0f, s);
      zp = finite ? asymmetric_zero_point(from_ordered_key(lo), y) : 0;
      *azp_out = zp;
    } else {
      const float ub = scale_ub ? *scale_ub : std::numeric_limits<float>::infinity();
      s = symmetric_scale(bits_to_float(amax), ub, eps, R::kMax);
      y = ieee_div(1.0f, s);
    }
    *s_out = finite ? s : bits_to_float(kNanBits);
  }
  for (int64_t i = 0; i < H; ++i) q[i] = finite ? code_rn<Q, R>(ieee_mul(v[i], y), zp) : nan_code<Q>();
}

// The sum of squares of one row in the order of docs/spec.md §6.3 and the CUDA kernel
// (csrc/cuda/rmsnorm_quant.cuh): per 8-element vector an fma chain from +0, then a pairwise tree
// over the vectors (adjacent pairs first), zeros padding the vector count to a power of two.
SGLQ_CPU_CLONES float row_sum_of_squares(const float* z, int64_t hidden, std::vector<float>& partial) {
  const int64_t vectors = hidden / 8;
  int64_t padded = 1;
  while (padded < vectors) padded *= 2;
  partial.assign(padded, 0.0f);
  for (int64_t u = 0; u < vectors; ++u) {
    float acc = 0.0f;
    for (int64_t e = 0; e < 8; ++e) acc = std::fma(z[8 * u + e], z[8 * u + e], acc);
    partial[u] = acc;
  }
  for (int64_t step = 1; step < padded; step *= 2) {
    for (int64_t i = 0; i < padded; i += 2 * step) partial[i] = partial[i] + partial[i + step];
  }
  return partial[0];
}

// T(v), with every NaN written as 0x7FFF: the canonical NaN the GPU's conversions (cvt.rn.bf16x2.f32,
// cvt.rn.f16x2.f32) produce, so that non-finite rows give the same bytes on both.
template <typename T>
T round_to(float v) {
  return std::isnan(v) ? T(0x7fff, T::from_bits()) : static_cast<T>(v);
}

// docs/spec.md §6.2 for rows [begin, end); codes and scales through quantize_group, as v2 on the normed values.
template <typename T, typename Q, typename R>
SGLQ_CPU_CLONES void rmsnorm_quantize_rows(const RmsNormQuantParams& rp, int64_t begin, int64_t end) {
  const QuantParams& p = rp.quant;
  const int64_t gs = p.group_size, G = p.groups_per_row, H = p.hidden;
  const T* weight = static_cast<const T*>(rp.weight);
  std::vector<float> z(H), v(H), partial;
  // per-token / per-tensor codes (docs/spec.md §8.3): a static scale's reciprocal, once
  const bool per_tensor = rp.scaled && rp.granularity == Granularity::kPerTensorStatic;
  const float tensor_y = per_tensor ? ieee_div(1.0f, *rp.scale) : 0.0f;
  const bool tensor_finite = per_tensor && usable_static_scale(*rp.scale);
  for (int64_t r = begin; r < end; ++r) {
    const T* x = static_cast<const T*>(p.input) + r * p.in_row_stride;
    T* residual = rp.residual ? static_cast<T*>(rp.residual) + r * H : nullptr;
    for (int64_t i = 0; i < H; ++i) z[i] = static_cast<float>(x[i]);
    if (residual) {
      for (int64_t i = 0; i < H; ++i) {
        z[i] = z[i] + static_cast<float>(residual[i]);
        residual[i] = round_to<T>(z[i]);
      }
    }
    const float ss = row_sum_of_squares(z.data(), H, partial);
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(H) + rp.norm_eps);
    for (int64_t i = 0; i < H; ++i) {
      v[i] = static_cast<float>(round_to<T>((z[i] * inv) * static_cast<float>(weight[i])));
    }
    if (rp.output_normed) {  // v holds T values: converting back gives the same T (NaN as 0x7FFF)
      T* normed = static_cast<T*>(rp.output_normed) + r * H;
      for (int64_t i = 0; i < H; ++i) normed[i] = round_to<T>(v[i]);
    }
    Q* q_row = static_cast<Q*>(p.output_q) + r * p.q_row_stride;
    if (rp.scaled) {
      scaled_quantize_row<Q, R>(v.data(), H, rp.granularity, p.eps, per_tensor ? nullptr : rp.scale, tensor_y,
                                tensor_finite,
                                per_tensor ? nullptr : static_cast<float*>(p.output_s) + r * p.s_row_stride, nullptr,
                                q_row);
      continue;
    }
    for (int64_t g = 0; g < G; ++g) quantize_group<Q, R>(p, v.data() + g * gs, q_row + g * gs, r * p.s_row_stride, g);
  }
}

template <typename T, typename Q, typename R>
void rmsnorm_quantize_cpu(const RmsNormQuantParams& rp) {
  for_each_row(rp.quant.num_rows(), rp.quant.hidden,
               [&](int64_t begin, int64_t end) { rmsnorm_quantize_rows<T, Q, R>(rp, begin, end); });
}

// Rows [begin, end) of a per-token / per-tensor call (tensor_y, tensor_finite: per tensor, the tensor's).
template <typename T, typename Q, typename R>
SGLQ_CPU_CLONES void scaled_quantize_rows(const ScaledQuantParams& p, float tensor_y, bool tensor_finite,
                                          int64_t begin, int64_t end) {
  std::vector<float> v(p.hidden);
  for (int64_t r = begin; r < end; ++r) {
    row_values<T>(p, r, v.data());
    scaled_quantize_row<Q, R>(v.data(), p.hidden, p.granularity, p.eps, p.scale_ub, tensor_y, tensor_finite,
                              p.output_s + r * p.s_row_stride, p.output_azp ? p.output_azp + r * p.s_row_stride : nullptr,
                              static_cast<Q*>(p.output_q) + r * p.q_row_stride);
  }
}

template <typename T, typename Q, typename R>
void scaled_quantize_cpu(const ScaledQuantParams& p) {
  float y = 0.0f;
  bool finite = true;
  if (p.granularity == Granularity::kPerTensorStatic) {
    finite = usable_static_scale(*p.static_scale);
    y = ieee_div(1.0f, *p.static_scale);
  } else if (p.granularity == Granularity::kPerTensorDynamic) {  // the amax of every row first (a max: any order)
    std::vector<uint32_t> row_amax(p.num_rows);
    for_each_row(p.num_rows, p.hidden, [&](int64_t begin, int64_t end) {
      std::vector<float> v(p.hidden);
      for (int64_t r = begin; r < end; ++r) {
        row_values<T>(p, r, v.data());
        row_amax[r] = abs_max_bits(v.data(), p.hidden);
      }
    });
    const uint32_t amax = *std::max_element(row_amax.begin(), row_amax.end());
    finite = amax < kNonFiniteBits;
    const float s = symmetric_scale(bits_to_float(amax), std::numeric_limits<float>::infinity(), p.eps, R::kMax);
    y = ieee_div(1.0f, s);
    *p.output_s = finite ? s : bits_to_float(kNanBits);
  }
  for_each_row(p.num_rows, p.hidden,
               [&](int64_t begin, int64_t end) { scaled_quantize_rows<T, Q, R>(p, y, finite, begin, end); });
}

// Calls fn<T, Q, R>() for the call's input and code types.
template <template <typename, typename, typename> class Fn, typename... Args>
void dispatch_types(bool bf16, bool fp8, const Args&... args) {
  if (fp8) {
    bf16 ? Fn<BFloat16, Float8_e4m3fn, Fp8Range>::run(args...) : Fn<Half, Float8_e4m3fn, Fp8Range>::run(args...);
  } else {
    bf16 ? Fn<BFloat16, int8_t, Int8Range>::run(args...) : Fn<Half, int8_t, Int8Range>::run(args...);
  }
}
template <typename T, typename Q, typename R>
struct Quantize {
  static void run(const QuantParams& p) { quantize_cpu<T, Q, R>(p); }
};
template <typename T, typename Q, typename R>
struct ScaledQuantize {
  static void run(const ScaledQuantParams& p) { scaled_quantize_cpu<T, Q, R>(p); }
};
template <typename T, typename Q, typename R>
struct RmsNormQuantize {
  static void run(const RmsNormQuantParams& p) { rmsnorm_quantize_cpu<T, Q, R>(p); }
};

void per_token_group_quant_8bit_v2_cpu(const Tensor& input, Tensor output_q, Tensor output_s, int64_t group_size,
                                       double eps, double min_8bit, double max_8bit, bool scale_ue8m0,
                                       bool fuse_silu_and_mul, std::optional<Tensor> masked_m, bool /*enable_pdl*/) {
  const QuantParams p = make_v2_params(input, output_q, output_s, group_size, eps, min_8bit, max_8bit, scale_ue8m0,
                                       fuse_silu_and_mul, masked_m);
  if (p.num_groups() > 0) dispatch_types<Quantize>(is_bf16(input), is_fp8(output_q), p);
}

void per_token_group_quant_8bit_packed_cpu(const Tensor& input, Tensor output_q, Tensor output_s, int64_t group_size,
                                           double eps, double min_8bit, double max_8bit, bool /*enable_pdl*/) {
  const QuantParams p = make_packed_params(input, output_q, output_s, group_size, eps, min_8bit, max_8bit);
  if (p.num_groups() > 0) dispatch_types<Quantize>(is_bf16(input), is_fp8(output_q), p);
}

void per_token_group_quant_fp8_dsv4_cpu(const Tensor& input, Tensor output_q, Tensor output_s, bool /*enable_pdl*/) {
  const QuantParams p = make_dsv4_params(input, output_q, output_s);
  if (p.num_groups() > 0) dispatch_types<Quantize>(is_bf16(input), true, p);
}

void rmsnorm_per_token_group_quant_8bit_cpu(const Tensor& input, const Tensor& weight, std::optional<Tensor> residual,
                                            Tensor output_q, Tensor output_s, std::optional<Tensor> output_normed,
                                            int64_t group_size, double norm_eps, double eps, double min_8bit,
                                            double max_8bit, bool scale_ue8m0, bool /*enable_pdl*/) {
  const RmsNormQuantParams p = make_rmsnorm_params(input, weight, residual, output_q, output_s, output_normed,
                                                   group_size, norm_eps, eps, min_8bit, max_8bit, scale_ue8m0);
  if (p.quant.num_groups() > 0) dispatch_types<RmsNormQuantize>(is_bf16(input), is_fp8(output_q), p);
}

void per_token_quant_8bit_cpu(const Tensor& input, Tensor output_q, Tensor output_s, std::optional<Tensor> output_azp,
                              std::optional<Tensor> scale_ub, double eps, bool fuse_silu_and_mul, bool /*enable_pdl*/) {
  const ScaledQuantParams p = make_per_token_params(input, output_q, output_s, output_azp, scale_ub, eps, fuse_silu_and_mul);
  if (p.num_rows > 0) dispatch_types<ScaledQuantize>(is_bf16(input), is_fp8(output_q), p);
}

void per_tensor_quant_8bit_cpu(const Tensor& input, Tensor output_q, Tensor output_s, bool is_static, double eps,
                               bool fuse_silu_and_mul, bool /*enable_pdl*/) {
  const ScaledQuantParams p = make_per_tensor_params(input, output_q, output_s, is_static, eps, fuse_silu_and_mul);
  if (p.num_rows > 0) dispatch_types<ScaledQuantize>(is_bf16(input), is_fp8(output_q), p);
}

void rmsnorm_per_token_quant_8bit_cpu(const Tensor& input, const Tensor& weight, std::optional<Tensor> residual,
                                      Tensor output_q, Tensor output_s, std::optional<Tensor> output_normed,
                                      std::optional<Tensor> scale_ub, double norm_eps, double eps, bool /*enable_pdl*/) {
  const RmsNormQuantParams p = make_rmsnorm_scaled_params("sgl_quant.rmsnorm_per_token_quant_8bit", input, weight,
                                                          residual, output_q, output_s, output_normed, scale_ub,
                                                          norm_eps, eps, false);
  if (p.quant.num_groups() > 0) dispatch_types<RmsNormQuantize>(is_bf16(input), is_fp8(output_q), p);
}

void rmsnorm_per_tensor_quant_8bit_cpu(const Tensor& input, const Tensor& weight, std::optional<Tensor> residual,
                                       Tensor output_q, const Tensor& scale, std::optional<Tensor> output_normed,
                                       double norm_eps, bool /*enable_pdl*/) {
  const RmsNormQuantParams p = make_rmsnorm_scaled_params("sgl_quant.rmsnorm_per_tensor_quant_8bit", input, weight,
                                                          residual, output_q, scale, output_normed, std::nullopt,
                                                          norm_eps, 1e-10, true);
  if (p.quant.num_groups() > 0) dispatch_types<RmsNormQuantize>(is_bf16(input), is_fp8(output_q), p);
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(sgl_quant, CPU, m) {
  m.impl("per_token_group_quant_8bit_v2", TORCH_BOX(&per_token_group_quant_8bit_v2_cpu));
  m.impl("per_token_group_quant_8bit_packed", TORCH_BOX(&per_token_group_quant_8bit_packed_cpu));
  m.impl("per_token_group_quant_fp8_dsv4", TORCH_BOX(&per_token_group_quant_fp8_dsv4_cpu));
  m.impl("rmsnorm_per_token_group_quant_8bit", TORCH_BOX(&rmsnorm_per_token_group_quant_8bit_cpu));
  m.impl("per_token_quant_8bit", TORCH_BOX(&per_token_quant_8bit_cpu));
  m.impl("per_tensor_quant_8bit", TORCH_BOX(&per_tensor_quant_8bit_cpu));
  m.impl("rmsnorm_per_token_quant_8bit", TORCH_BOX(&rmsnorm_per_token_quant_8bit_cpu));
  m.impl("rmsnorm_per_tensor_quant_8bit", TORCH_BOX(&rmsnorm_per_tensor_quant_8bit_cpu));
}

}  // namespace sgl_quant
