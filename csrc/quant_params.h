// Shared by the CPU and CUDA implementations: the description of one quantization
// problem (pointers, extents, strides) and the scalar math of docs/spec.md §1 that must be
// identical on both sides (UE8M0 rounding from exponent bits, the non-finite rule).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define SGLQ_HD __host__ __device__ __forceinline__
#else
#define SGLQ_HD inline
#endif

namespace sgl_quant {

// How a group's scale is stored.
enum class ScaleKind : int {
  kFloat = 0,        // fp32 s = amax / MAX; any strides (row-major or column-major)
  kFloatUE8M0 = 1,   // fp32 s rounded up to a power of two (row-major UE8M0, DSV4)
  kPackedUE8M0 = 2,  // one byte e+127 per group, 4 groups per int32 word (DeepGEMM SM100)
};

// Supported group sizes (elements per group).
constexpr int kGroupSizes[] = {16, 32, 64, 128, 256};

// The smallest eps accepted. Below it, MAX / amax overflows fp32 for all-zero groups and
// amax / MAX becomes subnormal (flushed to zero under --use_fast_math), so the result would
// depend on the device's denormal mode. 2^-100 ~ 7.9e-31 is far below any eps used in practice.
constexpr double kMinEps = 7.888609052210118e-31;  // 2^-100

// Masked layout: the per-expert prefix sum lives in shared memory (see the CUDA kernel).
constexpr int64_t kMaxMaskedExperts = 50000;

// One quantization problem. Rows are addressed by (outer, row):
//   v2 2-D  [M, H]          -> outer = 1,  rows_per_outer = M
//   v2 3-D  [E, M_pad, H]   -> outer = E,  rows_per_outer = M_pad  (masked or batched)
//   dsv4    [T, G_h, D]     -> outer = T,  rows_per_outer = G_h
// The codes' rows have one stride: row (outer, row) starts at (outer * rows_per_outer + row) * q_row_stride.
struct QuantParams {
  const void* input = nullptr;
  void* output_q = nullptr;
  void* output_s = nullptr;
  const int32_t* masked_m = nullptr;  // per-outer valid row counts, clamped to [0, rows_per_outer]; null: all rows

  int64_t num_outer = 0;
  int64_t rows_per_outer = 0;
  int64_t in_outer_stride = 0;  // input strides, in elements
  int64_t in_row_stride = 0;
  int64_t s_outer_stride = 0;   // scale strides, in elements of output_s (float, or int32 word when packed)
  int64_t s_row_stride = 0;
  int64_t s_group_stride = 0;

  int32_t hidden = 0;          // H: codes per row; with fused SiLU the input row holds 2H values
  int32_t groups_per_row = 0;  // G = H / group_size
  int32_t group_size = 0;
  float eps = 1e-10f;
  ScaleKind scale_kind = ScaleKind::kFloat;
  bool fuse_silu_and_mul = false;
  int32_t q_row_stride = 0;  // codes between rows (>= H; the CUDA kernels take H, other strides are staged)
  // Packed UE8M0 scales of a 2-D call (vLLM's packed op, docs/spec.md §3.4): the scale words of rows M ..
  // M + s_pad_rows - 1 = s_group_stride - 1 in every column but the last (the buffer's TMA padding) are written
  // with 0.
  int32_t s_pad_rows = 0;

  SGLQ_HD int64_t num_rows() const { return num_outer * rows_per_outer; }
  SGLQ_HD int64_t num_groups() const { return num_rows() * groups_per_row; }
};

// Per-token and per-tensor quantization (docs/spec.md §8): how the scales are taken.
enum class Granularity : int {
  kPerToken = 0,          // a scale per row: amax = max(eps, min(max |v|, scale_ub))
  kPerTokenAsym = 1,      // int8, a scale and a zero point per row, from the row's min and max
  kPerTensorStatic = 2,   // the caller's scale
  kPerTensorDynamic = 3,  // one scale from the whole tensor's amax
};

// The fused (add +) RMSNorm -> quantization problem (docs/spec.md §6): `quant` describes the input rows
// (row stride allowed) and the codes and scales exactly as v2 would for a 2-D input (num_outer = 1);
// weight, residual and output_normed are [H] / contiguous [M, H] of the input's type.
struct RmsNormQuantParams {
  QuantParams quant;
  const void* weight = nullptr;
  void* residual = nullptr;       // null: no residual (z = x); else read, and written with T(x + r)
  void* output_normed = nullptr;  // null: the normalized activation is not stored
  float norm_eps = 1e-6f;
  // Per-token / per-tensor codes (docs/spec.md §8.3) instead of per-group ones: kPerToken (one fp32 scale per
  // row into quant.output_s, stride quant.s_row_stride) or kPerTensorStatic (the scale `scale`, read only).
  // quant.group_size is then 16: the layout of a row's chunks, not a scale granularity.
  bool scaled = false;
  Granularity granularity = Granularity::kPerToken;
  const float* scale = nullptr;  // kPerToken: scale_ub (null: none); kPerTensorStatic: the scale
};

// The fused op's kernels hold a row in chunks of 16 elements (two 16-byte vectors): its per-token / per-tensor
// codes need H % 16 == 0 (its group codes, H % group_size == 0).
constexpr int64_t kElemsPerChunk = 16;

// Largest H of the fused op: the CUDA kernel keeps a row in the registers of at most 1024 threads,
// two 16-element chunks each.
constexpr int64_t kMaxRmsNormHidden = 32768;

SGLQ_HD uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
#endif
}

SGLQ_HD float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
#endif
}

// |v| bit patterns order like |v| itself, and every NaN/Inf pattern is >= this one, so a
// max over abs-bit patterns gives amax and detects non-finite input in the same pass.
constexpr uint32_t kNonFiniteBits = 0x7f800000u;
constexpr uint32_t kNanBits = 0x7fc00000u;
constexpr uint8_t kFp8NanCode = 0x7f;      // e4m3fn NaN
constexpr uint8_t kUE8M0NanByte = 0xff;    // E8M0 NaN

// ceil(log2(x)) for x > 0, from the bits: unbiased exponent, +1 if any mantissa bit is set.
SGLQ_HD int ceil_log2_from_bits(float x) {
  const uint32_t b = float_bits(x);
  return static_cast<int>((b >> 23) & 0xffu) - 127 + ((b & 0x7fffffu) != 0u ? 1 : 0);
}

// 2^e built from exponent bits (exact for -126 <= e <= 127).
SGLQ_HD float pow2_from_bits(int e) { return bits_to_float(static_cast<uint32_t>(e + 127) << 23); }

// The e4m3fn bits of c, rounded to nearest even, for a finite |c| <= 448 (the clamp of docs/spec.md §1
// guarantees both): the bits of torch's Float8_e4m3fn(c) for every such float (tests/test_fp8_bits.py),
// without its branches for NaN and overflow, so that the CPU implementation's loop over a group
// vectorizes. Host only: the CUDA kernels convert with __nv_cvt_float2_to_fp8x2 (satfinite, the same
// rounding).
inline uint8_t fp8_e4m3_bits(float c) {
  const uint32_t bits = float_bits(c);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t mag = bits & 0x7fffffffu;
  // |c| >= 2^-6, a normal fp8 value: keep 3 mantissa bits (nearest even), rebias the exponent 127 -> 7
  const uint32_t normal = (mag + ((7u - 127u) << 23) + 0x7ffffu + ((mag >> 20) & 1u)) >> 20;
  // |c| < 2^-6: the fp8 subnormal step 2^-9 is the last mantissa bit of 2^14, so the fp32 addition
  // rounds |c| to it (nearest even) and the difference of the bits is the code
  const uint32_t subnormal = float_bits(bits_to_float(mag) + 16384.0f) - float_bits(16384.0f);
  const bool is_subnormal = static_cast<int32_t>(mag) < static_cast<int32_t>(121u << 23);  // mag < 2^31
  return static_cast<uint8_t>(sign | (is_subnormal ? subnormal : normal));
}

// IEEE fp32 steps of the math both implementations share: on the device the instructions themselves (the
// build's --use_fast_math would approximate the division and flush subnormal operands and results of
// ordinary arithmetic), on the host the operators (the CPU build has no fast-math and -ffp-contract=off).
SGLQ_HD float ieee_add(float a, float b) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return a + b;
#endif
}
SGLQ_HD float ieee_mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return a * b;
#endif
}
SGLQ_HD float ieee_div(float a, float b) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return a / b;
#endif
}

// Per-output-type constants (docs/spec.md §1). kInvMax is fp32(1 / MAX), as the reference computes it.
struct Fp8Range {
  static constexpr bool kIsFp8 = true;
  static constexpr float kMin = -448.0f;
  static constexpr float kMax = 448.0f;
  static constexpr float kInvMax = 1.0f / 448.0f;
};
struct Int8Range {
  static constexpr bool kIsFp8 = false;
  static constexpr float kMin = -128.0f;
  static constexpr float kMax = 127.0f;
  static constexpr float kInvMax = 1.0f / 127.0f;
};


// ---------------------------------------------------------------------------------------------
// Per-token and per-tensor quantization (docs/spec.md §8.1): the scalar steps, shared by the CPU
// implementation and the CUDA kernels so that both give the same bytes.

// One per-token / per-tensor problem: rows of `hidden` codes (input rows of 2 * hidden with fused SiLU).
struct ScaledQuantParams {
  const void* input = nullptr;
  void* output_q = nullptr;
  float* output_s = nullptr;         // per row (stride s_row_stride) or one value
  int32_t* output_azp = nullptr;     // kPerTokenAsym: per row (stride s_row_stride)
  const float* scale_ub = nullptr;   // kPerToken: optional upper bound of amax (one value); null: none
  const float* static_scale = nullptr;  // kPerTensorStatic: the scale (one value)
  int64_t num_rows = 0;
  int64_t in_row_stride = 0;  // in elements
  int64_t q_row_stride = 0;   // in codes
  int64_t s_row_stride = 0;   // in elements of output_s / output_azp
  int32_t hidden = 0;
  float eps = 1e-10f;
  Granularity granularity = Granularity::kPerToken;
  bool fuse_silu_and_mul = false;
};

// s = max(eps, min(amax, ub)) / MAX for a finite amax >= 0 (ub: +Inf when absent; a NaN ub bounds nothing).
// Every value here is >= eps >= 2^-100 after the floor, so the device's flushing compare gives the same.
SGLQ_HD float symmetric_scale(float amax, float ub, float eps, float max_code) {
  const float a = ub < amax ? ub : amax;
  return ieee_div(a > eps ? a : eps, max_code);
}

// s = max(eps, hi - lo) / 255 (int8 asymmetric; hi >= lo, both finite).
SGLQ_HD float asymmetric_scale(float lo, float hi, float eps) {
  const float d = ieee_add(hi, -lo);
  return ieee_div(d > eps ? d : eps, 255.0f);
}

// Round half to even, saturated to int32, NaN -> 0: the device's cvt.rni.s32.f32.
SGLQ_HD int32_t round_to_int32(float x) {
#if defined(__CUDA_ARCH__)
  return __float2int_rn(x);
#else
  if (std::isnan(x)) return 0;
  if (x >= 2147483648.0f) return INT32_MAX;
  if (x <= -2147483648.0f) return INT32_MIN;
  return static_cast<int32_t>(std::nearbyint(x));  // the default rounding mode: to nearest even
#endif
}

// zp = round_half_even(-128 - lo * y), saturated to int32.
SGLQ_HD int32_t asymmetric_zero_point(float lo, float y) { return round_to_int32(ieee_add(-128.0f, -ieee_mul(lo, y))); }

// The int8 code of c = v * y: saturate_int8(round_half_even(c) + zp) (zp = 0 when symmetric), in 64 bits
// so that the sum of two saturated terms cannot wrap.
SGLQ_HD int8_t int8_code_rn(float c, int32_t zp) {
  const int64_t q = static_cast<int64_t>(round_to_int32(c)) + zp;
  return static_cast<int8_t>(q < -128 ? -128 : (q > 127 ? 127 : q));
}

// A signed int that orders fp32 values like their numbers (-0 below +0), so that min and max are integer
// operations: exact on the device too, where fminf/fmaxf would flush subnormal inputs.
SGLQ_HD int32_t ordered_key(float x) {
  const int32_t b = static_cast<int32_t>(float_bits(x));
  return b >= 0 ? b : b ^ 0x7fffffff;
}
SGLQ_HD float from_ordered_key(int32_t k) { return bits_to_float(static_cast<uint32_t>(k >= 0 ? k : k ^ 0x7fffffff)); }

// A static scale the kernels can use: positive and finite. (The host refuses others where it can read the
// value; on the device, where reading it would need a synchronization, every code becomes NaN / 0.)
SGLQ_HD bool usable_static_scale(float s) { return s > 0.0f && s <= 3.4028234663852886e38f; }

}  // namespace sgl_quant
