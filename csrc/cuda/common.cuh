// Device code shared by every kernel: 16-bit pair arithmetic, the SiLU-and-mul front, programmatic
// dependent launch, and the per-group quantization of docs/spec.md §1 (quantize_words), which every op's
// codes and scales come from.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "../quant_params.h"

namespace sgl_quant {

constexpr int kElemsPerThread = 16;  // 32 bytes of 16-bit input, 16 bytes of 8-bit codes per thread
constexpr int kMaxBlockThreads = 512;

// ---------------------------------------------------------------------------------------------
// Pairs of 16-bit floats packed in one 32-bit word.
template <typename T>
struct Pack2;

template <>
struct Pack2<__nv_bfloat16> {
  static __device__ __forceinline__ float2 to_float2(uint32_t w) {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
  }
  static __device__ __forceinline__ uint32_t from_float2(float2 f) {  // round to nearest even
    const __nv_bfloat162 h = __float22bfloat162_rn(f);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
  // Float bit pattern of a non-negative bf16 given by its 16 bits.
  static __device__ __forceinline__ uint32_t abs_bits_to_float_bits(uint32_t b) { return b << 16; }
  // T(a * b) per pair, rounded once, as the fp32 multiply of --use_fast_math gives it: a subnormal b
  // counts as a zero of its sign (FTZ). `a` is T(silu), never subnormal (silu's fp32 result is flushed,
  // and a normal fp32 value rounds to a normal bf16).
  static __device__ __forceinline__ uint32_t mul_ftz(uint32_t a, uint32_t b) {
    uint32_t normal;  // per half of b: 0xffff where the exponent is nonzero (normal, Inf, NaN), else 0
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm("{.reg .b32 m; abs.bf16x2 m, %1; set.geu.u32.bf16x2 %0, m, %2;}" : "=r"(normal) : "r"(b), "r"(0x00800080u));
#else  // bit 15 of each half of s is set iff that half's exponent is nonzero; prmt replicates it
    const uint32_t s = (b & 0x7f807f80u) + 0x7f807f80u;
    asm("prmt.b32 %0, %1, 0, 0xbb99;" : "=r"(normal) : "r"(s));
#endif
    const uint32_t b_ftz = b & (normal | 0x80008000u);  // keeps the sign of flushed halves
    uint32_t r;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b_ftz), "r"(0x80008000u));
    return r;
  }
};

template <>
struct Pack2<__half> {
  static __device__ __forceinline__ float2 to_float2(uint32_t w) {
    return __half22float2(*reinterpret_cast<const __half2*>(&w));
  }
  static __device__ __forceinline__ uint32_t from_float2(float2 f) {
    const __half2 h = __float22half2_rn(f);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
  static __device__ __forceinline__ uint32_t abs_bits_to_float_bits(uint32_t b) {
    return __float_as_uint(__half2float(__ushort_as_half(static_cast<unsigned short>(b))));
  }
  // T(a * b) per pair, rounded once. fp16 values and their products are normal fp32 numbers: nothing
  // to flush.
  static __device__ __forceinline__ uint32_t mul_ftz(uint32_t a, uint32_t b) {
    uint32_t r;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(0x80008000u));
    return r;
  }
};

// silu(z) = z / (1 + exp(-z)), written as the reference kernel computes it under --use_fast_math, so that
// the rounded activations match bit for bit. On sm_100+ the reference uses the hardware tanh form, so a
// Blackwell build does the same (docs/spec.md §1.1).
__device__ __forceinline__ float silu(float z) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  const float h = 0.5f * z;
  float t;
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(h));
  return h * (1.0f + t);
#else
  return z / (1.0f + __expf(-z));
#endif
}

// v = T(T(silu(gate)) * up) for one pair. The reference multiplies in fp32, where the product of two
// 16-bit floats is exact, then rounds once to T; a paired 16-bit fma with -0 gives the same bits in one
// instruction once `up` is flushed as the fast-math fp32 multiply flushes it (Pack2::mul_ftz).
template <typename T>
__device__ __forceinline__ uint32_t silu_and_mul_pair(uint32_t gate, uint32_t up) {
  const float2 g = Pack2<T>::to_float2(gate);
  return Pack2<T>::mul_ftz(Pack2<T>::from_float2(make_float2(silu(g.x), silu(g.y))), up);
}

// IEEE fp32 steps without flush-to-zero (the fused norm, docs/spec.md §6.2): the build's --use_fast_math
// would flush subnormal operands and results of ordinary fp32 arithmetic; the CPU implementation does not.
// (ieee_add, ieee_mul and ieee_div, which host code shares, are in quant_params.h.)
__device__ __forceinline__ float ieee_fma(float a, float b, float c) {
  float r;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(c));
  return r;
}
__device__ __forceinline__ float ieee_sqrt(float a) {
  float r;
  asm("sqrt.rn.f32 %0, %1;" : "=f"(r) : "f"(a));
  return r;
}

// n / d for 0 <= n < 2^31 with one multiply-high, an add and a shift; the divisor is fixed per launch,
// so the host computes the magic number once (round-up method, exact for n < 2^31).
struct FastDivmod {
  uint32_t multiplier = 1, shift = 0;
  FastDivmod() = default;
  explicit FastDivmod(uint32_t d) {
    while ((1u << shift) < d) ++shift;
    multiplier = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  __device__ __forceinline__ int div(int n) const {
    return static_cast<int>((__umulhi(static_cast<uint32_t>(n), multiplier) + static_cast<uint32_t>(n)) >> shift);
  }
  // A divisor whose magic number and shift are stored elsewhere (packed kernel arguments).
  static __device__ __forceinline__ FastDivmod of(uint32_t multiplier, uint32_t shift) {
    FastDivmod d;
    d.multiplier = multiplier;
    d.shift = shift;
    return d;
  }
};

// Loads of data a previous kernel may write (input, weight, residual, masked counts) are coherent
// ld.global, never the read-only path (ld.global.nc, __ldg): under PDL the kernel runs while its
// producer still writes, and ptxas may move .nc loads above griddepcontrol.wait. make kernel-resources
// checks every kernel's SASS for .nc loads.
__device__ __forceinline__ uint4 load_input_vec(const void* ptr) { return *static_cast<const uint4*>(ptr); }

// ---------------------------------------------------------------------------------------------
// Programmatic dependent launch (SM90+). Without the launch attribute both are no-ops.
__device__ __forceinline__ void pdl_wait_for_producer() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
// The same where `allow` holds, as one predicated instruction (no branch).
__device__ __forceinline__ void pdl_allow_dependents_if(bool allow) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("{\n .reg .pred p;\n setp.ne.u32 p, %0, 0;\n @p griddepcontrol.launch_dependents;\n}" ::"r"(
      static_cast<uint32_t>(allow)));
#endif
}
// pdl_wait_for_producer, ordered after the computation of an address. The wait has only a memory effect,
// so ptxas hoists a plain one to the kernel's top, and the index math before it then runs after the
// producer's end instead of overlapping it (H100, PDL, v2 M=64 H=7168: 1.03 -> 1.22 us). Predicated on
// `a != 0` (always true: an input pointer plus an offset), the wait depends on the address and stays after it.
__device__ __forceinline__ void pdl_wait_for_producer_after(const void* a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("{\n .reg .pred ready;\n setp.ne.u64 ready, %0, 0;\n @ready griddepcontrol.wait;\n}" ::"l"(a) : "memory");
#endif
}
// The same after two addresses (the fused op's vectors of x and of the residual, which may be null): the
// predicate `a != 0 || b != 1` reads both and is always true (`b` is an even address or null).
__device__ __forceinline__ void pdl_wait_for_producer_after(const void* a, const void* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("{\n .reg .pred p, q;\n setp.ne.u64 p, %0, 0;\n setp.ne.u64 q, %1, 1;\n or.pred p, p, q;\n"
               " @p griddepcontrol.wait;\n}" ::"l"(a), "l"(b)
               : "memory");
#endif
}

// ---------------------------------------------------------------------------------------------
// Per-group quantization (docs/spec.md §1).

// Where one task (one group of one row) reads and writes.
template <typename T>
struct Task {
  const T* src;   // first input element of the group (of the gate half with fused SiLU)
  uint8_t* dst;   // first code of the group
  int64_t s_row;  // scale offset of the row, in elements of output_s (int32 words when packed)
  int g;          // group index within the row
};

// Codes for 2N values (N packed 16-bit pairs): N/2 words of four codes, returned by value so that the
// NaN case is a select, not a branch.
template <int N>
struct CodeWords {
  uint32_t v[N];
  static __device__ __forceinline__ CodeWords filled(uint32_t word) {
    CodeWords c;
#pragma unroll
    for (int j = 0; j < N; ++j) c.v[j] = word;
    return c;
  }
};

// int8_code_rn (quant_params.h) with a zero point: round half to even with int32 saturation (NaN -> 0), a
// saturating int32 add of the zero point, the int8 clamp. A sum past int32 saturates with its sign, so the
// clamp gives what the 64-bit sum of int8_code_rn gives (with that 64-bit form per-token int8 reached 76-79% of
// the roofline at M = 16384, fp8 99-101%; H100).
__device__ __forceinline__ int32_t int8_code_rn_device(float c, int32_t zp) {
  int32_t q;
  asm("{\n .reg .s32 r;\n cvt.rni.sat.s32.f32 r, %1;\n add.sat.s32 r, r, %2;\n max.s32 r, r, -128;\n"
      " min.s32 %0, r, 127;\n}" : "=r"(q) : "f"(c), "r"(zp));
  return q;
}

// int8_code_rn without a zero point: one conversion that rounds half to even and saturates to int8 (NaN -> 0).
// Against the zero-point form above: per-token int8, H100, M = 4096 and 16384, 12-19% faster (fp8's time).
__device__ __forceinline__ uint32_t int8_code_rn_device(float c) {
  uint32_t q;
  asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(q) : "f"(c));
  return q & 0xffu;
}

// The codes of 2N values v (N packed 16-bit pairs) at the reciprocal scale y. docs/spec.md §1 (per-token
// groups): the fast-math product, int8 codes truncated toward zero. kNearestEven (§8.1, per token and per
// tensor): the IEEE product (a subnormal bf16 v times a large y is not flushed), int8 codes rounded half to
// even, plus the zero point zp where kZeroPoint (asymmetric int8).
template <typename T, typename R, int N, bool kNearestEven = false, bool kZeroPoint = false>
__device__ __forceinline__ CodeWords<N / 2> encode_words(const uint32_t (&w)[N], float y, int32_t zp = 0) {
  static_assert(!kZeroPoint || (kNearestEven && !R::kIsFp8), "zero points: asymmetric int8 (docs/spec.md §8.1)");
  CodeWords<N / 2> codes;
#pragma unroll
  for (int j = 0; j < N; j += 2) {
    uint32_t lohi[2];
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      float2 f = Pack2<T>::to_float2(w[j + k]);
      if constexpr (kNearestEven) {
        f = make_float2(ieee_mul(f.x, y), ieee_mul(f.y, y));
      } else {
        f.x *= y;
        f.y *= y;
      }
      if constexpr (R::kIsFp8) {
        // Round to nearest even, saturating: the same codes as clamping to [-448, 448] first, two
        // instructions per value fewer (a NaN stays NaN, 0x7f: only static per-tensor scales encode one).
        lohi[k] = __nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, __NV_E4M3);
      } else if constexpr (kZeroPoint) {
        lohi[k] = static_cast<uint32_t>(static_cast<uint8_t>(int8_code_rn_device(f.x, zp))) |
                  static_cast<uint32_t>(static_cast<uint8_t>(int8_code_rn_device(f.y, zp))) << 8;
      } else if constexpr (kNearestEven) {
        lohi[k] = int8_code_rn_device(f.x) | int8_code_rn_device(f.y) << 8;
      } else {
        f.x = fminf(fmaxf(f.x, R::kMin), R::kMax);
        f.y = fminf(fmaxf(f.y, R::kMin), R::kMax);
        // int8: the C++ float-to-int conversion truncates toward zero, like the reference kernel
        lohi[k] = (static_cast<uint32_t>(static_cast<uint8_t>(__float2int_rz(f.x)))) |
                  (static_cast<uint32_t>(static_cast<uint8_t>(__float2int_rz(f.y))) << 8);
      }
    }
    codes.v[j / 2] = lohi[0] | (lohi[1] << 16);
  }
  return codes;
}

// The largest |v| of N packed pairs, as fp32 bits (NaN/Inf patterns sort above every finite value).
template <typename T, int N>
__device__ __forceinline__ uint32_t abs_max_bits(const uint32_t (&w)[N]) {
  uint32_t m2 = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) m2 = __vmaxu2(m2, w[i] & 0x7fff7fffu);
  return Pack2<T>::abs_bits_to_float_bits(max(m2 & 0xffffu, m2 >> 16));
}

// Which scale stores a kernel is compiled for. Dense v2 kernels are compiled per store, since packed words
// change their task order (kTaskColumnLog2); the masked and fused-norm kernels handle both, reading the
// arguments' scale_kind in their epilogue (a select on lane 0, off the path of the loads).
enum class ScaleStore : int {
  kFloat,   // fp32 scales, rounded to powers of two where scale_kind is kFloatUE8M0
  kPacked,  // packed UE8M0 words
  kEither,  // either, by scale_kind
  // packed UE8M0 words and 0 in the words of the padding rows M .. ceil4(M)-1 (vLLM's packed op, 2-D, group
  // size 128: a store of its own, so that the v2 kernels carry none of it; as a run-time test in the packed
  // epilogue it slowed v2's packed calls, H100 M=64 H=7168 with PDL 12-23%)
  kPackedPadded,
};

template <ScaleStore SS>
constexpr bool kPackedStore = SS == ScaleStore::kPacked || SS == ScaleStore::kPackedPadded;

template <ScaleStore SS, typename Params>
__device__ __forceinline__ bool packed_scales(const Params& p) {
  return kPackedStore<SS> || (SS == ScaleStore::kEither && p.scale_kind == ScaleKind::kPackedUE8M0);
}

// Where a task's scale goes in output_s, in bytes: its group's float, or with packed UE8M0 scales the
// int32 word that holds its group's byte (at byte t.g % 4).
template <ScaleStore SS, typename T, typename Params>
__device__ __forceinline__ int64_t scale_byte_offset(const Params& p, const Task<T>& t) {
  return 4 * (t.s_row + (packed_scales<SS>(p) ? t.g >> 2 : t.g) * p.s_group_stride);
}

// docs/spec.md §1 for one group, by the GS / (2 * kWords) threads of a sub-warp (lane: this thread's index
// in it). With kWords = 8, w holds this thread's 16 activation values: elements [lane * 8, +8) of the
// group in w[0..3] and [GS / 2 + lane * 8, +8) in w[4..7], so that each load and store instruction of a
// warp covers whole 32-byte sectors. With kWords = 4 (the small-call kernel), the 8 values [lane * 8, +8).
// Codes go to t.dst, the scale to output_s at (t.s_row, t.g). Every thread of the warp must call it
// (shuffles); threads of an invalid task only take part in them. fp32 scales are rounded to powers of two
// where p.scale_kind says so: one kernel for both, the difference a uniform branch after the group's amax.
// Params: QuantParams, or any arguments with its fields output_s, s_group_stride, groups_per_row, eps and
// scale_kind (kPackedPadded: rows_per_outer). s_offset: scale_byte_offset<SS>(p, t) where the caller has
// computed it (kScaleOffsetGiven).
template <typename T, typename R, int GS, ScaleStore SS, int kWords = 8, bool kScaleOffsetGiven = false,
          typename Params>
__device__ __forceinline__ void quantize_words(const Params& p, const Task<T>& t, int lane, bool valid,
                                               const uint32_t (&w)[kWords], int64_t s_offset = 0) {
  static_assert(kWords == 8 || kWords == 4, "16 or 8 values per thread");
  constexpr int kThreadsPerGroup = GS / (2 * kWords);
  const int chunk0 = lane * 8, chunk1 = GS / 2 + lane * 8;

  // amax over the 16-bit abs patterns (two lanes at a time); NaN/Inf sort above every finite value.
  uint32_t amax_bits = abs_max_bits<T, kWords>(w);
#pragma unroll
  for (int offset = kThreadsPerGroup / 2; offset > 0; offset /= 2) {
    amax_bits = max(amax_bits, __shfl_xor_sync(0xffffffffu, amax_bits, offset));
  }
  if (!valid) return;
  const bool finite = amax_bits < kNonFiniteBits;
  const float amax = fmaxf(__uint_as_float(amax_bits), p.eps);

  // s = amax / MAX with y by the fast-math division (as the reference), or s rounded up to 2^e with
  // y = 2^-e, both built from exponent bits. The division is issued before the uniform branch on the
  // scale kind (pinned there: the compiler would sink it into the branch, after the test).
  float s = amax * R::kInvMax;
  float y = R::kMax / amax;
  int e = 0;
  if constexpr (!kPackedStore<SS>) asm volatile("" : "+f"(y));
  if (kPackedStore<SS> || p.scale_kind != ScaleKind::kFloat) {
    e = ceil_log2_from_bits(s);
    s = pow2_from_bits(e);
    y = pow2_from_bits(-e);
  }

  constexpr uint32_t nan_word = R::kIsFp8 ? 0x7f7f7f7fu : 0u;  // fp8 NaN codes; int8 has none: 0
  const CodeWords<kWords / 2> codes =
      finite ? encode_words<T, R, kWords>(w, y) : CodeWords<kWords / 2>::filled(nan_word);
  if constexpr (kWords == 4) {  // the thread's 8 values are adjacent
    *reinterpret_cast<uint2*>(t.dst + chunk0) = make_uint2(codes.v[0], codes.v[1]);
  } else if constexpr (GS == kElemsPerThread) {  // one thread per group: the two halves are adjacent
    *reinterpret_cast<uint4*>(t.dst) = make_uint4(codes.v[0], codes.v[1], codes.v[2], codes.v[3]);
  } else {
    *reinterpret_cast<uint2*>(t.dst + chunk0) = make_uint2(codes.v[0], codes.v[1]);
    *reinterpret_cast<uint2*>(t.dst + chunk1) = make_uint2(codes.v[2], codes.v[3]);
  }

  if (lane == 0) {
    if constexpr (!kScaleOffsetGiven) s_offset = scale_byte_offset<SS>(p, t);
    uint8_t* const slot = static_cast<uint8_t*>(p.output_s) + s_offset;
    if (packed_scales<SS>(p)) {
      slot[t.g & 3] = finite ? static_cast<uint8_t>(e + 127) : kUE8M0NanByte;
      if (t.g == p.groups_per_row - 1) {
        for (int k = (t.g & 3) + 1; k < 4; ++k) slot[k] = 0;  // pad bytes of the last word
      }
      if constexpr (SS == ScaleStore::kPackedPadded) {
        // the last row's first group of a word zeroes the words below it (column-major: the next ones) up to
        // the column's stride ceil4(M), except in the last column, whose padding lies past vLLM's buffer
        if ((t.g & 3) == 0 && t.s_row == p.rows_per_outer - 1 && (t.g >> 2) < ((p.groups_per_row - 1) >> 2)) {
          const int64_t pad_rows = p.s_group_stride - p.rows_per_outer;  // <= 3 (make_packed_params)
          int32_t* const below = reinterpret_cast<int32_t*>(slot) + 1;
          for (int k = 0; k < 3; ++k) {
            if (k < pad_rows) below[k] = 0;
          }
        }
      }
    } else {
      *reinterpret_cast<float*>(slot) = finite ? s : __uint_as_float(kNanBits);
    }
  }
}

}  // namespace sgl_quant
