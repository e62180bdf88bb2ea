// The fused (add +) RMSNorm -> per-token-group 8-bit quantization kernel (SPEC §6).
//
// Per row of H elements (T = bf16/fp16, all fp32 steps IEEE, round to nearest even, no flushing):
//   z_i = float(x_i) + float(r_i), r_i <- T(z_i)       (with residual; else z_i = float(x_i))
//   ss  = sum of z_i^2 in the fixed order below
//   inv = 1 / sqrt(ss / H + norm_eps)                  (division, add, sqrt, division)
//   n_i = T((z_i * inv) * float(w_i))                  (output_normed_i <- n_i)
//   codes and scales: SPEC §1 on v = float(n), by the v2 per-group code (quantize_words), so they are
//   the bytes v2 gives for output_normed.
//
// The summation order of ss depends on H only (not on M, the launch shape, the group size or the
// layout), so a row's bytes depend on that row alone, and the CPU implementation repeats it:
//   q_u = fma(z_{8u+7}, z_{8u+7}, ... fma(z_{8u}, z_{8u}, +0))   for each 8-element (16-byte) vector u
//   ss  = pairwise sum of q_0 .. q_{H/8-1}: adjacent pairs first, then pairs of pairs, ..., the count
//         padded with +0 to a power of two (x + 0 = x: the padding changes nothing).
//
// Work decomposition: a row belongs to a team of threads; thread t holds chunk c = t (and c = t + 1024
// when H > 16384: CHUNKS = 2), 16 elements laid out as in v2 so that quantize_words applies unchanged:
// group g = c / L, L = GS / 16 threads per group, lane j = c % L, elements [g*GS + j*8, +8) (vector u1)
// and [g*GS + GS/2 + j*8, +8) (vector u2). The pairwise tree then falls out of the thread layout, one
// bit of the vector index at a time: the low log2(L) bits are lane bits (shuffles on both vectors), the
// next bit is u1 + u2 in the thread, the bits above are the remaining lane bits (shuffles), then the
// warp index (a 32-lane butterfly over the warps' sums, from shared memory), then the chunk k.
// Teams: up to 32 chunks, a power-of-two slice of a warp (several rows per 128-thread block); more, a
// whole block of ceil(chunks / 32) warps, one row at a time. Threads past the last chunk hold zeros.
#pragma once

#include "per_token_group_quant.cuh"

namespace sgl_quant {

// IEEE fp32 steps without flush-to-zero: the build's --use_fast_math (-ftz=true) would flush
// subnormal operands and results of ordinary fp32 arithmetic, and the CPU implementation does not.
__device__ __forceinline__ float ieee_add(float a, float b) {
  float r;
  asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float ieee_mul(float a, float b) {
  float r;
  asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float ieee_fma(float a, float b, float c) {
  float r;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(c));
  return r;
}
__device__ __forceinline__ float ieee_div(float a, float b) {
  float r;
  asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float ieee_sqrt(float a) {
  float r;
  asm("sqrt.rn.f32 %0, %1;" : "=f"(r) : "f"(a));
  return r;
}

// scripts/probe/rmsnorm_probe.cu builds the kernel with SGLQ_PROBE_PHASES: thread 0 of block 0 then
// records %globaltimer at the kernel's phases (loads done, ss known, inv known, end). Empty otherwise.
#ifdef SGLQ_PROBE_PHASES
__device__ unsigned long long g_probe_phases[8];
#define SGLQ_PROBE_PHASE(i, dep)                                                        \
  if (blockIdx.x == 0 && threadIdx.x == 0) {                                            \
    unsigned long long t_;                                                              \
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_) : "f"(dep) : "memory");        \
    g_probe_phases[i] = t_;                                                             \
  }
#else
#define SGLQ_PROBE_PHASE(i, dep)
#endif

constexpr int kRmsNormSmallTeamBlock = 128;  // block of several small (<= 32 thread) teams
constexpr int kRmsNormMaxTeam = 1024;

struct RmsNormKernelArgs {
  RmsNormQuantParams p;
  int32_t num_rows;
  int32_t team;  // threads per row: a power of two <= 32, or blockDim.x (a multiple of 32)
};

// Sum of v over the lanes whose index differs in the bits of [from, to) (powers of two <= 32), lowest
// bit first: one level of the pairwise tree per bit. Every lane of the warp must call it.
__device__ __forceinline__ float butterfly_sum(float v, int from, int to) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    if (o >= from && o < to) v = ieee_add(v, __shfl_xor_sync(0xffffffffu, v, o));
  }
  return v;
}

// The weight's two vectors at a chunk's element offsets.
template <typename T>
__device__ __forceinline__ void load_weight(const RmsNormQuantParams& rp, const int (&offset)[2], uint4 (&w)[2]) {
  w[0] = load_input_vec(static_cast<const T*>(rp.weight) + offset[0]);
  w[1] = load_input_vec(static_cast<const T*>(rp.weight) + offset[1]);
}

template <typename T, typename R, int GS, ScaleKind SK, int CHUNKS>
__global__ void __launch_bounds__(kRmsNormMaxTeam) rmsnorm_quant_kernel(const RmsNormKernelArgs args) {
  constexpr int L = GS / kElemsPerThread;
  const RmsNormQuantParams& rp = args.p;
  const QuantParams& p = rp.quant;
  const int team = args.team;
  const int t = threadIdx.x % team;  // this thread's index in its row's team
  const int lane = t % L;            // its index in its group's sub-warp (team and 1024 are multiples of L)
  const int rows_per_block = blockDim.x / team;
  const int num_chunks = p.hidden / kElemsPerThread;
  const int warp = threadIdx.x / 32, warp_lane = threadIdx.x % 32;
  __shared__ float warp_sums[2][CHUNKS][kRmsNormMaxTeam / 32];  // two buffers: alternate rows reuse neither early

  SGLQ_PROBE_PHASE(0, 0.0f);
  pdl_wait_for_producer();  // input and residual may come from the previous kernel
  pdl_allow_dependents();
  int parity = 0;
  // The loop bound is uniform over the block, so every warp reaches the shuffles and barriers together.
  for (int first = blockIdx.x * rows_per_block; first < args.num_rows; first += gridDim.x * rows_per_block) {
    const int row = first + static_cast<int>(threadIdx.x) / team;
    const bool row_valid = row < args.num_rows;
    const T* x_row = static_cast<const T*>(p.input) + static_cast<int64_t>(row) * p.in_row_stride;
    T* res_row = rp.residual ? static_cast<T*>(rp.residual) + static_cast<int64_t>(row) * p.hidden : nullptr;
    T* normed_row = rp.output_normed ? static_cast<T*>(rp.output_normed) + static_cast<int64_t>(row) * p.hidden : nullptr;

    float z[CHUNKS][16];
    bool valid[CHUNKS];
    int offset[CHUNKS][2];  // element offsets of the chunk's two vectors in the row
    // The weight is loaded with the row, so that its latency hides behind theirs, where registers allow
    // (one chunk: 58 registers; two chunks would spill, so they load it after the reduction).
    constexpr bool kWeightWithRow = CHUNKS == 1;  // (loading it late anyway: no faster, probe session 5)
    uint4 wv[CHUNKS][2];
    float a[CHUNKS], b[CHUNKS];
#pragma unroll
    for (int k = 0; k < CHUNKS; ++k) {
      const int c = t + k * kRmsNormMaxTeam;
      valid[k] = row_valid && c < num_chunks;
      const int g = c / L;
      offset[k][0] = g * GS + lane * 8;
      offset[k][1] = offset[k][0] + GS / 2;
      uint4 xv[2] = {}, rv[2] = {};
      wv[k][0] = wv[k][1] = make_uint4(0, 0, 0, 0);
      if (valid[k]) {
        xv[0] = load_input_vec(x_row + offset[k][0]);
        xv[1] = load_input_vec(x_row + offset[k][1]);
        if (res_row != nullptr) {
          rv[0] = *reinterpret_cast<const uint4*>(res_row + offset[k][0]);
          rv[1] = *reinterpret_cast<const uint4*>(res_row + offset[k][1]);
        }
        if (kWeightWithRow) load_weight<T>(rp, offset[k], wv[k]);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t xw[4] = {xv[h].x, xv[h].y, xv[h].z, xv[h].w};
        const uint32_t rw[4] = {rv[h].x, rv[h].y, rv[h].z, rv[h].w};
        uint32_t sum_words[4];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          float2 f = Pack2<T>::to_float2(xw[m]);
          if (res_row != nullptr) {
            const float2 r = Pack2<T>::to_float2(rw[m]);
            f = make_float2(ieee_add(f.x, r.x), ieee_add(f.y, r.y));
            sum_words[m] = Pack2<T>::from_float2(f);  // r <- T(z), round to nearest even
          }
          z[k][h * 8 + 2 * m] = f.x;
          z[k][h * 8 + 2 * m + 1] = f.y;
        }
        if (res_row != nullptr && valid[k]) {
          *reinterpret_cast<uint4*>(res_row + offset[k][h]) =
              make_uint4(sum_words[0], sum_words[1], sum_words[2], sum_words[3]);
        }
      }
      a[k] = b[k] = 0.0f;  // q_u of the two vectors: fma chains from +0 (zeros for invalid chunks)
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        a[k] = ieee_fma(z[k][e], z[k][e], a[k]);
        b[k] = ieee_fma(z[k][8 + e], z[k][8 + e], b[k]);
      }
    }

    SGLQ_PROBE_PHASE(1, a[0]);
    // ss: the pairwise tree over the vectors (see the header comment).
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < CHUNKS; ++k) {
      float s = ieee_add(butterfly_sum(a[k], 1, L), butterfly_sum(b[k], 1, L));
      s = butterfly_sum(s, L, team < 32 ? team : 32);
      if (team > 32) {  // one row per block: combine the warps
        if (warp_lane == 0) warp_sums[parity][k][warp] = s;
        __syncthreads();
        s = butterfly_sum(warp_lane < team / 32 ? warp_sums[parity][k][warp_lane] : 0.0f, 1, 32);
      }
      ss = k == 0 ? s : ieee_add(ss, s);
    }
    parity ^= 1;
    SGLQ_PROBE_PHASE(2, ss);
    const float inv = ieee_div(1.0f, ieee_sqrt(ieee_add(ieee_div(ss, static_cast<float>(p.hidden)), rp.norm_eps)));
    SGLQ_PROBE_PHASE(3, inv);

#pragma unroll
    for (int k = 0; k < CHUNKS; ++k) {
      if (!kWeightWithRow && valid[k]) load_weight<T>(rp, offset[k], wv[k]);
      uint32_t n[8];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t ww[4] = {wv[k][h].x, wv[k][h].y, wv[k][h].z, wv[k][h].w};
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const float2 w = Pack2<T>::to_float2(ww[m]);
          const float zx = z[k][h * 8 + 2 * m], zy = z[k][h * 8 + 2 * m + 1];
          n[h * 4 + m] = Pack2<T>::from_float2(make_float2(ieee_mul(ieee_mul(zx, inv), w.x), ieee_mul(ieee_mul(zy, inv), w.y)));
        }
        if (normed_row != nullptr && valid[k]) {
          *reinterpret_cast<uint4*>(normed_row + offset[k][h]) = make_uint4(n[h * 4], n[h * 4 + 1], n[h * 4 + 2], n[h * 4 + 3]);
        }
      }
      const int g = (t + k * kRmsNormMaxTeam) / L;
      Task<T> task;
      task.src = nullptr;
      task.dst = static_cast<uint8_t*>(p.output_q) + static_cast<int64_t>(row) * p.hidden + g * GS;
      task.s_row = static_cast<int64_t>(row) * p.s_row_stride;
      task.g = g;
      quantize_words<T, R, GS, SK>(p, task, lane, valid[k], n);
    }
  }
  SGLQ_PROBE_PHASE(4, 0.0f);
}

// Launches one variant; CHUNKS must be 2 exactly when H > 16384 (16 * kRmsNormMaxTeam).
template <typename T, typename R, int GS, ScaleKind SK, int CHUNKS>
cudaError_t launch_rmsnorm_quant(const RmsNormQuantParams& rp, const LaunchOptions& opt) {
  const int num_chunks = rp.quant.hidden / kElemsPerThread;
  if ((CHUNKS == 2) != (num_chunks > kRmsNormMaxTeam)) return cudaErrorInvalidValue;
  int team = kRmsNormMaxTeam;
  if (CHUNKS == 1) {
    team = 1;
    while (team < num_chunks && team < 32) team *= 2;
    if (num_chunks > 32) team = (num_chunks + 31) / 32 * 32;
  }
  const int threads = team >= 32 ? team : kRmsNormSmallTeamBlock;
  const int rows_per_block = threads / team;
  const int64_t num_rows = rp.quant.num_rows();
  const int64_t blocks_needed = (num_rows + rows_per_block - 1) / rows_per_block;
  constexpr auto kernel = rmsnorm_quant_kernel<T, R, GS, SK, CHUNKS>;
  int64_t grid = 0;
  const cudaError_t err = capped_grid<kernel>(blocks_needed, threads, 0, opt, grid);
  if (err != cudaSuccess) return err;
  RmsNormKernelArgs args;
  args.p = rp;
  args.num_rows = static_cast<int32_t>(num_rows);
  args.team = team;
  return launch_kernel(kernel, grid, threads, 0, opt, args);
}

// Every variant of one group size: {bf16, fp16} x {fp8, int8} x {3 scale kinds} x {1, 2 chunks}.
#define SGLQ_FOR_EACH_RMSNORM_VARIANT(GS, X)                  \
  X(__nv_bfloat16, Fp8Range, GS, ScaleKind::kFloat, 1)        \
  X(__nv_bfloat16, Fp8Range, GS, ScaleKind::kFloat, 2)        \
  X(__nv_bfloat16, Fp8Range, GS, ScaleKind::kFloatUE8M0, 1)   \
  X(__nv_bfloat16, Fp8Range, GS, ScaleKind::kFloatUE8M0, 2)   \
  X(__nv_bfloat16, Fp8Range, GS, ScaleKind::kPackedUE8M0, 1)  \
  X(__nv_bfloat16, Fp8Range, GS, ScaleKind::kPackedUE8M0, 2)  \
  X(__nv_bfloat16, Int8Range, GS, ScaleKind::kFloat, 1)       \
  X(__nv_bfloat16, Int8Range, GS, ScaleKind::kFloat, 2)       \
  X(__nv_bfloat16, Int8Range, GS, ScaleKind::kFloatUE8M0, 1)  \
  X(__nv_bfloat16, Int8Range, GS, ScaleKind::kFloatUE8M0, 2)  \
  X(__nv_bfloat16, Int8Range, GS, ScaleKind::kPackedUE8M0, 1) \
  X(__nv_bfloat16, Int8Range, GS, ScaleKind::kPackedUE8M0, 2) \
  X(__half, Fp8Range, GS, ScaleKind::kFloat, 1)               \
  X(__half, Fp8Range, GS, ScaleKind::kFloat, 2)               \
  X(__half, Fp8Range, GS, ScaleKind::kFloatUE8M0, 1)          \
  X(__half, Fp8Range, GS, ScaleKind::kFloatUE8M0, 2)          \
  X(__half, Fp8Range, GS, ScaleKind::kPackedUE8M0, 1)         \
  X(__half, Fp8Range, GS, ScaleKind::kPackedUE8M0, 2)         \
  X(__half, Int8Range, GS, ScaleKind::kFloat, 1)              \
  X(__half, Int8Range, GS, ScaleKind::kFloat, 2)              \
  X(__half, Int8Range, GS, ScaleKind::kFloatUE8M0, 1)         \
  X(__half, Int8Range, GS, ScaleKind::kFloatUE8M0, 2)         \
  X(__half, Int8Range, GS, ScaleKind::kPackedUE8M0, 1)        \
  X(__half, Int8Range, GS, ScaleKind::kPackedUE8M0, 2)

#define SGLQ_RMSNORM_LAUNCHER_SIGNATURE(T, R, GS, SK, CHUNKS) \
  cudaError_t launch_rmsnorm_quant<T, R, GS, SK, CHUNKS>(const RmsNormQuantParams&, const LaunchOptions&);
#define SGLQ_INSTANTIATE_RMSNORM_LAUNCHER(T, R, GS, SK, CHUNKS) template SGLQ_RMSNORM_LAUNCHER_SIGNATURE(T, R, GS, SK, CHUNKS)
#define SGLQ_DECLARE_RMSNORM_LAUNCHER(T, R, GS, SK, CHUNKS) extern template SGLQ_RMSNORM_LAUNCHER_SIGNATURE(T, R, GS, SK, CHUNKS)

}  // namespace sgl_quant
