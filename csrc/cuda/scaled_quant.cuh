// Per-token and per-tensor 8-bit quantization (docs/spec.md §8.1).
//
// Work decomposition: a block per row. Its threads take the row's 8-element vectors round robin (vector
// t + k * blockDim.x, k < kScaledMaxVecs) and keep them in registers; the block reduces the row's amax
// (asymmetric int8: its min and max) with warp shuffles and one exchange through shared memory, then
// encodes the values it holds with the §8.1 form of the per-group code (encode_words<..., true>). Rows
// longer than a block's registers (H > 8 * kScaledMaxVecs * 1024) are read again for the codes.
// Rows whose start is 16-byte aligned move in 16-byte vectors (two with fused SiLU), other rows and the
// last partial vector element by element; codes are stored 8 at a time where their row allows it.
//
// Per-tensor: static calls are the same kernel with the caller's scale. Dynamic calls of more than one
// row run two kernels: tensor_amax_kernel, a grid of resident blocks, writes one amax per block into a
// workspace (every entry, so it needs no zeroing and no host round trip); the quantization kernel,
// launched with PDL so that it starts while the first one drains, waits for it, takes the max of those
// amaxes (the same in every block and in any order: deterministic) and quantizes its rows. One row is the
// per-token computation (the row's amax is the tensor's): one kernel.
#pragma once

#include "launch.cuh"

namespace sgl_quant {

constexpr int kScaledMaxVecs = 4;  // 8-element vectors a thread holds
constexpr int kScaledMaxThreads = 1024;

struct ScaledQuantArgs {
  // The parameters start at 0x210, in the 64-byte constant line of the driver's word at 0x208: its 48 bytes
  // hold everything a block reads before its row's loads, so that those wait for one line (static per
  // tensor, M = 1, H = 7168, PDL, H100: 1.67 -> 1.59 us).
  const void* input;
  const float* scale;        // kPerToken: scale_ub (null: none); kPerTensorStatic: the caller's scale
  int64_t num_rows;
  int64_t in_row_stride;     // in elements
  int32_t hidden;
  Granularity granularity;
  int32_t num_partials;
  float eps;
  // the next line: what the epilogue reads
  void* output_q;
  float* output_s;
  int32_t* output_azp;       // kPerTokenAsym
  uint32_t* partials;  // kPerTensorDynamic: the amax bits of each tensor_amax_kernel block (it writes them)
  int64_t q_row_stride;   // in codes
  int64_t s_row_stride;   // in elements of output_s / output_azp
};
static_assert(offsetof(ScaledQuantArgs, output_q) == 48, "the first 48 bytes: one constant line");

// The activation values v (docs/spec.md §1's plain or SiLU-and-mul front) of elements [e, e + 8) of a row as
// four packed pairs, zeros past the row's end: one 16-byte load (and one of `up`) where `vector` holds and
// the 8 elements are in the row, else element by element.
template <typename T, bool SILU>
__device__ __forceinline__ void load_values(const T* row, int hidden, int e, bool vector, uint32_t (&w)[4]) {
  if (vector && e + 8 <= hidden) {
    const uint4 g = load_input_vec(row + e);
    const uint32_t gw[4] = {g.x, g.y, g.z, g.w};
    uint32_t uw[4] = {};
    if constexpr (SILU) {
      const uint4 u = load_input_vec(row + hidden + e);
      uw[0] = u.x, uw[1] = u.y, uw[2] = u.z, uw[3] = u.w;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = SILU ? silu_and_mul_pair<T>(gw[i], uw[i]) : gw[i];
    return;
  }
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(row);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int a = e + 2 * i, b = a + 1;
    const uint32_t gate = (a < hidden ? bits[a] : 0u) | (b < hidden ? static_cast<uint32_t>(bits[b]) << 16 : 0u);
    if constexpr (SILU) {  // past the end: silu(0) * 0 = 0
      const uint32_t up = (a < hidden ? bits[hidden + a] : 0u) |
                          (b < hidden ? static_cast<uint32_t>(bits[hidden + b]) << 16 : 0u);
      w[i] = silu_and_mul_pair<T>(gate, up);
    } else {
      w[i] = gate;
    }
  }
}

// One pass over a row: this thread's vectors base + threadIdx.x + k * blockDim.x (k < kScaledMaxVecs) into w,
// zeros past the row's num_vecs vectors; every load is issued before any value is used.
template <typename T, bool SILU>
__device__ __forceinline__ void load_pass(const T* row, int hidden, int num_vecs, int base, bool vector,
                                          uint32_t (&w)[kScaledMaxVecs][4]) {
#pragma unroll
  for (int k = 0; k < kScaledMaxVecs; ++k) {
    const int v = base + threadIdx.x + k * blockDim.x;
    if (v < num_vecs) {
      load_values<T, SILU>(row, hidden, 8 * v, vector, w[k]);
    } else {
      w[k][0] = w[k][1] = w[k][2] = w[k][3] = 0;
    }
  }
}

// The block's max of `amax` and, with MIN_MAX, min of `lo` and max of `hi` (ordered keys): every thread gets
// them. `slot` (0 or 1) alternates between calls, so that a call's writes never meet the previous call's reads.
template <bool MIN_MAX>
__device__ __forceinline__ void block_reduce(uint32_t& amax, int32_t& lo, int32_t& hi, int slot) {
  __shared__ uint32_t amaxes[2][32];
  __shared__ int32_t los[2][32], his[2][32];
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if constexpr (MIN_MAX) {
      lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, o));
      hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, o));
    }
  }
  const int warps = (blockDim.x + 31) / 32;
  if (warps == 1) return;
  if (threadIdx.x % 32 == 0) {
    amaxes[slot][threadIdx.x / 32] = amax;
    if constexpr (MIN_MAX) los[slot][threadIdx.x / 32] = lo, his[slot][threadIdx.x / 32] = hi;
  }
  __syncthreads();
  for (int i = 0; i < warps; ++i) {
    amax = max(amax, amaxes[slot][i]);
    if constexpr (MIN_MAX) lo = min(lo, los[slot][i]), hi = max(hi, his[slot][i]);
  }
}

// One amax per block over rows blockIdx.x, blockIdx.x + gridDim.x, ... into args.partials[blockIdx.x] (fp32 bits).
template <typename T, bool SILU>
__global__ void __launch_bounds__(kScaledMaxThreads) tensor_amax_kernel(const ScaledQuantArgs args) {
  pdl_wait_for_producer();
  pdl_allow_dependents();  // the quantization kernel launches; it waits for our end before reading partials
  const int num_vecs = (args.hidden + 7) / 8;
  uint32_t amax = 0;
  // From the last row back, so that the rows read last, the quantization kernel's first ones, are still in L2
  // (H100, M = 4096: 15-19% faster than reading both kernels' rows in the same order; M = 16384: 3-6%).
  for (int64_t k = blockIdx.x; k < args.num_rows; k += gridDim.x) {
    const T* row = static_cast<const T*>(args.input) + (args.num_rows - 1 - k) * args.in_row_stride;
    const bool vector = reinterpret_cast<uintptr_t>(row) % 16 == 0 && (!SILU || args.hidden % 8 == 0);
    for (int base = 0; base < num_vecs; base += blockDim.x * kScaledMaxVecs) {
      uint32_t w[kScaledMaxVecs][4];
      load_pass<T, SILU>(row, args.hidden, num_vecs, base, vector, w);
#pragma unroll
      for (int k = 0; k < kScaledMaxVecs; ++k) amax = max(amax, abs_max_bits<T, 4>(w[k]));
    }
  }
  int32_t unused_lo = 0, unused_hi = 0;
  block_reduce<false>(amax, unused_lo, unused_hi, 0);
  if (threadIdx.x == 0) args.partials[blockIdx.x] = amax;
}

// docs/spec.md §8.1 for rows blockIdx.x, blockIdx.x + gridDim.x, ... (a grid of one block per row, except
// dynamic per-tensor calls: resident blocks).
template <typename T, typename R, bool SILU>
__global__ void __launch_bounds__(kScaledMaxThreads) scaled_quant_kernel(const ScaledQuantArgs args) {
  const Granularity granularity = args.granularity;
  const bool per_token = granularity == Granularity::kPerToken || granularity == Granularity::kPerTokenAsym;
  const bool asym = granularity == Granularity::kPerTokenAsym;
  const int num_vecs = (args.hidden + 7) / 8;
  const int per_pass = blockDim.x * kScaledMaxVecs;
  int slot = 0;  // block_reduce's buffer

  pdl_wait_for_producer();
  pdl_allow_dependents();
  // Dynamic per tensor: the scale from the max of the amax kernel's partial maxima, once per block.
  float s = 0.0f, y = 0.0f;
  bool finite = true;
  // Static: the scale's load is issued here, in flight with the row's loads; its division comes after them
  // (dividing first put the scale's latency before the row's loads: M=1, H=4096 1.49 us with PDL, v2 0.76).
  if (granularity == Granularity::kPerTensorStatic) s = *args.scale;
  if (granularity == Granularity::kPerTensorDynamic) {
    uint32_t amax = 0;
    for (int i = threadIdx.x; i < args.num_partials; i += blockDim.x) amax = max(amax, args.partials[i]);
    int32_t unused_lo = 0, unused_hi = 0;
    block_reduce<false>(amax, unused_lo, unused_hi, slot);
    slot ^= 1;
    finite = amax < kNonFiniteBits;
    s = symmetric_scale(__uint_as_float(amax), __uint_as_float(kNonFiniteBits), args.eps, R::kMax);
    y = ieee_div(1.0f, s);
    if (blockIdx.x == 0 && threadIdx.x == 0) *args.output_s = finite ? s : __uint_as_float(kNanBits);
  }

  for (int64_t r = blockIdx.x; r < args.num_rows; r += gridDim.x) {
    const T* row = static_cast<const T*>(args.input) + r * args.in_row_stride;
    uint8_t* const codes = static_cast<uint8_t*>(args.output_q) + r * args.q_row_stride;
    const bool vector = reinterpret_cast<uintptr_t>(row) % 16 == 0 && (!SILU || args.hidden % 8 == 0);
    const bool vector_codes = reinterpret_cast<uintptr_t>(codes) % 8 == 0;
    uint32_t w[kScaledMaxVecs][4];
    int32_t zp = 0;
    if (per_token) {
      uint32_t amax = 0;
      int32_t lo = INT32_MAX, hi = INT32_MIN;  // ordered keys
      for (int base = 0; base < num_vecs; base += per_pass) {
        load_pass<T, SILU>(row, args.hidden, num_vecs, base, vector, w);
#pragma unroll
        for (int k = 0; k < kScaledMaxVecs; ++k) {
          amax = max(amax, abs_max_bits<T, 4>(w[k]));
          if (asym) {  // over the row's elements only (the zeros past its end are not values)
            const int e = 8 * (base + threadIdx.x + k * blockDim.x);
#pragma unroll
            for (int i = 0; i < 8; ++i) {
              const float2 f = Pack2<T>::to_float2(w[k][i / 2]);
              const int32_t key = ordered_key(i % 2 ? f.y : f.x);
              if (e + i < args.hidden) lo = min(lo, key), hi = max(hi, key);
            }
          }
        }
      }
      if (asym) {
        block_reduce<true>(amax, lo, hi, slot);
      } else {
        block_reduce<false>(amax, lo, hi, slot);
      }
      slot ^= 1;
      finite = amax < kNonFiniteBits;
      if (asym) {
        s = asymmetric_scale(from_ordered_key(lo), from_ordered_key(hi), args.eps);
        y = ieee_div(1.0f, s);
        zp = finite ? asymmetric_zero_point(from_ordered_key(lo), y) : 0;
      } else {
        const float ub = args.scale != nullptr ? *args.scale : __uint_as_float(kNonFiniteBits);
        s = symmetric_scale(__uint_as_float(amax), ub, args.eps, R::kMax);
        y = ieee_div(1.0f, s);
      }
      if (threadIdx.x == 0) {
        args.output_s[r * args.s_row_stride] = finite ? s : __uint_as_float(kNanBits);
        if (asym) args.output_azp[r * args.s_row_stride] = zp;
      }
    }

    constexpr uint32_t nan_word = R::kIsFp8 ? 0x7f7f7f7fu : 0u;  // fp8 NaN codes; int8 has none: 0
    for (int base = 0; base < num_vecs; base += per_pass) {
      if (!per_token || num_vecs > per_pass) {  // else the registers hold the row
        load_pass<T, SILU>(row, args.hidden, num_vecs, base, vector, w);
      }
      if (granularity == Granularity::kPerTensorStatic) {
        finite = usable_static_scale(s);
        y = ieee_div(1.0f, s);
      }
#pragma unroll
      for (int k = 0; k < kScaledMaxVecs; ++k) {
        const int v = base + threadIdx.x + k * blockDim.x;
        if (v >= num_vecs) continue;
        // int8: asymmetric codes add the zero point, symmetric ones are one conversion. (fp8 kernels compile no
        // such branch: with it they took 58 registers instead of 56, one block fewer per SM, and per-token calls
        // of M = 4096 and 16384 were up to 6% slower; H100.)
        constexpr bool kInt8 = !R::kIsFp8;
        CodeWords<2> c = CodeWords<2>::filled(nan_word);
        if (finite && kInt8 && asym) {
          c = encode_words<T, R, 4, true, kInt8>(w[k], y, zp);
        } else if (finite) {
          c = encode_words<T, R, 4, true>(w[k], y);
        }
        const int e = 8 * v;
        if (vector_codes && e + 8 <= args.hidden) {
          *reinterpret_cast<uint2*>(codes + e) = make_uint2(c.v[0], c.v[1]);
        } else {
          for (int i = 0; i < 8 && e + i < args.hidden; ++i) codes[e + i] = static_cast<uint8_t>(c.v[i / 4] >> (8 * (i % 4)));
        }
      }
    }
  }
}

// Threads per block for rows of `hidden` elements: calls of fewer rows than two per SM spread a row over
// more threads (two vectors each), for its latency; larger calls give each thread kScaledMaxVecs vectors,
// so that more rows are resident per SM and the block reduction is shorter per byte.
inline int scaled_quant_threads(int hidden, int64_t num_rows, int num_sms) {
  const int num_vecs = (hidden + 7) / 8;
  const int per_thread = num_rows < 2 * static_cast<int64_t>(num_sms) ? 2 : kScaledMaxVecs;
  int threads = ((num_vecs + per_thread - 1) / per_thread + 31) / 32 * 32;
  return threads < 32 ? 32 : (threads > kScaledMaxThreads ? kScaledMaxThreads : threads);
}

inline ScaledQuantArgs scaled_quant_args(const ScaledQuantParams& p) {
  ScaledQuantArgs a = {};
  a.input = p.input;
  a.output_q = p.output_q;
  a.output_s = p.output_s;
  a.output_azp = p.output_azp;
  a.scale = p.granularity == Granularity::kPerTensorStatic ? p.static_scale : p.scale_ub;
  a.num_rows = p.num_rows;
  a.in_row_stride = p.in_row_stride;
  a.q_row_stride = p.q_row_stride;
  a.s_row_stride = p.s_row_stride;
  a.hidden = p.hidden;
  a.eps = p.eps;
  a.granularity = p.granularity;
  return a;
}

// The workspace a call needs (uint32 entries): one per tensor_amax_kernel block for dynamic per-tensor calls
// of more than one row (a grid of resident blocks), else 0.
template <typename T, bool SILU>
cudaError_t scaled_quant_workspace(const ScaledQuantParams& p, const LaunchOptions& opt, int& entries) {
  entries = 0;
  if (p.granularity != Granularity::kPerTensorDynamic || p.num_rows <= 1) return cudaSuccess;
  int64_t grid = 0;
  const int threads = scaled_quant_threads(p.hidden, p.num_rows, opt.num_sms);
  const cudaError_t err = capped_grid<tensor_amax_kernel<T, SILU>>(p.num_rows, threads, 0, 1, opt, grid);
  entries = static_cast<int>(grid);
  return err;
}

// Launches the call on opt.stream; `partials`: scaled_quant_workspace's entries.
template <typename T, typename R, bool SILU>
cudaError_t launch_scaled_quant(const ScaledQuantParams& p, uint32_t* partials, int num_partials,
                                const LaunchOptions& requested) {
  constexpr auto kernel = scaled_quant_kernel<T, R, SILU>;
  const LaunchOptions opt = options_for<kernel>(requested);
  ScaledQuantArgs args = scaled_quant_args(p);
  const int threads = scaled_quant_threads(p.hidden, p.num_rows, opt.num_sms);
  constexpr int64_t kMaxGrid = 0x7fffffff;  // rows beyond it: the blocks loop
  int64_t grid = p.num_rows < kMaxGrid ? p.num_rows : kMaxGrid;
  if (args.granularity == Granularity::kPerTensorDynamic) {
    if (p.num_rows == 1) {  // the row's amax is the tensor's: the per-token computation, one kernel
      args.granularity = Granularity::kPerToken;
      args.scale = nullptr;
    } else {
      args.partials = partials;
      args.num_partials = num_partials;
      const cudaError_t err = launch_kernel(tensor_amax_kernel<T, SILU>, num_partials, threads, 0, opt, args);
      if (err != cudaSuccess) return err;
      LaunchOptions chained = opt;
      chained.pdl = opt.clusters;  // SM90 code: the second kernel may launch before the first ends
      const cudaError_t e2 = capped_grid<kernel>(p.num_rows, threads, 0, 1, chained, grid);
      if (e2 != cudaSuccess) return e2;
      return launch_kernel(kernel, grid, threads, 0, chained, args);
    }
  }
  return launch_kernel(kernel, grid, threads, 0, opt, args);
}

// Every variant: {bf16, fp16} x {fp8, int8} x {plain, fused SiLU}.
#define SGLQ_FOR_EACH_SCALED_VARIANT(X) \
  X(__nv_bfloat16, Fp8Range, false)     \
  X(__nv_bfloat16, Fp8Range, true)      \
  X(__nv_bfloat16, Int8Range, false)    \
  X(__nv_bfloat16, Int8Range, true)     \
  X(__half, Fp8Range, false)            \
  X(__half, Fp8Range, true)             \
  X(__half, Int8Range, false)           \
  X(__half, Int8Range, true)

}  // namespace sgl_quant
