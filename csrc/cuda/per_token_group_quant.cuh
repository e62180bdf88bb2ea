// The per-token-group 8-bit quantization kernel family (SPEC §1-§3): v2 in every layout,
// fused SiLU-and-mul, masked MoE layout, and the DeepSeek-V4 fp8_einsum layout (which is the
// same computation with UE8M0-rounded fp32 scales written through strides).
//
// Work decomposition: a "task" is one group of one row. Each task is handled by a sub-warp of
// GS/16 threads; every thread holds 16 input elements, 8 from each half of the group (two 16-byte
// loads; four with fused SiLU), so that each load instruction of a warp reads whole 32-byte sectors.
// The sub-warp reduces |v| with shuffles and each thread stores its codes as two 8-byte halves.
// Dense calls: one task per sub-warp, a block per groups_per_block tasks of the flattened task list
// (no grid-stride loop); a block locates its task before the PDL wait (small calls are
// latency-bound). Dense calls with column-major scales order the tasks rows-first, so that the
// scales a warp writes are adjacent (KernelArgs::rows_first_log2; packed UE8M0 by scale words,
// kTaskColumnLog2). Masked calls: blocks walk the task
// list with a grid-stride loop over a grid sized to the machine. Dense calls of at most 8 rows (no
// fused SiLU) run small_call_quant_kernel instead: GS/8 threads of 8 values per group, compact parameters.
// Launches without PDL of one row index (dense) or of at most 32 experts (masked) run the same work in
// kernels that find their first task's arguments in the parameters' first constant line
// (dense_no_pdl_kernel, masked_no_pdl_kernel).
// Masked (MoE) layout, a kernel of its own: only valid rows become tasks, so the work is spread
// evenly whatever the counts and padded rows cost nothing. The prefix sum of the clamped per-expert
// counts is computed on the device by every warp with shuffles (<= 32 experts; from a read of the
// counts before the PDL wait, checked after it) or by every block in shared memory.
#pragma once

#include <atomic>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "../quant_params.h"

namespace sgl_quant {

constexpr int kElemsPerThread = 16;     // 32 bytes of 16-bit input, 16 bytes of 8-bit codes
constexpr int kMaxBlockThreads = 512;
constexpr int kWarpScanMaxExperts = 32;  // masked layouts with more experts use a shared-memory prefix sum

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
  // T(a * b) per pair, rounded once, as the fp32 multiply of --use_fast_math would give it: subnormal b
  // counts as a zero of its sign (FTZ). `a` is T(silu), never subnormal: silu's fp32 result is
  // flushed, and a normal fp32 value rounds to a normal bf16. A subnormal product (the fp32 multiply
  // would give 0) changes nothing downstream: it is below eps in the amax and flushed when scaled.
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
  // T(a * b) per pair, rounded once. fp16 values are normal fp32 numbers and so are their products:
  // nothing to flush.
  static __device__ __forceinline__ uint32_t mul_ftz(uint32_t a, uint32_t b) {
    uint32_t r;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(0x80008000u));
    return r;
  }
};

// silu(z) = z / (1 + exp(-z)), written exactly as the reference kernel computes it under
// --use_fast_math, so that the rounded activations match bit for bit. On sm_100+ the reference
// uses the hardware tanh form, so a Blackwell build does the same.
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

// v = T(T(silu(gate)) * up) for one pair. The reference multiplies in fp32 (under --use_fast_math),
// where the product of two 16-bit floats is exact, then rounds once to T; a paired 16-bit fma with
// -0 gives the same bits in one instruction (instead of unpacking both, two multiplies and a pack),
// once `up` is flushed as the fp32 multiply flushes it (Pack2::mul_ftz).
template <typename T>
__device__ __forceinline__ uint32_t silu_and_mul_pair(uint32_t gate, uint32_t up) {
  const float2 g = Pack2<T>::to_float2(gate);
  return Pack2<T>::mul_ftz(Pack2<T>::from_float2(make_float2(silu(g.x), silu(g.y))), up);
}

// n / d for 0 <= n < 2^31 with one multiply-high, an add and a shift; the divisor is fixed per
// launch, so the host computes the magic number once (round-up method, exact for n < 2^31).
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
  // The divisor of a magic number and shift held elsewhere (the no-PDL kernels' packed heads).
  static __device__ __forceinline__ FastDivmod of(uint32_t multiplier, uint32_t shift) {
    FastDivmod d;
    d.multiplier = multiplier;
    d.shift = shift;
    return d;
  }
};

// Dense launches with packed UE8M0 scales (without fused SiLU) take a row's tasks by columns of four
// groups, the groups whose exponents share a 32-bit scale word (log2 of the groups per column: 2; every
// other launch: 0), so that rows first (KernelArgs::rows_first_log2) a warp writes whole words and a
// block adjacent ones. Before, a warp wrote one word and each 32-byte sector of words took stores from
// 8 blocks. Probe, H200, session 19 (benchmark/NOTES.md), µs without / with PDL: M=64 H=4096 1.761 /
// 1.022 -> 1.615 / 0.996, M=64 H=7168 1.838 / 1.129 -> 1.728 / 1.063, M=256 H=7168 2.423 / 1.653 ->
// 2.325 / 1.632, M=4096 H=7168 22.69 / 21.76 -> 22.62 / 21.66. Not with fused SiLU: there the same
// order was slower (dense over 4303 rows 9.60 / 8.76 -> 9.73 / 8.84), and not for masked launches
// (8 x 512 without PDL 4.67 -> 4.82, in units of 8 valid rows).
template <ScaleKind SK, bool SILU, bool MASKED>
constexpr int kTaskColumnLog2 = !MASKED && !SILU && SK == ScaleKind::kPackedUE8M0 ? 2 : 0;

// What one launch needs besides the problem: divisors for the task -> (row, group) mapping.
struct KernelArgs {
  QuantParams p;
  FastDivmod task_columns;  // a row's columns of tasks: its groups, or its scale words (kTaskColumnLog2)
  FastDivmod rows_per_outer;
  int32_t num_tasks;  // dense: all groups (rows rounded up when rows_first_log2 > 0); masked: from the counts
  int32_t num_rows;   // dense: rows over all (outer, row) pairs
  // Dense task order. 0: a warp's sub-warps take consecutive groups of one row. k > 0 (column-major
  // scales): the tasks run through 2^k consecutive rows of one column (a group; packed UE8M0: the
  // four groups of a scale word) before the next column, so that a warp's scales are adjacent (one
  // store instruction) and a block's fill whole sectors; otherwise each 4-byte scale (word) is a store
  // to its own sector, and the sectors written piecewise from many SMs at once cost M=4096, H=4096 8%
  // (probe, fp32 scales).
  int32_t rows_first_log2;
  // Launched with programmatic dependent launch: the kernel may start before the previous one ends.
  // Without it, data read before pdl_wait_for_producer() is final already (masked counts: one read).
  int32_t pdl;
  // Masked, <= 32 experts: the grid fills whole rounds of resident blocks (the launcher capped it), so
  // its blocks let the next kernel launch from their start instead of after their PDL wait (see there).
  int32_t trigger_at_start;
};

// Loads of data a previous kernel may write (input, weight, the counts after the PDL wait) are coherent
// ld.global, never the read-only path (ld.global.nc, __ldg): under PDL the kernel runs while its
// producer still writes, so that data is not read-only for the kernel's lifetime, and ptxas moves .nc
// loads above griddepcontrol.wait (it did in a build with launch_dependents at the kernel's top: the
// dense input loads came before the wait; benchmark/NOTES.md session 18). make kernel-resources checks
// the SASS of every kernel for .nc loads (scripts/ci/check_kernel_resources.py).
__device__ __forceinline__ uint4 load_input_vec(const void* ptr) { return *static_cast<const uint4*>(ptr); }

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

// The probes (scripts/probe/) build the kernels with SGLQ_PROBE_PHASES: thread 0 of block 0 then records
// %globaltimer at the kernel's phases (`dep`: a value the phase waits for). Empty otherwise. Blocks are
// numbered linearly (x fastest): the fused op's clustered launches have a 2-D grid.
#ifdef SGLQ_PROBE_PHASES
__device__ unsigned long long g_probe_phases[8];
#define SGLQ_PROBE_PHASE(i, dep)                                                        \
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {                         \
    unsigned long long t_;                                                              \
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_) : "f"(dep) : "memory");        \
    g_probe_phases[i] = t_;                                                             \
  }
// ... and thread 0 of every block its start (i = 0) and end (i = 1), for the spread of block starts.
constexpr int kProbeMaxBlocks = 16384;
__device__ unsigned long long g_probe_blocks[2 * kProbeMaxBlocks];
#define SGLQ_PROBE_BLOCK(i)                                                             \
  if (const unsigned b_ = blockIdx.x + blockIdx.y * gridDim.x; threadIdx.x == 0 && b_ < kProbeMaxBlocks) { \
    unsigned long long t_;                                                              \
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_)::"memory");                    \
    g_probe_blocks[2 * b_ + (i)] = t_;                                                  \
  }
#else
#define SGLQ_PROBE_PHASE(i, dep)
#define SGLQ_PROBE_BLOCK(i)
#endif

// Codes for 2N values (N packed words: N = 8 for a thread's 16 values, 4 for the small-call kernel's 8) with
// quantization multiplier y, saturated to [MIN, MAX]: N/2 words of four codes. Returned by value and
// selected by value against the NaN words (quantize_words), as the uint4 of before: ptxas then gives the
// 16-value kernels the code of before (an if/else rescheduled them; session 21).
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

template <typename T, typename R, int N>
__device__ __forceinline__ CodeWords<N / 2> encode_words(const uint32_t (&w)[N], float y) {
  CodeWords<N / 2> codes;
  uint32_t* out = codes.v;
#pragma unroll
  for (int j = 0; j < N; j += 2) {
    uint32_t lohi[2];
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      float2 f = Pack2<T>::to_float2(w[j + k]);
      f.x *= y;
      f.y *= y;
      if constexpr (R::kIsFp8) {
        // Round to nearest even, saturating: the same codes as clamping to [-448, 448] first, as the
        // reference does (|f| <= 448 converts alike; anything above rounds or saturates to 448), in
        // two instructions per value fewer. f is finite here: non-finite groups never get encoded.
        lohi[k] = __nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, __NV_E4M3);
      } else {
        f.x = fminf(fmaxf(f.x, R::kMin), R::kMax);
        f.y = fminf(fmaxf(f.y, R::kMin), R::kMax);
        // int8: C++ float-to-int conversion truncates toward zero, like the reference kernel
        lohi[k] = (static_cast<uint32_t>(static_cast<uint8_t>(__float2int_rz(f.x)))) |
                  (static_cast<uint32_t>(static_cast<uint8_t>(__float2int_rz(f.y))) << 8);
      }
    }
    out[j / 2] = lohi[0] | (lohi[1] << 16);
  }
  return codes;
}

// ---------------------------------------------------------------------------------------------
// Block-wide prefix sum of the per-expert valid row counts, clamped to [0, rows_per_outer]:
// prefix[e] = rows of experts < e, prefix[E] = all valid rows. Needs (E + 1 + 32) ints of smem.
__device__ __forceinline__ void masked_row_prefix(const QuantParams& p, int* prefix, int* warp_sums) {
  const int num_experts = static_cast<int>(p.num_outer);
  const int rows = static_cast<int>(p.rows_per_outer);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, num_warps = blockDim.x >> 5;
  int carry = 0;
  for (int base = 0; base < num_experts; base += blockDim.x) {
    const int e = base + threadIdx.x;
    int v = e < num_experts ? min(max(p.masked_m[e], 0), rows) : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {  // inclusive scan within the warp
      const int n = __shfl_up_sync(0xffffffffu, v, o);
      if (lane >= o) v += n;
    }
    if (lane == 31) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {  // scan of the warp totals
      int w = lane < num_warps ? warp_sums[lane] : 0;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int n = __shfl_up_sync(0xffffffffu, w, o);
        if (lane >= o) w += n;
      }
      if (lane < num_warps) warp_sums[lane] = w;
    }
    __syncthreads();
    if (e < num_experts) prefix[e + 1] = carry + (warp > 0 ? warp_sums[warp - 1] : 0) + v;
    carry += warp_sums[num_warps - 1];
    __syncthreads();  // warp_sums is reused by the next chunk
  }
  if (threadIdx.x == 0) prefix[0] = 0;
  __syncthreads();
}

// Dynamic shared memory the kernel needs (masked layout with more than 32 experts only).
inline size_t masked_smem_bytes(const QuantParams& p) {
  if (p.masked_m == nullptr || p.num_outer <= kWarpScanMaxExperts) return 0;
  return static_cast<size_t>(p.num_outer + 1 + 32) * sizeof(int);
}

// Where one task (group g of row (outer, row)) reads and writes.
template <typename T>
struct Task {
  const T* src;     // first input element of the group (of the gate half with fused SiLU)
  uint8_t* dst;     // first code of the group
  int64_t s_row;    // scale offset of the row, in elements of output_s (int32 words when packed)
  int g;            // group index within the row
};

template <typename T, int GS>
__device__ __forceinline__ Task<T> locate_task(const QuantParams& p, int outer, int row, int g) {
  Task<T> t;
  t.src = static_cast<const T*>(p.input) + outer * p.in_outer_stride + row * p.in_row_stride + g * GS;
  t.dst = static_cast<uint8_t*>(p.output_q) + (outer * p.rows_per_outer + row) * p.hidden + g * GS;
  t.s_row = outer * p.s_outer_stride + row * p.s_row_stride;
  t.g = g;
  return t;
}

// Dense layout: task -> (outer, row, g) by magic-number divisions, as straight-line code: without
// PDL this index math is the whole latency before the first load, and every instruction and branch
// on its path counts (probe, H200, M=1 H=4096 without PDL: 1.45 us with a branch per task order and
// a clamp of padding tasks, 1.40 without; benchmark/NOTES.md session 7). Row order is rows-first
// order with 2^0 rows per unit. Rows-first order (see KernelArgs) pads the rows to whole units:
// tasks of padding rows, like tasks past the end, come back with valid = false and an address that
// is never dereferenced (an invalid task reads and writes nothing).
// Packed UE8M0 scales (kTaskColumnLog2 = 2): a task column is the four groups of a scale word, the low
// two bits of the task its group in the column; a row's last column may hold padding groups (invalid).
// The row index and group of dense task `task` in the launch's task order (KernelArgs::rows_first_log2,
// kTaskColumnLog2); `valid` becomes false for padding tasks. `order` gives the launch's rows_first_log2(),
// columns() (the divisor by a row's task columns), groups_per_row() and num_rows(): KernelArgsOrder or
// DenseHead (read where used, as the kernels were measured).
struct RowGroup {
  int row_index, g;
};
template <ScaleKind SK, bool SILU, typename Order>
__device__ __forceinline__ RowGroup dense_row_group(const Order& order, int task, bool& valid) {
  constexpr int c = kTaskColumnLog2<SK, SILU, false>;
  const int k = order.rows_first_log2();
  const int column_task = task >> c;   // the task's (row, column)
  const int unit = column_task >> k;   // (block of 2^k rows, column)
  const int row_block = order.columns().div(unit);
  const int columns = (order.groups_per_row() + (1 << c) - 1) >> c;
  const int g = ((unit - row_block * columns) << c) + (task & ((1 << c) - 1));
  const int row_index = (row_block << k) + (column_task & ((1 << k) - 1));
  valid = valid && row_index < order.num_rows() && (c == 0 || g < order.groups_per_row());
  return {row_index, g};
}

struct KernelArgsOrder {
  const KernelArgs& args;
  __device__ __forceinline__ int rows_first_log2() const { return args.rows_first_log2; }
  __device__ __forceinline__ const FastDivmod& columns() const { return args.task_columns; }
  __device__ __forceinline__ int groups_per_row() const { return args.p.groups_per_row; }
  __device__ __forceinline__ int num_rows() const { return args.num_rows; }
};

template <typename T, int GS, ScaleKind SK, bool SILU, bool kSplitOuter>
__device__ __forceinline__ Task<T> locate_dense_task_split(const KernelArgs& args, int task, bool& valid) {
  const QuantParams& p = args.p;
  const RowGroup rg = dense_row_group<SK, SILU>(KernelArgsOrder{args}, task, valid);
  const int row_index = rg.row_index, g = rg.g;
  const int outer = kSplitOuter ? args.rows_per_outer.div(row_index) : 0;
  const int row = row_index - outer * static_cast<int>(p.rows_per_outer);
  Task<T> t;  // locate_task's addresses; the codes' row is row_index itself
  t.src = static_cast<const T*>(p.input) + outer * p.in_outer_stride + row * p.in_row_stride + g * GS;
  t.dst = static_cast<uint8_t*>(p.output_q) + static_cast<int64_t>(row_index) * p.hidden + g * GS;
  t.s_row = outer * p.s_outer_stride + row * p.s_row_stride;
  t.g = g;
  return t;
}

// The second division (row index -> (outer, row)) only where the launcher could not fold the rows
// into one index (num_outer > 1: strided batches, DSV4 with T > 1); one uniform branch.
template <typename T, int GS, ScaleKind SK, bool SILU>
__device__ __forceinline__ Task<T> locate_dense_task(const KernelArgs& args, int task, bool& valid) {
  return args.p.num_outer == 1 ? locate_dense_task_split<T, GS, SK, SILU, false>(args, task, valid)
                               : locate_dense_task_split<T, GS, SK, SILU, true>(args, task, valid);
}

// pdl_wait_for_producer, ordered after the computation of `t`. The wait has only a memory effect,
// so ptxas moved it to the top of the kernel once the index math before it had no branches, and the
// math then ran after the producer's end instead of overlapping it (probe, H200, PDL: M=64 H=7168
// 1.08 -> 1.26 us). Predicated on t.src != 0 (always true: an input pointer plus an offset), the
// wait depends on the address and stays after it.
template <typename T>
__device__ __forceinline__ void pdl_wait_for_producer_after(const Task<T>& t) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("{\n .reg .pred ready;\n setp.ne.u64 ready, %0, 0;\n @ready griddepcontrol.wait;\n}" ::"l"(t.src)
               : "memory");
#endif
}
// The same after two addresses (the fused op's vectors of x and of the residual): the predicate reads
// both, `a != 0 || b != 1`, always true (`a` is an input pointer plus an offset, `b` an even address).
__device__ __forceinline__ void pdl_wait_for_producer_after(const void* a, const void* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("{\n .reg .pred p, q;\n setp.ne.u64 p, %0, 0;\n setp.ne.u64 q, %1, 1;\n or.pred p, p, q;\n"
               " @p griddepcontrol.wait;\n}" ::"l"(a), "l"(b)
               : "memory");
#endif
}

// Masked layout: valid row `row_index` belongs to the largest expert e with prefix[e] <= row_index.
template <typename T, int GS>
__device__ __forceinline__ Task<T> locate_masked_task(const KernelArgs& args, const int* prefix, int task) {
  const QuantParams& p = args.p;
  const int row_index = args.task_columns.div(task);
  const int g = task - row_index * p.groups_per_row;
  int lo = 0, hi = static_cast<int>(p.num_outer) - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (prefix[mid] <= row_index) lo = mid; else hi = mid - 1;
  }
  return locate_task<T, GS>(p, lo, row_index - prefix[lo], g);
}

// Masked layout, at most 32 experts: every warp reads the counts itself, lane e the clamped count of
// expert e. kBeforeWait: a read before the PDL wait goes to L2 and leaves no line in L1, where the
// read after the wait (through L1, shared by the SM's warps) could find a stale one.
template <bool kBeforeWait>
__device__ __forceinline__ int warp_masked_count(const QuantParams& p) {
  const int lane = threadIdx.x & 31;
  if (lane >= p.num_outer) return 0;
  const int count = kBeforeWait ? __ldcg(p.masked_m + lane) : p.masked_m[lane];
  return min(max(count, 0), static_cast<int>(p.rows_per_outer));
}

// Sum over the 32 lanes, returned to all of them.
__device__ __forceinline__ int warp_sum(int v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __reduce_add_sync(0xffffffffu, v);  // one instruction
#else
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
#endif
}

// Exclusive prefix sum of the counts over the lanes: lane e gets the valid rows of experts < e. Only
// as many shuffle steps as the experts need, but the first kStepsAlways steps without a test between
// them (a step of distance o >= num_experts leaves the lanes below num_experts as they are). All 32
// lanes must call it.
template <int kStepsAlways = 0>
__device__ __forceinline__ int warp_exclusive_prefix(int count, int num_experts) {
  const int lane = threadIdx.x & 31;
  int inclusive = count;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    if (o >= (1 << kStepsAlways) && o >= num_experts) break;  // uniform over the warp
    const int n = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += n;
  }
  return inclusive - count;
}

// The same lookup as locate_masked_task with the prefix held by the warp's lanes (`exclusive` from
// warp_exclusive_prefix): the largest expert e with exclusive[e] <= row_index, which is the number
// of experts with exclusive[e] <= row_index, minus one (the starts do not decrease): one ballot per
// distinct row among the warp's tasks. All 32 lanes must call it (shuffles, ballots).
// The expert (outer index) of valid row `row_index`; it starts at that lane's `exclusive`.
__device__ __forceinline__ int masked_expert_of_row(int exclusive, int64_t num_experts, int row_index) {
  const int lane = threadIdx.x & 31;
  const bool is_expert = lane < num_experts;
  int expert = 0;
  for (unsigned pending = 0xffffffffu; pending != 0;) {  // one round per distinct row in the warp (usually one)
    const int r = __shfl_sync(0xffffffffu, row_index, __ffs(pending) - 1);
    const unsigned starts_at_or_before = __ballot_sync(0xffffffffu, is_expert && exclusive <= r);
    if (row_index == r) expert = __popc(starts_at_or_before) - 1;
    pending &= ~__ballot_sync(0xffffffffu, row_index == r);
  }
  return expert;
}

// masked_expert_of_row for a warp whose lanes all hold the same row_index: one vote for the expert
// and, beside it, one reduction for its start (the largest start at or before the row, as the starts
// do not decrease); no shuffle of the row, no loop, no shuffle of the start after the vote.
struct ExpertStart {
  int expert, start;
};
__device__ __forceinline__ ExpertStart masked_expert_of_warp_row(int exclusive, int num_experts, int row_index) {
  const bool at_or_before = (threadIdx.x & 31) < num_experts && exclusive <= row_index;
  const int expert = __popc(__ballot_sync(0xffffffffu, at_or_before)) - 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return {expert, __reduce_max_sync(0xffffffffu, at_or_before ? exclusive : 0)};
#else
  return {expert, __shfl_sync(0xffffffffu, exclusive, expert)};
#endif
}

template <typename T, int GS>
__device__ __forceinline__ Task<T> locate_masked_task_in_warp(const KernelArgs& args, int exclusive, int task) {
  const QuantParams& p = args.p;
  const int row_index = args.task_columns.div(task);
  const int g = task - row_index * p.groups_per_row;
  const int expert = masked_expert_of_row(exclusive, p.num_outer, row_index);
  return locate_task<T, GS>(p, expert, row_index - __shfl_sync(0xffffffffu, exclusive, expert), g);
}

// One thread's input words of a task: two 16-byte chunks of the group, [lane * 8, +8) and
// [GS / 2 + lane * 8, +8), so that each load instruction of a warp reads whole 32-byte sectors; with
// fused SiLU the same chunks of the gate half (v[0], v[1]) and of the up half (v[2], v[3]).
template <bool SILU>
struct TaskInput {
  uint4 v[SILU ? 4 : 2];
};

// hidden: H, the offset of the up half with fused SiLU.
template <typename T, int GS, bool SILU>
__device__ __forceinline__ TaskInput<SILU> load_task_input(int hidden, const Task<T>& t, int lane, bool valid) {
  TaskInput<SILU> in = {};  // zeros for an invalid task (never used; left undefined, ptxas spilled)
  if (!valid) return in;
  const int chunk0 = lane * 8, chunk1 = GS / 2 + lane * 8;
  in.v[0] = load_input_vec(t.src + chunk0);
  in.v[1] = load_input_vec(t.src + chunk1);
  if constexpr (SILU) {
    in.v[2] = load_input_vec(t.src + hidden + chunk0);
    in.v[3] = load_input_vec(t.src + hidden + chunk1);
  }
  return in;
}

// Where a task's scale goes in output_s, in bytes (quantize_words): its group's float, or with packed UE8M0
// the int32 word that holds its group's byte (at byte t.g % 4).
template <ScaleKind SK, typename T, typename Params>
__device__ __forceinline__ int64_t scale_byte_offset(const Params& p, const Task<T>& t) {
  return 4 * (t.s_row + (SK == ScaleKind::kPackedUE8M0 ? t.g >> 2 : t.g) * p.s_group_stride);
}

// SPEC §1 for one group, with the GS/16 threads of a sub-warp (lane = this thread's index in it):
// w holds this thread's 16 activation values, elements [lane * 8, +8) of the group in w[0..3] and
// [GS / 2 + lane * 8, +8) in w[4..7]. Codes go to t.dst, the scale to output_s at (t.s_row, t.g). Every
// op's codes and scales come from here. Every thread of the warp must call it (shuffles); threads
// of an invalid task only take part in them.
// kWords = 4 (small_call_quant_kernel): GS/8 threads per group, each with the 8 values [lane * 8, +8).
// Params: QuantParams, or any arguments with its fields output_s, s_group_stride, groups_per_row and eps
// (the fused op's kernel arguments, read from their own constant line).
// kScaleOffsetGiven: the caller passes scale_byte_offset<SK>(p, t) as `s_offset`, computed where it costs
// less (the fused kernel: while its row's loads are in flight); otherwise it is computed here.
template <typename T, typename R, int GS, ScaleKind SK, int kWords = 8, bool kScaleOffsetGiven = false, typename Params>
__device__ __forceinline__ void quantize_words(const Params& p, const Task<T>& t, int lane, bool valid,
                                               const uint32_t (&w)[kWords], int64_t s_offset = 0) {
  static_assert(kWords == 8 || kWords == 4, "16 or 8 values per thread");
  constexpr int kThreadsPerGroup = GS / (2 * kWords);
  constexpr bool kRoundScale = SK != ScaleKind::kFloat;
  const int chunk0 = lane * 8, chunk1 = GS / 2 + lane * 8;

  // amax over the 16-bit abs patterns (two lanes at a time); NaN/Inf sort above every finite value.
  uint32_t m2 = 0;
#pragma unroll
  for (int j = 0; j < kWords; ++j) m2 = __vmaxu2(m2, w[j] & 0x7fff7fffu);
  uint32_t amax_bits = Pack2<T>::abs_bits_to_float_bits(max(m2 & 0xffffu, m2 >> 16));
#pragma unroll
  for (int offset = kThreadsPerGroup / 2; offset > 0; offset /= 2) {
    amax_bits = max(amax_bits, __shfl_xor_sync(0xffffffffu, amax_bits, offset));
  }
  if (!valid) return;
  const bool finite = amax_bits < kNonFiniteBits;
  const float amax = fmaxf(__uint_as_float(amax_bits), p.eps);

  float s, y;
  int e = 0;
  if constexpr (kRoundScale) {
    e = ceil_log2_from_bits(amax * R::kInvMax);
    s = pow2_from_bits(e);
    y = pow2_from_bits(-e);
  } else {
    s = amax * R::kInvMax;
    y = R::kMax / amax;  // fast-math division, as in the reference
  }

  constexpr uint32_t nan_word = R::kIsFp8 ? 0x7f7f7f7fu : 0u;  // fp8 NaN codes; int8 has none: 0
  const CodeWords<kWords / 2> codes =
      finite ? encode_words<T, R, kWords>(w, y) : CodeWords<kWords / 2>::filled(nan_word);
  if constexpr (kWords == 4) {  // the thread's 8 values are adjacent
    *reinterpret_cast<uint2*>(t.dst + chunk0) = make_uint2(codes.v[0], codes.v[1]);
  } else if constexpr (GS == kElemsPerThread) {  // one thread per group: the chunks are adjacent
    *reinterpret_cast<uint4*>(t.dst) = make_uint4(codes.v[0], codes.v[1], codes.v[2], codes.v[3]);
  } else {
    *reinterpret_cast<uint2*>(t.dst + chunk0) = make_uint2(codes.v[0], codes.v[1]);
    *reinterpret_cast<uint2*>(t.dst + chunk1) = make_uint2(codes.v[2], codes.v[3]);
  }

  if (lane == 0) {
    if constexpr (!kScaleOffsetGiven) s_offset = scale_byte_offset<SK>(p, t);
    uint8_t* const slot = static_cast<uint8_t*>(p.output_s) + s_offset;
    if constexpr (SK == ScaleKind::kPackedUE8M0) {
      slot[t.g & 3] = finite ? static_cast<uint8_t>(e + 127) : kUE8M0NanByte;
      if (t.g == p.groups_per_row - 1) {
        for (int k = (t.g & 3) + 1; k < 4; ++k) slot[k] = 0;  // pad bytes of the last word
      }
    } else {
      *reinterpret_cast<float*>(slot) = finite ? s : __uint_as_float(kNanBits);
    }
  }
}

// Quantizes one task from this thread's input words: the activation values (the input, or with fused
// SiLU T(T(silu(gate)) * up) per pair), then quantize_words.
// kComputeAlways: the input is loaded whatever `valid` (from an address in range), so the SiLU needs
// no branch either; only the stores wait for `valid`.
template <typename T, typename R, int GS, ScaleKind SK, bool SILU, bool kComputeAlways = false>
__device__ __forceinline__ void quantize_task(const QuantParams& p, const Task<T>& t, int lane, bool valid,
                                              const TaskInput<SILU>& in) {
  uint32_t w[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (valid || kComputeAlways) {
    const uint4 a = in.v[0], b = in.v[1];
    if constexpr (SILU) {
      const uint4 c = in.v[2], d = in.v[3];
      const uint32_t gate[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
      const uint32_t up[8] = {c.x, c.y, c.z, c.w, d.x, d.y, d.z, d.w};
#pragma unroll
      for (int j = 0; j < 8; ++j) w[j] = silu_and_mul_pair<T>(gate[j], up[j]);
    } else {
      w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
    }
  }
  quantize_words<T, R, GS, SK>(p, t, lane, valid, w);
}

template <typename T, typename R, int GS, ScaleKind SK, bool SILU>
__device__ __forceinline__ void load_and_quantize_task(const QuantParams& p, const Task<T>& t, int lane, bool valid) {
  quantize_task<T, R, GS, SK, SILU>(p, t, lane, valid, load_task_input<T, GS, SILU>(p.hidden, t, lane, valid));
}

// Registers: plain quantization at most 32 (full occupancy, best for the memory-bound large calls;
// ptxas's own choice for the dense kernel until the masked one got its own). Fused SiLU may use 40 (at least 3 blocks of 512 per SM, 75% occupancy): its 16 SiLUs
// per thread then overlap instead of queuing on one another, which made every SiLU case faster
// (probe, H200: dense SiLU over 1490 rows 4.26 -> 3.58 us, masked 8 x 512 5.57 -> 4.93 us;
// benchmark/NOTES.md v8b).
// Dense and masked layouts are separate kernels (MASKED): each gets its own register allocation, so
// the masked layout's bookkeeping never costs the dense kernel registers or occupancy.
// Launches without PDL of one row index (dense) or at most 32 experts (masked) run the no-PDL kernels
// below instead (dense_no_pdl_kernel, masked_no_pdl_kernel).
template <typename T, typename R, int GS, ScaleKind SK, bool SILU, bool MASKED>
__global__ void __launch_bounds__(kMaxBlockThreads, SILU ? 3 : 4) per_token_group_quant_kernel(const KernelArgs args) {
  constexpr int kThreadsPerGroup = GS / kElemsPerThread;
  static_assert(kThreadsPerGroup >= 1 && kThreadsPerGroup <= 32 && (kThreadsPerGroup & (kThreadsPerGroup - 1)) == 0,
                "group size must be 16 * a power of two, at most 512");
  const QuantParams& p = args.p;
  const int sub = threadIdx.x / kThreadsPerGroup;
  const int lane = threadIdx.x % kThreadsPerGroup;
  const int groups_per_block = blockDim.x / kThreadsPerGroup;
  // Masked: loop bounds are uniform over the block, so every warp reaches the shuffles together.
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * groups_per_block;
  int64_t first = static_cast<int64_t>(blockIdx.x) * groups_per_block;
  SGLQ_PROBE_BLOCK(0);

  if constexpr (!MASKED) {
    // Dense: one task per sub-warp. The launcher never makes more blocks than tasks, so every block
    // has one: locate it before waiting for the producer kernel (PDL), so that this index math
    // overlaps the producer's tail instead of adding to the latency of small calls.
    SGLQ_PROBE_PHASE(0, 0.0f);
    const int num_tasks = args.num_tasks;
    // 32-bit: the tasks end below num_tasks + groups_per_block < 2^32.
    const uint32_t task = blockIdx.x * static_cast<uint32_t>(groups_per_block) + sub;
    bool valid = task < static_cast<uint32_t>(num_tasks);
    const Task<T> t = locate_dense_task<T, GS, SK, SILU>(args, static_cast<int>(task), valid);
    SGLQ_PROBE_PHASE(1, __int_as_float(static_cast<int>(reinterpret_cast<uintptr_t>(t.src))));
    pdl_wait_for_producer_after(t);  // the input may come from the previous kernel
    pdl_allow_dependents();   // let the next kernel launch now; it waits for our completion itself
    const TaskInput<SILU> in = load_task_input<T, GS, SILU>(p.hidden, t, lane, valid);
    SGLQ_PROBE_PHASE(2, __int_as_float(static_cast<int>(in.v[0].x)));
    // The only task: dense grids have a block per groups_per_block tasks (no grid-stride loop). With
    // the loop's code after it, the same one-round calls took longer in both launch modes (probe,
    // H200, µs without / with PDL: M=1 H=4096 1.384 / 0.794 -> 1.356 / 0.786 without it, M=1024 H=4096
    // 3.175 / 2.265 -> 3.081 / 2.163; benchmark/NOTES.md session 10): a thread then exits right after
    // its stores instead of reconverging for the loop test.
    quantize_task<T, R, GS, SK, SILU>(p, t, lane, valid, in);
    SGLQ_PROBE_PHASE(3, 0.0f);
    SGLQ_PROBE_BLOCK(1);
  } else if (p.num_outer <= kWarpScanMaxExperts) {
    // Masked, at most 32 experts: every warp scans the counts itself (one load, a warp sum, at most
    // five shuffles), so no shared memory and no barriers stand between the counts and the inputs.
    // The counts were usually written kernels earlier (by the MoE dispatch), so a warp reads them and
    // locates its first task before the PDL wait, like the dense path; after the wait it reads them
    // again while that task's input loads are in flight, and starts over only if they changed (the
    // previous kernel wrote them). The early read bypasses L1, so that the later one cannot find a
    // stale line there (warp_masked_count). (Launches without PDL: masked_no_pdl_kernel where it fits.)
    // (Probe, H200: 8 x 512 4.70 -> 4.14 us, 32 x 256 11.32 -> 10.66; the check after the wait is
    // not on the path to the first input loads.)
    // PDL, a grid of whole rounds of resident blocks (args.trigger_at_start): the next kernel may launch
    // from our start. Its blocks then take only the places of ours that have exited, where they prepare
    // and wait (griddepcontrol.wait) for our end. Triggered after our wait instead, a decode-sized call
    // (mostly blocks without a task) held the next launch, and with it the next grid's block dispatch,
    // until the producer's end (probe, H200, PDL, µs, with the idle exit below: 8 x 512 with 22 valid
    // rows 2.72 -> 1.66, 32 x 256 with 117 rows 3.02 -> 2.29, 32 x 256 11.19 -> 10.06, 8 x 512 3.73 ->
    // 3.75; benchmark/NOTES.md session 18). Not where free places remain (smaller grids, dense ones):
    // there a chain of such kernels all launch at once and crowd the SMs (dense M=64 H=7168 with the
    // trigger at the start: 1.02 -> 1.87).
    // Launches without PDL run masked_no_pdl_kernel where masked_no_pdl_fits, the others this path with
    // args.pdl = 0 (one read of the counts, through L1).
    pdl_allow_dependents_if(args.trigger_at_start);
    const int num_experts = static_cast<int>(p.num_outer);
    int guess = args.pdl ? warp_masked_count<true>(p) : warp_masked_count<false>(p);
    int num_tasks = warp_sum(guess) * p.groups_per_row;
    if (first >= num_tasks) {
      // A block without a task by the first read exits before the prefix and the lookup. Decode-sized
      // MoE calls (a few rows per expert) launch mostly such blocks, whose instructions otherwise take
      // the issue slots of the SMs that hold the working ones (probe, H200, no PDL, µs: 8 x 512 with 22
      // valid rows 2.72 -> 2.39, 32 x 256 with 117 rows 2.81 -> 2.53; benchmark/NOTES.md session 17).
      // The counts are final after the wait: it exits if they are what it read, else it goes on with them.
      pdl_wait_for_producer();
      const int count = warp_masked_count<false>(p);
      const bool same = __all_sync(0xffffffffu, count == guess);
      guess = count;
      if (same) {
        SGLQ_PROBE_BLOCK(1);
        return;
      }
      num_tasks = warp_sum(guess) * p.groups_per_row;
    }
    int exclusive = warp_exclusive_prefix(guess, num_experts);
    bool valid = first + sub < num_tasks;
    Task<T> t = locate_masked_task_in_warp<T, GS>(args, exclusive, valid ? static_cast<int>(first + sub) : 0);
    pdl_wait_for_producer();  // the input and the counts may come from the previous kernel
    pdl_allow_dependents_if(!args.trigger_at_start);
    TaskInput<SILU> in = load_task_input<T, GS, SILU>(p.hidden, t, lane, valid);
    const int count = args.pdl ? warp_masked_count<false>(p) : guess;
    if (!__all_sync(0xffffffffu, count == guess)) {  // rare: redo the first task's lookup and loads
      num_tasks = warp_sum(count) * p.groups_per_row;
      exclusive = warp_exclusive_prefix(count, num_experts);
      valid = first + sub < num_tasks;
      t = locate_masked_task_in_warp<T, GS>(args, exclusive, valid ? static_cast<int>(first + sub) : 0);
      in = load_task_input<T, GS, SILU>(p.hidden, t, lane, valid);
    }
    if (first >= num_tasks) {  // no task for this block (the counts are the same in all its warps now)
      SGLQ_PROBE_BLOCK(1);
      return;
    }
    quantize_task<T, R, GS, SK, SILU>(p, t, lane, valid, in);
    for (first += grid_stride; first < num_tasks; first += grid_stride) {
      valid = first + sub < num_tasks;
      t = locate_masked_task_in_warp<T, GS>(args, exclusive, valid ? static_cast<int>(first + sub) : num_tasks - 1);
      load_and_quantize_task<T, R, GS, SK, SILU>(p, t, lane, valid);
    }
    SGLQ_PROBE_BLOCK(1);
  } else {
    // Masked, many experts: each block prefix-sums the clamped counts in shared memory and finds a
    // row's expert by binary search.
    pdl_wait_for_producer();  // the input and the counts may come from the previous kernel
    pdl_allow_dependents();
    extern __shared__ int prefix[];
    masked_row_prefix(p, prefix, prefix + p.num_outer + 1);
    const int num_tasks = prefix[p.num_outer] * p.groups_per_row;
    for (; first < num_tasks; first += grid_stride) {
      const bool valid = first + sub < num_tasks;
      const Task<T> t = locate_masked_task<T, GS>(args, prefix, valid ? static_cast<int>(first + sub) : num_tasks - 1);
      load_and_quantize_task<T, R, GS, SK, SILU>(p, t, lane, valid);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Launches without PDL: dense calls of one row index (the usual 2-D input), masked calls of at most 32
// experts (MoE layers' usual case). Their latency is one chain before the first input load: the
// first task's index math (masked: after the counts' load, the warp's prefix and lookup) and its
// address. A kernel's first read of a 64-byte constant line waits for that line (a miss per SM and
// launch), and KernelArgs spread what the chain reads over the lines 0x200, 0x240 and 0x280 (and
// blockDim the driver's line 0x0), read one after the other. A head holds all of it in the parameters'
// first line (at most 48 bytes at 0x210, beside the driver's word at 0x208), the block's size
// included; the outputs, scale strides and (masked) the grid-stride loop read `args` once the first
// loads are in flight. These kernels carry no PDL instructions: the counts they read are final.
// Probe A/B, H200, no PDL, µs (session 29, benchmark/NOTES.md; dense here, masked below): M=64
// H=7168 1.665 -> 1.574, M=256 H=7168 2.338 -> 2.123, M=1024 H=4096 3.088 -> 2.861, M=4096 H=4096
// 12.718 -> 12.540, packed M=4096 12.639 -> 12.442, dense SiLU over 1490 rows 4.370 -> 3.880.
// (The PDL instructions alone are not it: compiled out of the PDL kernels, M=1024 H=4096 3.096 ->
// 3.003, SiLU 1490 4.377 -> 4.172.)
template <typename Head>
struct NoPdlArgs {
  Head head;
  KernelArgs args;  // the same call
};

// (The order's accessors of dense_row_group, as KernelArgsOrder's.)
struct DenseHead {
  const void* input;
  int64_t in_row_stride;  // elements
  int32_t num_tasks, rows, groups;
  uint32_t column_multiplier;  // task -> task column: FastDivmod(task columns), its shift in `shape`
  uint32_t shape;              // the division's shift (bits 0-7), rows_first_log2 (8-15), groups per block (16-31)

  __device__ __forceinline__ int num_rows() const { return rows; }
  __device__ __forceinline__ int groups_per_row() const { return groups; }
  __device__ __forceinline__ FastDivmod columns() const { return FastDivmod::of(column_multiplier, shape & 0xffu); }
  __device__ __forceinline__ int rows_first_log2() const { return static_cast<int>((shape >> 8) & 0xffu); }
  __device__ __forceinline__ int groups_per_block() const { return static_cast<int>(shape >> 16); }
};
static_assert(sizeof(DenseHead) <= 48, "one 64-byte constant line with the driver's word at 0x208");

struct MaskedHead {
  const int32_t* masked_m;
  const void* input;
  uint32_t in_row_stride;  // elements; expert e's rows start at row e * rows_per_outer (masked_no_pdl_fits)
  int32_t rows_per_outer;  // the counts' upper clamp
  int32_t groups_per_row;
  uint32_t row_multiplier;  // task -> valid row index: FastDivmod(groups per row), its shift in `shape`
  uint32_t shape;           // experts (bits 0-7), the division's shift (8-15), groups per block (16-31)

  __device__ __forceinline__ int experts() const { return static_cast<int>(shape & 0xffu); }
  __device__ __forceinline__ int groups_per_block() const { return static_cast<int>(shape >> 16); }
  __device__ __forceinline__ int row_of(int task) const {
    return FastDivmod::of(row_multiplier, (shape >> 8) & 0xffu).div(task);
  }
};
static_assert(sizeof(MaskedHead) <= 48, "one 64-byte constant line with the driver's word at 0x208");

// The heads of a call (KernelArgs as the launcher made them) in blocks of groups_per_block tasks.
inline NoPdlArgs<DenseHead> dense_no_pdl_args(const KernelArgs& args, int groups_per_block) {
  NoPdlArgs<DenseHead> a = {};
  a.head.input = args.p.input;
  a.head.in_row_stride = args.p.in_row_stride;
  a.head.num_tasks = args.num_tasks;
  a.head.rows = args.num_rows;
  a.head.groups = args.p.groups_per_row;
  a.head.column_multiplier = args.task_columns.multiplier;
  a.head.shape = args.task_columns.shift | static_cast<uint32_t>(args.rows_first_log2) << 8 |
                 static_cast<uint32_t>(groups_per_block) << 16;
  a.args = args;
  return a;
}

// Masked calls that masked_no_pdl_kernel serves (the others run the general kernel without PDL):
// - at most 32 experts (the warp's prefix sum);
// - the experts' rows evenly spaced (a contiguous [E, rows, K] input, as MoE dispatch writes it), with
//   32-bit row indices and row stride: the input offset is one 32-bit product;
// - no warp holding tasks of two rows: a warp holds 32 / (GS / 16) consecutive tasks from a multiple
//   of that count (blocks hold whole warps), so the row's groups must be a multiple of it, which is H
//   a multiple of 512 whatever the group size (2048, 4096, 7168 are).
// Then a warp finds its expert with one vote (masked_expert_of_warp_row), with no branch.
template <int GS>
inline bool masked_no_pdl_fits(const QuantParams& p) {
  constexpr int kTasksPerWarp = 32 * kElemsPerThread / GS;
  return p.num_outer <= kWarpScanMaxExperts && p.in_outer_stride == p.rows_per_outer * p.in_row_stride &&
         p.in_row_stride <= INT32_MAX && p.num_outer * p.rows_per_outer <= INT32_MAX &&
         p.groups_per_row % kTasksPerWarp == 0;
}

inline NoPdlArgs<MaskedHead> masked_no_pdl_args(const KernelArgs& args, int groups_per_block) {
  const QuantParams& p = args.p;
  NoPdlArgs<MaskedHead> a = {};
  a.head.masked_m = p.masked_m;
  a.head.input = p.input;
  a.head.in_row_stride = static_cast<uint32_t>(p.in_row_stride);
  a.head.rows_per_outer = static_cast<int32_t>(p.rows_per_outer);
  a.head.groups_per_row = p.groups_per_row;
  a.head.row_multiplier = args.task_columns.multiplier;
  a.head.shape = static_cast<uint32_t>(p.num_outer) | args.task_columns.shift << 8 |
                 static_cast<uint32_t>(groups_per_block) << 16;
  a.args = args;
  return a;
}

// Dense, one row index (num_outer == 1): per_token_group_quant_kernel's dense path with the first
// task located from the head.
template <typename T, typename R, int GS, ScaleKind SK, bool SILU>
__global__ void __launch_bounds__(kMaxBlockThreads, SILU ? 3 : 4) dense_no_pdl_kernel(const NoPdlArgs<DenseHead> a) {
  constexpr int kThreadsPerGroup = GS / kElemsPerThread;
  const DenseHead& h = a.head;
  const int sub = threadIdx.x / kThreadsPerGroup;
  const int lane = threadIdx.x % kThreadsPerGroup;
  SGLQ_PROBE_BLOCK(0);
  // 32-bit: the tasks end below num_tasks + groups_per_block < 2^32.
  const uint32_t task = blockIdx.x * static_cast<uint32_t>(h.groups_per_block()) + sub;
  bool valid = task < static_cast<uint32_t>(h.num_tasks);
  const RowGroup rg = dense_row_group<SK, SILU>(h, static_cast<int>(task), valid);
  const int row_index = rg.row_index, g = rg.g;
  // An invalid task (past the end, a padding row or column of the task order) loads from the last
  // row or group instead (its codes are never stored), so that neither the loads nor the SiLU stand
  // in a branch. Probe A/B, H200, session 32, µs without PDL, branch -> clamped: M=1024 H=4096 2.88 ->
  // 2.75, dense SiLU over 1490 rows 3.88 -> 3.79, M=64 H=7168 packed 1.62 -> 1.60.
  Task<T> t;
  t.src = static_cast<const T*>(h.input) + min(row_index, h.rows - 1) * h.in_row_stride + min(g, h.groups - 1) * GS;
  const TaskInput<SILU> in = load_task_input<T, GS, SILU>(h.groups * GS, t, lane, true);
  const QuantParams& p = a.args.p;
  quantize_task<T, R, GS, SK, SILU, true>(p, locate_task<T, GS>(p, 0, row_index, g), lane, valid, in);
  SGLQ_PROBE_BLOCK(1);
}

// Masked, the calls of masked_no_pdl_fits: per_token_group_quant_kernel's warp-scan path with the
// counts read once (they are final) and the first task located from the head. In a one-round grid
// (8 x 512: 48 warps per SM) every warp runs the code between the counts' arrival and its first input
// load at about the same time, so that code is kept short, without loops and with few warp-collective
// steps: the scan's first three steps without tests, one vote for the expert (a warp's tasks share a
// row) beside one reduction for its start, and a 32-bit input offset (bf16, SiLU, packed scales: 93
// instructions from the start to the first input load, against 117 with the ballot loop and the 64-bit
// offset; SASS, session 31).
// The loads stay in the `valid` branch. Loading a clamped row for invalid tasks instead (no branch, 76
// instructions) was slower: probe A/B, H200, session 32, µs without PDL, passes 2-3 of 3 x 2 runs,
// masked 8 x 512 4.57 (clamped) -> 4.43 (branch), main 4.63 (benchmark/NOTES.md "Session 32").
template <typename T, typename R, int GS, ScaleKind SK, bool SILU>
__global__ void __launch_bounds__(kMaxBlockThreads, SILU ? 3 : 4) masked_no_pdl_kernel(const NoPdlArgs<MaskedHead> a) {
  constexpr int kThreadsPerGroup = GS / kElemsPerThread;
  const MaskedHead& h = a.head;
  const int sub = threadIdx.x / kThreadsPerGroup;
  const int lane = threadIdx.x % kThreadsPerGroup;
  const int groups_per_block = h.groups_per_block();
  int64_t first = static_cast<int64_t>(blockIdx.x) * groups_per_block;
  SGLQ_PROBE_BLOCK(0);
  // The first task's row index and group do not depend on the counts (a task past the end gets a row
  // that is never read), so they are computed while the counts load.
  const int task = static_cast<int>(first) + sub;
  const int row_index = h.row_of(task);
  const int g = task - row_index * h.groups_per_row;
  // Every warp reads the counts (lane e expert e's, clamped), sums them (a block without a task exits
  // before the lookup: decode-sized calls launch mostly such blocks, see per_token_group_quant_kernel)
  // and prefix-sums them with shuffles.
  const int num_experts = h.experts();
  const int warp_lane = threadIdx.x & 31;
  const int count = warp_lane < num_experts ? min(max(h.masked_m[warp_lane], 0), h.rows_per_outer) : 0;
  const int num_rows = warp_sum(count);
  const int num_tasks = num_rows * h.groups_per_row;
  const int exclusive = warp_exclusive_prefix<3>(count, num_experts);
  if (first >= num_tasks) {
    SGLQ_PROBE_BLOCK(1);
    return;
  }
  bool valid = task < num_tasks;
  // A task past the end looks up the last valid row (the warp's lanes keep one row) and loads nothing,
  // except with one thread per group (GS 16): there it loads that row, without a branch, as with the
  // branch ptxas spills for sm_100a (40 registers, 16 of them the SiLU's input).
  constexpr bool kLoadAlways = GS == 16;
  const int lookup_row = min(row_index, num_rows - 1);
  const ExpertStart es = masked_expert_of_warp_row(exclusive, num_experts, lookup_row);
  const int expert = es.expert, row = lookup_row - es.start;
  Task<T> t;
  const uint32_t input_row = static_cast<uint32_t>(expert * h.rows_per_outer + row);
  t.src = static_cast<const T*>(h.input) + static_cast<uint64_t>(input_row) * h.in_row_stride + g * GS;
  const TaskInput<SILU> in = load_task_input<T, GS, SILU>(h.groups_per_row * GS, t, lane, valid || kLoadAlways);
  const KernelArgs& args = a.args;
  const QuantParams& p = args.p;
  quantize_task<T, R, GS, SK, SILU, kLoadAlways>(p, locate_task<T, GS>(p, expert, row, g), lane, valid, in);
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * groups_per_block;
  for (first += grid_stride; first < num_tasks; first += grid_stride) {
    valid = first + sub < num_tasks;
    const int next = valid ? static_cast<int>(first + sub) : num_tasks - 1;  // the warp's lanes keep one row
    const int next_row_index = h.row_of(next);
    const ExpertStart next_es = masked_expert_of_warp_row(exclusive, num_experts, next_row_index);
    t = locate_task<T, GS>(p, next_es.expert, next_row_index - next_es.start, next - next_row_index * h.groups_per_row);
    load_and_quantize_task<T, R, GS, SK, SILU>(p, t, lane, valid);
  }
  SGLQ_PROBE_BLOCK(1);
}

// Small dense calls (small_call_fits: at most kSmallCallMaxRows rows, one row index, 32-bit strides,
// no fused SiLU): one task per GS/8 threads, each with one 16-byte load of 8 adjacent values and one
// 8-byte store of their codes, and 48 bytes of parameters instead of KernelArgs' 144. Without PDL the
// index math and the parameter reads before the first load are the call's latency; this kernel has
// one division and no task orders (rows-first order needs more rows than these calls have).
// Probe, H200, session 21 (benchmark/NOTES.md), µs without / with PDL, in the same process as the
// reference kernel (sgl-kernel v2, rebuilt for the comparison; no PDL): M=1 H=4096 1.37 / 0.79 -> 1.29 /
// 0.75 (reference 1.29), M=8 H=4096 1.42 / 0.83 -> 1.36 / 0.79 (1.33), ten chained M=1 launches 13.68 ->
// 12.85 (12.90).
// 48 bytes, not 64: the parameters start at c[0x0][0x210], the 64-byte constant-cache lines at 0x200
// and 0x240. A kernel's first read of a line waits for it (a miss per SM and launch), and ptxas read
// the scale strides and eps (past 0x240 with 64 bytes) only after the input load, so that second miss
// came on top of the load's latency. Probe A/B, H200, session 22, µs without / with PDL: M=1 H=4096
// 1.268 / 0.740 -> 1.232 / 0.722, M=8 H=4096 1.369 / 0.800 -> 1.332 / 0.772, M=8 H=7168 1.406 / 0.836 ->
// 1.376 / 0.802; in one process with the reference (no PDL): M=8 H=4096 1.323 vs 1.327, M=8 H=7168
// 1.366 vs 1.352, ten chained M=1 launches 12.32 vs 12.80.
struct SmallCallArgs {
  const void* input;
  void* output_q;
  void* output_s;
  uint32_t row_multiplier;  // task -> row: FastDivmod(groups per row) with its shift in `shape`
  uint32_t shape;           // groups per row (bits 0-22), rows (23-26), the division's shift (27-31)
  int32_t in_row_stride, s_row_stride, s_group_stride;
  float eps;

  static constexpr int kGroupBits = 23, kRowBits = 4;
  __device__ __forceinline__ int groups() const { return static_cast<int>(shape & ((1u << kGroupBits) - 1)); }
  __device__ __forceinline__ int rows() const {
    return static_cast<int>((shape >> kGroupBits) & ((1u << kRowBits) - 1));
  }
  __device__ __forceinline__ int row_of(uint32_t task) const {
    return static_cast<int>((__umulhi(task, row_multiplier) + task) >> (shape >> (kGroupBits + kRowBits)));
  }
};
static_assert(sizeof(SmallCallArgs) == 48, "one 64-byte constant line with the driver's word at 0x208");

// The arguments of a small call p (small_call_fits); groups_per_row: the divisor by p.groups_per_row.
inline SmallCallArgs small_call_args(const QuantParams& p, FastDivmod groups_per_row) {
  SmallCallArgs a;
  a.input = p.input;
  a.output_q = p.output_q;
  a.output_s = p.output_s;
  a.row_multiplier = groups_per_row.multiplier;
  a.shape = static_cast<uint32_t>(p.groups_per_row) | static_cast<uint32_t>(p.rows_per_outer) << SmallCallArgs::kGroupBits |
            groups_per_row.shift << (SmallCallArgs::kGroupBits + SmallCallArgs::kRowBits);
  a.in_row_stride = static_cast<int32_t>(p.in_row_stride);
  a.s_row_stride = static_cast<int32_t>(p.s_row_stride);
  a.s_group_stride = static_cast<int32_t>(p.s_group_stride);
  a.eps = p.eps;
  return a;
}

// Small calls run blocks of a fixed 128 threads (the launch-config hook's block size does not apply;
// 64 / 256 / 512 were no faster, session 21). A compile-time block size also spares the kernel the
// driver's constant line of blockDim, which it read before its arguments' line and waited for first
// (probe, H200, µs without / with PDL: M=1 H=4096 1.057 / 0.677 -> 1.026 / 0.678, M=8 H=4096 1.334 /
// 0.767 -> 1.294 / 0.757, M=8 H=7168 1.358 / 0.805 -> 1.338 / 0.796; session 28).
constexpr int kSmallCallThreads = 128;

template <typename T, typename R, int GS, ScaleKind SK>
__global__ void __launch_bounds__(kMaxBlockThreads, 4) small_call_quant_kernel(const SmallCallArgs a) {
  constexpr int kThreadsPerGroup = GS / 8;
  const int sub = threadIdx.x / kThreadsPerGroup, lane = threadIdx.x % kThreadsPerGroup;
  // 32-bit: the tasks end below rows * groups + groups per block < 2^31 (small_call_fits)
  const uint32_t task = blockIdx.x * (kSmallCallThreads / kThreadsPerGroup) + sub;
  const int groups = a.groups();
  const int row = a.row_of(task);
  const bool valid = row < a.rows();  // tasks past the last row's groups have row >= rows
  const int g = static_cast<int>(task) - row * groups;
  QuantParams p;  // what quantize_words reads
  p.output_s = a.output_s;
  p.s_group_stride = a.s_group_stride;
  p.groups_per_row = groups;
  p.eps = a.eps;
  Task<T> t;
  t.src = static_cast<const T*>(a.input) + static_cast<int64_t>(row) * a.in_row_stride + g * GS + lane * 8;
  t.dst = static_cast<uint8_t*>(a.output_q) + static_cast<int64_t>(row) * (groups * GS) + g * GS;
  t.s_row = static_cast<int64_t>(row) * a.s_row_stride;
  t.g = g;
  pdl_wait_for_producer_after(t);  // the input may come from the previous kernel
  pdl_allow_dependents();
  const uint4 v = valid ? load_input_vec(t.src) : make_uint4(0, 0, 0, 0);
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  quantize_words<T, R, GS, SK, 4>(p, t, lane, valid, w);
}

// ---------------------------------------------------------------------------------------------
struct LaunchOptions {
  cudaStream_t stream = nullptr;
  int device = 0;
  int num_sms = 1;
  // multiple of 32, <= kMaxBlockThreads; 0: 128 for one-round problems, else 256 (small calls: always kSmallCallThreads)
  int block_threads = 0;
  int waves = 64;         // masked and fused-op grids are capped at waves * (resident blocks per SM) * SMs
  bool pdl = false;
  bool clusters = false;    // the device runs thread-block clusters (SM90+)
  int rmsnorm_cluster = 0;  // blocks per row of the fused RMSNorm op: 0 automatic, 1 none, 2..8
  int rmsnorm_stages = 0;   // rows in flight per block of the fused op's kStaged kernel: 0 automatic, < 0 never
};

constexpr int log2_of_power_of_two(int v) { return v <= 1 ? 0 : 1 + log2_of_power_of_two(v / 2); }

// One int per device (devices 0..63; others are never cached), 0 meaning not known yet: what a launcher
// learns about a device or a kernel once (a function-local static, zero-initialized).
// Relaxed atomics, so that first calls on several host threads are no data race: they compute the same
// value, and either store wins.
class PerDeviceInt {
 public:
  int get(int device) const { return cached(device) ? values_[device].load(std::memory_order_relaxed) : 0; }
  void set(int device, int value) {
    if (cached(device)) values_[device].store(value, std::memory_order_relaxed);
  }

 private:
  static constexpr int kMaxDevices = 64;
  static bool cached(int device) { return device >= 0 && device < kMaxDevices; }
  std::atomic<int> values_[kMaxDevices];
};

// Blocks of `threads` of `kernel` with `smem` bytes of dynamic shared memory resident per SM (at least 1),
// cached per kernel, device and block size with the smem it was queried for (one word: a race between
// calls stores either query whole).
template <auto kernel>
cudaError_t resident_blocks_per_sm(int threads, size_t smem, const LaunchOptions& opt, int& occupancy) {
  constexpr int kMaxDevices = 64, kMaxThreads = 1024;
  static std::atomic<uint64_t> cached[kMaxDevices][kMaxThreads / 32 + 1];  // smem << 16 | occupancy (zero: none)
  const bool cacheable = opt.device >= 0 && opt.device < kMaxDevices && smem < (uint64_t{1} << 40);
  const uint64_t entry = cacheable ? cached[opt.device][threads / 32].load(std::memory_order_relaxed) : 0;
  occupancy = (entry >> 16) == smem ? static_cast<int>(entry & 0xffffu) : 0;
  if (occupancy == 0) {
    const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occupancy, kernel, threads, smem);
    if (err != cudaSuccess) return err;
    occupancy = occupancy > 0 ? (occupancy < 0xffff ? occupancy : 0xffff) : 1;
    if (cacheable) {
      cached[opt.device][threads / 32].store(smem << 16 | static_cast<uint64_t>(occupancy), std::memory_order_relaxed);
    }
  }
  return cudaSuccess;
}

// The grid for blocks_needed blocks of `threads`, capped at opt.waves rounds of resident blocks of
// `kernel`; small grids need no occupancy query.
template <auto kernel>
cudaError_t capped_grid(int64_t blocks_needed, int threads, size_t smem, const LaunchOptions& opt, int64_t& grid) {
  grid = blocks_needed;
  if (blocks_needed <= opt.num_sms) return cudaSuccess;
  int occupancy = 0;
  const cudaError_t err = resident_blocks_per_sm<kernel>(threads, smem, opt, occupancy);
  if (err != cudaSuccess) return err;
  const int64_t max_blocks = static_cast<int64_t>(opt.num_sms) * occupancy * opt.waves;
  grid = blocks_needed < max_blocks ? blocks_needed : max_blocks;
  return cudaSuccess;
}

// The launch options as `kernel` can use them: PDL and clusters need the kernel's SM90 instructions,
// not only an SM90 device (a build for older archs only runs there as JIT-compiled older PTX, without
// griddepcontrol and the cluster barriers), so they are dropped where its loaded code (PTX version,
// cached per device) is older.
template <auto kernel>
LaunchOptions options_for(const LaunchOptions& requested) {
  LaunchOptions o = requested;
  if (!o.pdl && !o.clusters) return o;
  static PerDeviceInt cached;  // 0 unknown, 1 older code, 2 SM90 code
  int known = cached.get(o.device);
  if (known == 0) {
    cudaFuncAttributes attr = {};
    known = cudaFuncGetAttributes(&attr, kernel) == cudaSuccess && attr.ptxVersion >= 90 ? 2 : 1;
    cached.set(o.device, known);
  }
  if (known == 1) o.pdl = o.clusters = false;
  return o;
}

constexpr int64_t kMaxClusterRows = 65535;  // gridDim.y's limit: the most clusters of one launch

// kernel<<<grid, threads, smem, opt.stream>>>(args), as a programmatic dependent launch when opt.pdl,
// in thread-block clusters of `cluster` blocks when > 1 (grid a multiple of it, at most kMaxClusterRows
// clusters): then as a 2-D grid (cluster, grid / cluster), so that blockIdx.y is the block's cluster.
template <typename Kernel, typename Args>
cudaError_t launch_kernel(Kernel kernel, int64_t grid, int threads, size_t smem, const LaunchOptions& opt,
                          const Args& args, int cluster = 1) {
  if (cluster > 1 && grid / cluster > kMaxClusterRows) return cudaErrorInvalidValue;  // launchers keep within it
  cudaLaunchConfig_t config = {};
  config.gridDim = cluster > 1 ? dim3(static_cast<unsigned>(cluster), static_cast<unsigned>(grid / cluster))
                               : dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  config.stream = opt.stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = opt.pdl ? 1 : 0;
  config.attrs = attr;
  config.numAttrs = 1;
  if (cluster > 1) {
    attr[1].id = cudaLaunchAttributeClusterDimension;
    attr[1].val.clusterDim.x = static_cast<unsigned>(cluster);
    attr[1].val.clusterDim.y = 1;
    attr[1].val.clusterDim.z = 1;
    config.numAttrs = 2;
  }
  return cudaLaunchKernelEx(&config, kernel, args);
}

// Folds (outer, row) into one row index where the strides allow it (contiguous batches), which saves
// the kernel a division per task. 2-D inputs have num_outer == 1 already.
inline void fold_outer_rows(QuantParams& q) {
  if (q.masked_m == nullptr && q.num_outer > 1 && q.in_outer_stride == q.rows_per_outer * q.in_row_stride &&
      q.s_outer_stride == q.rows_per_outer * q.s_row_stride) {
    q.rows_per_outer *= q.num_outer;
    q.num_outer = 1;
  }
}

// Dense calls of at most this many rows run small_call_quant_kernel (where small_call_fits). Measured
// to gain at 1 and 8 rows in both launch modes; the probe's lean kernels of the same kind lost at 64
// rows (session 7: each column-major scale a store to its own sector, without rows-first order).
constexpr int64_t kSmallCallMaxRows = 8;

// Whether p (folded) is a small call: dense, no fused SiLU, one row index, strides in 32 bits, rows and
// groups per row within SmallCallArgs::shape's fields (fewer than 2^23 groups: H < 2^27 at GS=16).
inline bool small_call_fits(const QuantParams& p) {
  constexpr int64_t kMax32 = (int64_t{1} << 31) - 1;
  static_assert(kSmallCallMaxRows < (1 << SmallCallArgs::kRowBits), "rows fit in SmallCallArgs::shape");
  auto fits = [](int64_t v) { return v >= 0 && v <= kMax32; };
  return p.masked_m == nullptr && !p.fuse_silu_and_mul && p.num_outer == 1 && p.rows_per_outer <= kSmallCallMaxRows &&
         p.groups_per_row < (1 << SmallCallArgs::kGroupBits) && fits(p.in_row_stride) && fits(p.s_row_stride) &&
         fits(p.s_group_stride);
}

template <typename T, typename R, int GS, ScaleKind SK>
cudaError_t launch_small_call(const QuantParams& p, const LaunchOptions& requested) {
  constexpr auto kernel = small_call_quant_kernel<T, R, GS, SK>;
  const LaunchOptions opt = options_for<kernel>(requested);
  const int threads = kSmallCallThreads;
  const int groups_per_block = threads / (GS / 8);
  const SmallCallArgs a = small_call_args(p, FastDivmod(static_cast<uint32_t>(p.groups_per_row)));
  return launch_kernel(kernel, (p.num_groups() + groups_per_block - 1) / groups_per_block, threads, 0, opt, a);
}

// Launch shape and arguments of one call of `kernel` (a per_token_group_quant_kernel variant of group
// size GS, scale kind SK, fused SiLU or not, layout MASKED), with the options it can use.
// kNoPdl: `kernel` is dense_no_pdl_kernel or masked_no_pdl_kernel (NoPdlArgs).
template <auto kernel, int GS, ScaleKind SK, bool SILU, bool MASKED, bool kNoPdl = false>
cudaError_t launch_quant_kernel(const QuantParams& p, const LaunchOptions& opt) {
  constexpr int kThreadsPerGroup = GS / kElemsPerThread;
  // Rows-first task order (KernelArgs) for dense column-major scales, in units of up to 32 rows, so
  // that a block of 256 threads writes whole 128-byte lines of fp32 scales (probe, H200: M=16384,
  // H=7168 84.08 -> 83.61 us, M=4096 12.19 -> 12.08, vs units of one row per sub-warp of a warp) and
  // whole sectors of packed UE8M0 words (8 rows of a word column; not with fused SiLU: kTaskColumnLog2).
  // The rows are padded to whole units; the unit halves, down to one row per warp's worth of task
  // columns, until the padding is at most 1/8 of the rows. Not for 16-element groups (a warp would
  // then store 16-byte halves of many rows' code sectors) nor for fewer rows than a warp takes (fp32
  // scales at M=1 would launch 4x the tasks).
  constexpr int kColumnLog2 = kTaskColumnLog2<SK, SILU, MASKED>;
  constexpr int kWarpRows = 32 / kThreadsPerGroup >> kColumnLog2;  // rows of a warp's tasks (0: part of one)
  constexpr int kMinUnitRows = kWarpRows > 1 ? kWarpRows : 1;
  constexpr int kMaxUnitRows = 32;
  // packed UE8M0 scales go rows first only by words (fused SiLU keeps the row order: kTaskColumnLog2)
  constexpr bool kRowsFirstScales = SK != ScaleKind::kPackedUE8M0 || kColumnLog2 > 0;
  const int64_t num_rows = p.num_rows();
  const int64_t columns = (p.groups_per_row + (1 << kColumnLog2) - 1) >> kColumnLog2;
  int64_t num_tasks = num_rows * columns << kColumnLog2;  // (masked: replaced by the counts' on the device)
  int rows_first_log2 = 0;
  if (p.masked_m == nullptr && GS >= 32 && kRowsFirstScales && p.s_group_stride != 1 && num_rows >= kMinUnitRows) {
    auto padded_rows = [num_rows](int64_t unit) { return (num_rows + unit - 1) / unit * unit; };
    int unit = kMaxUnitRows;
    while (unit > kMinUnitRows && padded_rows(unit) * 8 > num_rows * 9) unit /= 2;
    const int64_t padded = padded_rows(unit) * columns << kColumnLog2;
    if (padded < (int64_t{1} << 31)) {
      num_tasks = padded;
      rows_first_log2 = log2_of_power_of_two(unit);
    }
  }
  int threads = opt.block_threads;
  if (threads == 0) {
    // Problems that fit in at most 8 blocks of 128 threads per SM (half the resident threads) run
    // as one round: there, smaller blocks spread the tasks more evenly over the SMs (probe:
    // M=256, H=7168 2.07 µs with 128 threads vs 2.30 with 256). Larger problems: 256.
    const int64_t blocks_of_128 = (num_tasks * kThreadsPerGroup + 127) / 128;
    threads = blocks_of_128 <= 8 * static_cast<int64_t>(opt.num_sms) ? 128 : 256;
  }
  const int groups_per_block = threads / kThreadsPerGroup;
  const int64_t blocks_needed = (num_tasks + groups_per_block - 1) / groups_per_block;

  const size_t smem = masked_smem_bytes(p);
  if (smem > 48 * 1024) {  // many experts: raise the dynamic shared memory limit (validated <= 200 KiB)
    const cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }

  // Dense: a block per groups_per_block tasks (the kernel has no grid-stride loop), up to ~124 waves
  // (DSV4 T=16384). Against the loop on a 16-wave grid (H200, benchmark/NOTES.md session 11, µs
  // without / with PDL): M=16384 H=7168 84.47 / 83.48 -> 84.36 / 83.34, DSV4 T=16384 384.87 / 383.66
  // -> 375.57 / 375.40; one-round calls gain ~0.03 (no reconvergence for the loop test).
  // Masked: capped at opt.waves rounds of resident blocks.
  int64_t grid = blocks_needed;
  if constexpr (MASKED) {  // (dense launchers then carry no occupancy query at all)
    const cudaError_t err = capped_grid<kernel>(blocks_needed, threads, smem, opt, grid);
    if (err != cudaSuccess) return err;
  }
  const bool full_rounds = grid < blocks_needed;  // capped: opt.waves whole rounds of resident blocks
  KernelArgs args;
  args.p = p;  // (outer, row) folded where the strides allow it (launch_per_token_group_quant)
  args.task_columns = FastDivmod(static_cast<uint32_t>(columns));
  args.rows_per_outer = FastDivmod(static_cast<uint32_t>(p.rows_per_outer));
  args.num_tasks = static_cast<int32_t>(num_tasks);
  args.num_rows = static_cast<int32_t>(num_rows);
  args.rows_first_log2 = rows_first_log2;
  args.pdl = opt.pdl ? 1 : 0;
  args.trigger_at_start = MASKED && full_rounds && p.num_outer <= kWarpScanMaxExperts ? 1 : 0;
  if constexpr (kNoPdl && MASKED) {
    return launch_kernel(kernel, grid, threads, smem, opt, masked_no_pdl_args(args, groups_per_block));
  } else if constexpr (kNoPdl) {
    return launch_kernel(kernel, grid, threads, smem, opt, dense_no_pdl_args(args, groups_per_block));
  } else {
    return launch_kernel(kernel, grid, threads, smem, opt, args);
  }
}

// Launches one kernel variant; MASKED must say whether p.masked_m is set. Returns the CUDA error of
// the launch (cudaSuccess when fine). Launches without PDL run the no-PDL kernels where they apply.
template <typename T, typename R, int GS, ScaleKind SK, bool SILU, bool MASKED>
cudaError_t launch_per_token_group_quant(const QuantParams& p, const LaunchOptions& requested) {
  if (MASKED != (p.masked_m != nullptr)) return cudaErrorInvalidValue;
  QuantParams folded = p;  // masked calls: unchanged
  fold_outer_rows(folded);
  if constexpr (!MASKED && !SILU) {
    if (small_call_fits(folded)) return launch_small_call<T, R, GS, SK>(folded, requested);
  }
  constexpr auto kernel = per_token_group_quant_kernel<T, R, GS, SK, SILU, MASKED>;
  const LaunchOptions opt = options_for<kernel>(requested);
  if constexpr (MASKED) {
    if (!opt.pdl && masked_no_pdl_fits<GS>(p)) {
      return launch_quant_kernel<masked_no_pdl_kernel<T, R, GS, SK, SILU>, GS, SK, SILU, true, true>(folded, opt);
    }
  } else {
    if (!opt.pdl && folded.num_outer == 1) {
      return launch_quant_kernel<dense_no_pdl_kernel<T, R, GS, SK, SILU>, GS, SK, SILU, false, true>(folded, opt);
    }
  }
  return launch_quant_kernel<kernel, GS, SK, SILU, MASKED>(folded, opt);
}

// Every variant of one group size and layout (MASKED): {bf16, fp16} x {fp8, int8} x {3 scale kinds} x
// {plain, SiLU}. Used to instantiate the launchers in one .cu per group size and layout (parallel
// builds) and to declare them extern in the dispatcher.
#define SGLQ_FOR_EACH_VARIANT(GS, MASKED, X)                                                   \
  X(__nv_bfloat16, Fp8Range, GS, ScaleKind::kFloat, false, MASKED)                             \
  X(__nv_bfloat16, Fp8Range, GS, ScaleKind::kFloat, true, MASKED)                              \
  X(__nv_bfloat16, Fp8Range, GS, ScaleKind::kFloatUE8M0, false, MASKED)                        \
  X(__nv_bfloat16, Fp8Range, GS, ScaleKind::kFloatUE8M0, true, MASKED)                         \
  X(__nv_bfloat16, Fp8Range, GS, ScaleKind::kPackedUE8M0, false, MASKED)                       \
  X(__nv_bfloat16, Fp8Range, GS, ScaleKind::kPackedUE8M0, true, MASKED)                        \
  X(__nv_bfloat16, Int8Range, GS, ScaleKind::kFloat, false, MASKED)                            \
  X(__nv_bfloat16, Int8Range, GS, ScaleKind::kFloat, true, MASKED)                             \
  X(__nv_bfloat16, Int8Range, GS, ScaleKind::kFloatUE8M0, false, MASKED)                       \
  X(__nv_bfloat16, Int8Range, GS, ScaleKind::kFloatUE8M0, true, MASKED)                        \
  X(__nv_bfloat16, Int8Range, GS, ScaleKind::kPackedUE8M0, false, MASKED)                      \
  X(__nv_bfloat16, Int8Range, GS, ScaleKind::kPackedUE8M0, true, MASKED)                       \
  X(__half, Fp8Range, GS, ScaleKind::kFloat, false, MASKED)                                    \
  X(__half, Fp8Range, GS, ScaleKind::kFloat, true, MASKED)                                     \
  X(__half, Fp8Range, GS, ScaleKind::kFloatUE8M0, false, MASKED)                               \
  X(__half, Fp8Range, GS, ScaleKind::kFloatUE8M0, true, MASKED)                                \
  X(__half, Fp8Range, GS, ScaleKind::kPackedUE8M0, false, MASKED)                              \
  X(__half, Fp8Range, GS, ScaleKind::kPackedUE8M0, true, MASKED)                               \
  X(__half, Int8Range, GS, ScaleKind::kFloat, false, MASKED)                                   \
  X(__half, Int8Range, GS, ScaleKind::kFloat, true, MASKED)                                    \
  X(__half, Int8Range, GS, ScaleKind::kFloatUE8M0, false, MASKED)                              \
  X(__half, Int8Range, GS, ScaleKind::kFloatUE8M0, true, MASKED)                               \
  X(__half, Int8Range, GS, ScaleKind::kPackedUE8M0, false, MASKED)                             \
  X(__half, Int8Range, GS, ScaleKind::kPackedUE8M0, true, MASKED)

#define SGLQ_LAUNCHER_SIGNATURE(T, R, GS, SK, SILU, MASKED) \
  cudaError_t launch_per_token_group_quant<T, R, GS, SK, SILU, MASKED>(const QuantParams&, const LaunchOptions&);
#define SGLQ_INSTANTIATE_LAUNCHER(T, R, GS, SK, SILU, MASKED) template SGLQ_LAUNCHER_SIGNATURE(T, R, GS, SK, SILU, MASKED)
#define SGLQ_DECLARE_LAUNCHER(T, R, GS, SK, SILU, MASKED) extern template SGLQ_LAUNCHER_SIGNATURE(T, R, GS, SK, SILU, MASKED)

}  // namespace sgl_quant
