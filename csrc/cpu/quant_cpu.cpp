// C++ CPU implementation of both ops: the math of SPEC §1 written plainly, one group at a time.
// It is the reference for devices without CUDA and the oracle the CUDA tests compare against.
// Bit-exactness with the CUDA kernels (built with --use_fast_math) holds where SPEC §1.1 says so;
// elsewhere (float-scale codes, fused SiLU in fp16) a rare code may be one step off.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "../quant_args.h"

namespace sgl_quant {
namespace {

// fp32 arithmetic under --use_fast_math flushes subnormal operands and results to zero (keeping the
// sign); the SiLU product does the same here, so that a subnormal bf16 `up` gives the kernel's (and
// the reference's) zero, not a tiny product that could become the group's amax.
inline float flush_subnormal(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }

// The activation value v of SPEC §1 (rounded to T exactly where the kernel rounds).
template <typename T>
float activation(const T* gate, const T* up, int64_t i) {
  if (up == nullptr) return static_cast<float>(gate[i]);
  const float z = flush_subnormal(static_cast<float>(gate[i]));
  const T a = static_cast<T>(flush_subnormal(z / (1.0f + std::exp(-z))));
  const float product = flush_subnormal(static_cast<float>(a) * flush_subnormal(static_cast<float>(up[i])));
  return static_cast<float>(static_cast<T>(product));
}

template <typename Q, typename R>
Q encode(float v, float y) {
  const float c = std::min(std::max(v * y, R::kMin), R::kMax);
  if constexpr (std::is_same_v<Q, int8_t>) {
    return static_cast<int8_t>(c);  // truncation toward zero, as the reference kernel does
  } else {
    return Q(c);  // round to nearest even; |c| <= 448 so it never saturates
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

template <typename T, typename Q, typename R>
void quantize_cpu(const QuantParams& p) {
  const int64_t gs = p.group_size, G = p.groups_per_row, H = p.hidden;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(H, 1));
  at::parallel_for(0, p.num_rows(), grain, [&](int64_t begin, int64_t end) {
    std::vector<float> v(gs);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t outer = r / p.rows_per_outer, row = r % p.rows_per_outer;
      if (p.masked_m != nullptr) {
        const int64_t count = std::clamp<int64_t>(p.masked_m[outer], 0, p.rows_per_outer);
        if (row >= count) continue;  // rows beyond the expert's count are not written
      }
      const T* in_row = static_cast<const T*>(p.input) + outer * p.in_outer_stride + row * p.in_row_stride;
      Q* q_row = static_cast<Q*>(p.output_q) + r * H;
      const int64_t s_row = outer * p.s_outer_stride + row * p.s_row_stride;
      for (int64_t g = 0; g < G; ++g) {
        const T* gate = in_row + g * gs;
        const T* up = p.fuse_silu_and_mul ? gate + H : nullptr;
        uint32_t amax_bits = 0;
        for (int64_t i = 0; i < gs; ++i) {
          v[i] = activation(gate, up, i);
          amax_bits = std::max(amax_bits, float_bits(v[i]) & 0x7fffffffu);
        }
        const bool finite = amax_bits < kNonFiniteBits;
        const float amax = std::max(bits_to_float(amax_bits), p.eps);
        float s, y;
        int e = 0;
        if (p.scale_kind == ScaleKind::kFloat) {
          s = amax * R::kInvMax;
          y = R::kMax * (1.0f / amax);  // closest to the kernel's fast-math division (SPEC §1.1)
        } else {
          e = ceil_log2_from_bits(amax * R::kInvMax);
          s = pow2_from_bits(e);
          y = pow2_from_bits(-e);
        }
        Q* q = q_row + g * gs;
        for (int64_t i = 0; i < gs; ++i) q[i] = finite ? encode<Q, R>(v[i], y) : nan_code<Q>();
        if (p.scale_kind == ScaleKind::kPackedUE8M0) {
          uint8_t* word = static_cast<uint8_t*>(p.output_s) + 4 * (s_row + (g / 4) * p.s_group_stride);
          word[g % 4] = finite ? static_cast<uint8_t>(e + 127) : kUE8M0NanByte;
          if (g == G - 1) {
            for (int64_t k = g % 4 + 1; k < 4; ++k) word[k] = 0;  // pad bytes of the last word
          }
        } else {
          static_cast<float*>(p.output_s)[s_row + g * p.s_group_stride] = finite ? s : bits_to_float(kNanBits);
        }
      }
    }
  });
}

void quantize_cpu_dispatch(const QuantParams& p, at::ScalarType in_type, at::ScalarType out_type) {
  if (p.num_groups() == 0) return;
  const bool bf16 = in_type == at::kBFloat16;
  if (out_type == at::kFloat8_e4m3fn) {
    bf16 ? quantize_cpu<c10::BFloat16, c10::Float8_e4m3fn, Fp8Range>(p)
         : quantize_cpu<c10::Half, c10::Float8_e4m3fn, Fp8Range>(p);
  } else {
    bf16 ? quantize_cpu<c10::BFloat16, int8_t, Int8Range>(p) : quantize_cpu<c10::Half, int8_t, Int8Range>(p);
  }
}

void per_token_group_quant_8bit_v2_cpu(const at::Tensor& input, at::Tensor& output_q, at::Tensor& output_s,
                                       int64_t group_size, double eps, double min_8bit, double max_8bit,
                                       bool scale_ue8m0, bool fuse_silu_and_mul,
                                       const std::optional<at::Tensor>& masked_m, bool /*enable_pdl*/) {
  const QuantParams p = make_v2_params(input, output_q, output_s, group_size, eps, min_8bit, max_8bit, scale_ue8m0,
                                       fuse_silu_and_mul, masked_m);
  quantize_cpu_dispatch(p, input.scalar_type(), output_q.scalar_type());
}

void per_token_group_quant_fp8_dsv4_cpu(const at::Tensor& input, at::Tensor& output_q, at::Tensor& output_s,
                                        bool /*enable_pdl*/) {
  const QuantParams p = make_dsv4_params(input, output_q, output_s);
  quantize_cpu_dispatch(p, input.scalar_type(), output_q.scalar_type());
}

}  // namespace

TORCH_LIBRARY_IMPL(sgl_quant, CPU, m) {
  m.impl("per_token_group_quant_8bit_v2", &per_token_group_quant_8bit_v2_cpu);
  m.impl("per_token_group_quant_fp8_dsv4", &per_token_group_quant_fp8_dsv4_cpu);
}

}  // namespace sgl_quant
