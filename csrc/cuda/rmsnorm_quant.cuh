// The fused (add +) RMSNorm -> 8-bit quantization kernel (docs/spec.md §6; per token / per tensor: §8.3; the
// launchers are in rmsnorm_launch.cuh).
//
// Per row of H elements (T = bf16/fp16, all fp32 steps IEEE, round to nearest even, no flushing):
//   z_i = float(x_i) + float(r_i), r_i <- T(z_i)       (with residual; else z_i = float(x_i))
//   ss  = sum of z_i^2 in the fixed order below
//   inv = 1 / sqrt(ss / H + norm_eps)                  (division, add, sqrt, division)
//   n_i = T((z_i * inv) * float(w_i))                  (output_normed_i <- n_i)
//   codes and scales: §1 on v = float(n), by the v2 per-group code (quantize_words), so they are
//   the bytes v2 gives for output_normed.
//
// The summation order of ss depends on H only (not on M, the launch shape, the group size or the
// layout), so a row's bytes depend on that row alone, and the CPU implementation repeats it:
//   q_u = fma(z_{8u+7}, z_{8u+7}, ... fma(z_{8u}, z_{8u}, +0))   for each 8-element (16-byte) vector u
//   ss  = pairwise sum of q_0 .. q_{H/8-1}: adjacent pairs first, then pairs of pairs, ..., the count
//         padded with +0 to a power of two (x + 0 = x: the padding changes nothing).
//
// Work decomposition: a row belongs to a team of threads; thread t holds chunk c = t (and c = t + k * team,
// k < CHUNKS, with CHUNKS = 2 or 4 chunks per thread, as the launchers choose: H > 16384, long calls of
// H > 8192, calls without residual; the team is then the power of two of 1/CHUNKS of the padded chunk
// count), 16 elements laid out as in v2 so that
// quantize_words applies unchanged: group g = c / L, L = GS / 16 threads per group, lane j = c % L,
// elements [g*GS + j*8, +8) (vector u1) and [g*GS + GS/2 + j*8, +8) (vector u2). The pairwise tree
// then falls out of the thread layout, one bit of the vector index at a time: the low log2(L) bits are
// lane bits (shuffles on both vectors), the next bit is u1 + u2 in the thread, the bits above are the
// remaining lane bits (shuffles), then the warp index (a 32-lane butterfly over the warps' sums, from
// shared memory, padded with zeros), then the chunk k (the team being a power of two, each chunk k
// covers an aligned 1/CHUNKS of the padded tree: the chunks' sums are added pairwise).
// Teams: up to 32 chunks, a power-of-two slice of a warp (several rows per 128-thread block); more, a
// whole block of ceil(chunks / 32) warps, one row at a time, or, for calls of few long rows, a cluster
// of C blocks (thread-block cluster, SM90+) of ceil(chunks / C / 32) warps each on C SMs: block rank b
// holds chunks [b * team, (b + 1) * team). Every warp then writes its sum into every block's shared
// memory (distributed shared memory, st.async on a transaction barrier), so each block combines the same
// warp sums in the same pairwise order as one block would (butterfly_sum; tree_of_warp_sums in the
// clustered kernel, the same sum computed in registers): the bytes are the same for every C
// (auto_rmsnorm_cluster says when it pays).
// Threads past the last chunk hold zeros.
// Staged rows (kStaged, output_normed calls of 3-5 rounds of resident blocks): one chunk per thread, a
// block per row, but a grid of resident blocks looping over the rows, each block's next rows copied into
// its shared memory by the bulk-copy engine while it works on the current one; the same chunks, order and
// code as above, only the loads read shared memory.
#pragma once

#include "launch.cuh"
#include "sm90_async.cuh"

namespace sgl_quant {

constexpr int kRmsNormSmallTeamBlock = 128;  // block of several small (<= 32 thread) teams
constexpr int kRmsNormMaxTeam = 1024;
constexpr int kRmsNormMaxCluster = 8;        // the portable cluster size limit
constexpr int kRmsNormStageHeader = 128;     // kStaged: the stage barriers' bytes before the stages
constexpr int kRmsNormMaxStages = kRmsNormStageHeader / 8;
// kFourChunksNoResidual's launch bound: 72 registers, 7 blocks of 128 threads (H = 7168) per SM. Within 64
// registers (1024 threads) sm_100a spilled; four chunks of H <= 32768 take at most 512 threads.
constexpr int kRmsNormFourChunksMaxThreads = 896;

struct RmsNormKernelArgs {
  // The kernel's arguments fill two 64-byte constant lines, and a block's first read of each waits for
  // it (a miss per SM and launch). The first 48 bytes share the line of the driver's word at 0x208 (the
  // parameters start at 0x210): everything the kernel reads before its row's loads, so that those wait
  // for one line, read at the top (before the PDL wait).
  const void* input;
  void* residual;        // null: no residual
  const void* weight;
  int64_t in_row_stride;  // of the input, in elements
  int32_t hidden;
  int32_t num_rows;
  int32_t team;    // threads of a block per row: a power of two <= 32, or blockDim.x (a multiple of 32)
  // Three small fields in one word, so that the prologue divides nothing at run time: team_log2 (bits 0-7): log2(team) below 32, else 10, so that
  // threadIdx.x (< 1024) % and / by it are the thread's index in its team and its row in the block;
  // rows_per_block (8-15): blockDim.x / team (<= 128); cluster (16-23): blocks per row (1: none, else a
  // thread-block cluster of that many; one chunk per thread only).
  uint32_t shape;
  // The second line (64 bytes): what the kernel needs after the row's reduction (and the kStaged kernel's
  // stage count, read once per block).
  void* output_q;
  void* output_s;
  void* output_normed;     // null: not stored
  int64_t s_row_stride;    // scale strides, in elements of output_s (as QuantParams)
  int64_t s_group_stride;
  int32_t groups_per_row;
  float eps;
  float norm_eps;
  int32_t prefetch_rows;  // kPrefetch kernels: how far ahead a block prefetches rows into L2 (one round)
  int32_t stages;         // kStaged kernels: rows of a block in flight into its shared memory (<= kRmsNormMaxStages)
  ScaleKind scale_kind;   // fp32 scales (rounded or not) or packed UE8M0 words (quantize_words)
  // A third line, read by the per-token / per-tensor kernels only (SCALED; docs/spec.md §8.3): output_s then
  // holds one fp32 scale per row (kPerToken, stride s_row_stride), or `scale` is the static one.
  const float* scale;  // kPerToken: scale_ub (null: none); kPerTensorStatic: the scale
  Granularity granularity;

  __host__ __device__ int team_log2() const { return static_cast<int>(shape & 0xffu); }
  __host__ __device__ int rows_per_block() const { return static_cast<int>((shape >> 8) & 0xffu); }
  __host__ __device__ int cluster() const { return static_cast<int>((shape >> 16) & 0xffu); }
};
static_assert(offsetof(RmsNormKernelArgs, output_q) == 48 && offsetof(RmsNormKernelArgs, scale) == 112,
              "the prologue's fields fill the first constant line, the group codes' the second");

// Sum of v over the lanes whose index differs in the bits of [from, to) (powers of two <= 32), lowest
// bit first: one level of the pairwise tree per bit. Every lane of the warp must call it.
__device__ __forceinline__ float butterfly_sum(float v, int from, int to) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    if (o >= from && o < to) v = ieee_add(v, __shfl_xor_sync(0xffffffffu, v, o));
  }
  return v;
}

// The same sum as butterfly_sum over 32 lanes holding the first n of P warp sums (P a power of two,
// 8..32, n <= P; the other lanes +0), but computed by every lane on its own: the P sums read from shared
// memory with broadcast 16-byte loads (slots from n on taken as +0) and added level by level in
// registers, v[i] += v[i + stride]. Warp sums are never -0, so the all-zero levels above P change
// nothing. Clustered rows only: there it saves the shuffles' latency (2-4% at M=1, H=7168), whereas in
// the whole-block kernel it was slower.
template <int P>
__device__ __forceinline__ float tree_of_warp_sums(const float* sums, int n) {
  float v[P];
#pragma unroll
  for (int i = 0; i < P / 4; ++i) {
    const float4 f = reinterpret_cast<const float4*>(sums)[i];
    v[4 * i] = 4 * i < n ? f.x : 0.0f;
    v[4 * i + 1] = 4 * i + 1 < n ? f.y : 0.0f;
    v[4 * i + 2] = 4 * i + 2 < n ? f.z : 0.0f;
    v[4 * i + 3] = 4 * i + 3 < n ? f.w : 0.0f;
  }
#pragma unroll
  for (int stride = 1; stride < P; stride *= 2) {
#pragma unroll
    for (int i = 0; i < P; i += 2 * stride) v[i] = ieee_add(v[i], v[i + stride]);
  }
  return v[0];
}

// The weight's two vectors at a chunk's element offsets.
template <typename T>
__device__ __forceinline__ void load_weight(const void* weight, const int (&offset)[2], uint4 (&w)[2]) {
  w[0] = load_input_vec(static_cast<const T*>(weight) + offset[0]);
  w[1] = load_input_vec(static_cast<const T*>(weight) + offset[1]);
}

// How a kernel schedules its rows (rmsnorm_quant_kernel's template argument S; the launcher picks one per
// call). Each schedule is a kernel of its own: the mere code of a runtime switch rescheduled the one-pass
// kernel and slowed the small calls (the prefetch as a switch: M=1 H=7168 4-6% slower).
enum class RmsNormSchedule : int {
  // One chunk per thread; the grid has a block per row group (or a slice of a block per row: teams of up
  // to 32 chunks), and each block's loop body runs once.
  kOnePass,
  // Two chunks per thread (rows of more than 16384 elements, long calls of H > 8192: launch_rmsnorm_quant);
  // blocks loop over the row groups under a grid of opt.waves rounds of resident blocks.
  kTwoChunks,
  // kOnePass with a block per row, for long calls (kRmsNormPrefetchMinRounds): once the block has read and
  // reduced its row, thread 0 prefetches the x and residual rows of the block that will take this block's
  // place one round of resident blocks later into L2, so that DRAM keeps streaming while the resident
  // blocks normalize and store (M=16384 H=7168: 6% faster; issued at the row's start or two rounds
  // ahead: slower).
  kPrefetch,
  // kOnePass in thread-block clusters of args.cluster() > 1 blocks sharing a row (SM90+), whose warp sums
  // are added by tree_of_warp_sums.
  kClustered,
  // One chunk per thread, a block per row, a grid of resident blocks looping over the rows (SM90+): the
  // block's next args.stages rows are copied into its shared memory by the bulk-copy engine (thread 0
  // issues a row's x and residual as two copies on the row's stage barrier), so that its loads of a row
  // are shared-memory reads and DRAM streams while the block reduces, normalizes and stores.
  kStaged,
  // Two or four chunks per thread for per-token / per-tensor calls without residual (SCALED), looping as
  // kTwoChunks: a thread keeps its chunks' input words rather than their fp32 values (z = float(x)), so
  // that blocks of fewer threads fit the registers and more rows share an SM (launch_rmsnorm_scaled_quant).
  kTwoChunksNoResidual,
  kFourChunksNoResidual,
};

// WAIT_AT_ROW (one-chunk kernels from global memory: kOnePass, kPrefetch, kClustered; the launcher's choice
// for PDL launches): the PDL wait comes at the row's loads instead of the kernel's top (see there).
// SCALED: per-token / per-tensor codes of the normed row (docs/spec.md §8.3; kOnePass, kTwoChunks, kPrefetch and
// the input-word schedules, one block per row or several rows per block, never in clusters), else per-group ones
// (quantize_words).
template <typename T, typename R, int GS, RmsNormSchedule S, bool WAIT_AT_ROW = false, bool SCALED = false>
__global__ void __launch_bounds__(S == RmsNormSchedule::kFourChunksNoResidual ? kRmsNormFourChunksMaxThreads
                                                                             : kRmsNormMaxTeam)
rmsnorm_quant_kernel(const RmsNormKernelArgs args) {
  constexpr bool kInputOnly = S == RmsNormSchedule::kTwoChunksNoResidual || S == RmsNormSchedule::kFourChunksNoResidual;
  constexpr int kChunks = S == RmsNormSchedule::kFourChunksNoResidual ? 4
                          : S == RmsNormSchedule::kTwoChunks || kInputOnly ? 2 : 1;  // chunks per thread
  constexpr bool kPrefetch = S == RmsNormSchedule::kPrefetch;
  constexpr bool kClustered = S == RmsNormSchedule::kClustered;
  constexpr bool kStaged = S == RmsNormSchedule::kStaged;
  static_assert(!WAIT_AT_ROW || (kChunks == 1 && !kStaged), "a row wait needs one pass over the row from global memory");
  static_assert(!SCALED || (!kClustered && !kStaged), "per-token codes reduce the row's amax within one block");
  constexpr int L = GS / kElemsPerThread;
  const int team = args.team;
  const int team_log2 = args.team_log2();
  // blocks per row: the launcher runs the kClustered kernel for every launch in clusters, and only there
  const int cluster = kClustered ? args.cluster() : 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  if (cluster > 1) __trap();  // no cluster instructions in this code (the launcher never asks for them here)
#endif
  const int rank = kClustered ? cluster_rank() : 0;   // this block's share of the row (cluster rank)
  const int t = rank * team + (threadIdx.x & ((1 << team_log2) - 1));  // this thread's chunk in its row
  const int lane = t % L;            // its index in its group's sub-warp (teams are multiples of L)
  const int rows_per_block = args.rows_per_block();
  const int num_chunks = args.hidden / kElemsPerThread;
  const int warp = threadIdx.x / 32, warp_lane = threadIdx.x % 32;
  const int row_warps = team >= 32 ? team / 32 * cluster : 1;  // warps per row (whole warps), at most 32
  auto warp_sum_slot = [&] { return rank * (team / 32) + warp; };  // this warp's place in its row's warp sums
  // Warp sums, indexed by the warp's place in the row (rank * team / 32 + warp); two buffers, so that
  // alternate rows of a looping block reuse neither early: a warp writes its sum for row i + 2 into
  // buffer i % 2 only after the barrier of row i + 1, which it reaches after reading row i's.
  __shared__ alignas(16) float warp_sums[2][kChunks][kRmsNormMaxTeam / 32];  // 16: tree_of_warp_sums
  // Clusters take one row group each (one chunk per thread: one pass), so the exchange's transaction
  // barrier completes a single phase (0).
  __shared__ alignas(8) uint64_t sums_bar;

  // SCALED: the third constant line's fields, read here (a constant-line miss in the epilogue would sit on the
  // row's chain); the scale they point to (static, or scale_ub) is loaded with the row.
  const float* const scale_ptr = SCALED ? args.scale : nullptr;
  const bool static_scale = SCALED && args.granularity == Granularity::kPerTensorStatic;
  float scale_value = __uint_as_float(kNonFiniteBits);  // no scale_ub: +Inf bounds nothing

  // kStaged: the stages' barriers, then the stages (128-byte aligned), each a row of x then one of residual.
  extern __shared__ __align__(128) uint8_t rms_staged_rows[];
  uint64_t* const stage_bars = reinterpret_cast<uint64_t*>(rms_staged_rows);
  const uint32_t row_bytes = static_cast<uint32_t>(args.hidden) * sizeof(T);
  auto stage_of = [&](int s) {  // stage s's row of x (its row of residual follows)
    return reinterpret_cast<T*>(rms_staged_rows + kRmsNormStageHeader) + static_cast<int64_t>(s) * args.hidden * 2;
  };
  // a row's x and residual in global memory (the residual row: with a residual only)
  auto input_row_of = [&args](int row) {
    return static_cast<const T*>(args.input) + static_cast<int64_t>(row) * args.in_row_stride;
  };
  auto residual_row_of = [&args](int row) { return static_cast<T*>(args.residual) + static_cast<int64_t>(row) * args.hidden; };
  auto stage_row = [&](int row, int s) {  // thread 0: row's x and residual into stage s
    mbar_arrive_expect_tx(&stage_bars[s], args.residual ? 2 * row_bytes : row_bytes);
    bulk_copy_to_shared(stage_of(s), input_row_of(row), row_bytes, &stage_bars[s]);
    if (args.residual) {
      bulk_copy_to_shared(stage_of(s) + args.hidden, residual_row_of(row), row_bytes, &stage_bars[s]);
    }
  };

  if (cluster > 1 && threadIdx.x == 0) {
    mbar_init(&sums_bar, 1);
    fence_mbar_init();
  }
  if constexpr (kStaged) {
    if (threadIdx.x == 0) {
      for (int s = 0; s < args.stages; ++s) mbar_init(&stage_bars[s], 1);
      fence_mbar_init();
    }
    __syncthreads();
  }
  // Input and residual may come from the previous kernel: the PDL wait comes before their loads. Here, at
  // the top, unless WAIT_AT_ROW: then at the row, once its addresses are known, so that with PDL the index
  // math and the arguments' constant loads overlap the producer's end (v2's pdl_wait_for_producer_after).
  // Launches without PDL keep it here, where it costs nothing: at the row it lengthened their path to the
  // first load (H100, no PDL, H=7168: M=64 and M=256 2-3% slower).
  if constexpr (!WAIT_AT_ROW) {
    pdl_wait_for_producer();
    pdl_allow_dependents();
  }
  // kStaged: the block's first rows into its stages (rows blockIdx.x + s * gridDim.x), then this thread's
  // weight vectors, read once (its chunk is the same in every row; like the rows, after the PDL wait).
  int stage = 0;
  uint32_t stage_parity = 0;
  uint4 staged_weight[2] = {};
  if constexpr (kStaged) {
    if (threadIdx.x == 0) {
      for (int s = 0; s < args.stages; ++s) {
        const int row = blockIdx.x + s * gridDim.x;
        if (row < args.num_rows) stage_row(row, s);
      }
    }
    const int c = threadIdx.x;
    if (c < num_chunks) {
      const int chunk_offset[2] = {c / L * GS + c % L * 8, c / L * GS + c % L * 8 + GS / 2};
      load_weight<T>(args.weight, chunk_offset, staged_weight);
    }
  }
  int parity = 0;
  auto normed_row_at = [&args](int64_t row_elems) {  // output_normed's row that starts at element row_elems
    return args.output_normed ? static_cast<T*>(args.output_normed) + row_elems : nullptr;
  };
  // The loop bound is uniform over the cluster, so every warp reaches the shuffles and barriers together.
  // One chunk per thread: the grid has a block (cluster) per row group, so the body runs once (faster at
  // every M than a grid-stride loop). Two chunks per thread keep the loop over a capped grid.
  // Clustered launches have a 2-D grid (cluster, row groups): blockIdx.x is the rank. (%clusterid.x is
  // no special register on sm_90: ptxas computes blockIdx.x / cluster in floats from a reciprocal in the
  // driver's constant line 0x140, whose miss then came before the row's loads.)
  const int row_group = kClustered ? blockIdx.y : blockIdx.x, row_groups = kClustered ? gridDim.y : gridDim.x;
  for (int first = row_group * rows_per_block; first < args.num_rows;
       first = kChunks == 1 && !kStaged ? args.num_rows : first + row_groups * rows_per_block) {
    const int row = first + static_cast<int>(threadIdx.x >> team_log2);
    const bool row_valid = row < args.num_rows;
    const T* x_row = input_row_of(row);
    T* res_row = !kInputOnly && args.residual ? residual_row_of(row) : nullptr;
    // One chunk: the stores' offsets (row * H for the codes and output_normed, the scale's byte offset) are
    // computed between the row's loads and their first use, where they cost nothing while the loads are in
    // flight, instead of after the reduction, on the row's chain (where, at M=256, every warp of the SM
    // issues at once: ncu, H100, 437 instructions per warp, 55% of the active cycles issuing). An empty asm
    // pins them there (the compiler would sink them to their use, past the branches between); offsets
    // rather than pointers, so that the stores stay global stores (STG: a pinned pointer made them
    // generic). Their fields sit in the second constant line, read after the loads are issued. Two chunks:
    // short of registers, they compute them at the stores.
    constexpr bool kStoresEarly = kChunks == 1;
    int64_t row_elems = static_cast<int64_t>(row) * args.hidden, s_offset = 0;
    // A block per row (one chunk, no cluster): the shared-memory addresses of the warp-sum exchange (this
    // warp's slot, this lane's slot to read) are computed there too, so that the exchange after the
    // reduction is a store, the barrier and a load (with the early stores: 1.5-3% at M = 1 ... 256 in both
    // launch modes, H100). Not in the kStaged kernel, where it was slower.
    constexpr bool kSumsEarly = kStoresEarly && !kClustered && !kStaged;
    uint32_t sum_store = 0, sum_load = 0;
    // output_normed's row (second constant line): two-chunk kernels read the second line at their top
    // anyway (loop invariants), and computing it here keeps them within 64 registers (after the reduction,
    // ptxas spilled 16 bytes); one-chunk kernels compute it after the reduction, from the pinned row_elems.
    constexpr bool kNormedRowEarly = kChunks > 1;
    T* normed_row = kNormedRowEarly ? normed_row_at(row_elems) : nullptr;
    auto task_of = [&](int k) {  // chunk k's group: where its codes and scale go
      const int g = (t + k * team) / L;
      Task<T> task;
      task.src = nullptr;
      task.dst = static_cast<uint8_t*>(args.output_q) + row_elems + g * GS;
      task.s_row = static_cast<int64_t>(row) * args.s_row_stride;
      task.g = g;
      return task;
    };

    float z[kChunks][16];
    bool valid[kChunks];
    int offset[kChunks][2];  // element offsets of the chunk's two vectors in the row
    // The weight is loaded with the row, so that its latency hides behind theirs, where registers allow
    // (one chunk: 58 registers; two chunks of input words 64; kTwoChunks would spill, and four chunks need
    // their registers for the input words, so they load it after the reduction).
    constexpr bool kWeightWithRow = kChunks == 1 || S == RmsNormSchedule::kTwoChunksNoResidual;
    uint4 wv[kChunks][2];
    uint4 xin[kChunks][2];  // kInputOnly: the chunks' input words, kept instead of z
    float a[kChunks], b[kChunks];
#pragma unroll
    for (int k = 0; k < kChunks; ++k) {
      const int c = t + k * team;
      valid[k] = row_valid && c < num_chunks;
      const int g = c / L;
      offset[k][0] = g * GS + lane * 8;
      offset[k][1] = offset[k][0] + GS / 2;
      uint4 xv[2] = {}, rv[2] = {};
      wv[k][0] = wv[k][1] = make_uint4(0, 0, 0, 0);
      if constexpr (kStaged) mbar_wait_parity(&stage_bars[stage], stage_parity);
      if constexpr (WAIT_AT_ROW) {  // (every block waits: one-chunk grids have no block past the last row)
        pdl_wait_for_producer_after(x_row + offset[k][0], res_row + offset[k][0]);
        pdl_allow_dependents();
      }
      if (valid[k]) {
        const T* x_src = x_row;
        const T* r_src = res_row;
        if constexpr (kStaged) x_src = stage_of(stage), r_src = x_src + args.hidden;
        xv[0] = load_input_vec(x_src + offset[k][0]);
        xv[1] = load_input_vec(x_src + offset[k][1]);
        if (res_row != nullptr) {
          rv[0] = *reinterpret_cast<const uint4*>(r_src + offset[k][0]);
          rv[1] = *reinterpret_cast<const uint4*>(r_src + offset[k][1]);
        }
        if constexpr (kStaged) {
          wv[k][0] = staged_weight[0], wv[k][1] = staged_weight[1];
        } else if (kWeightWithRow) {
          load_weight<T>(args.weight, offset[k], wv[k]);
        }
        if (SCALED && k == 0 && scale_ptr != nullptr) scale_value = *scale_ptr;
      }
      xin[k][0] = xv[0], xin[k][1] = xv[1];
      if (cluster > 1 && k == 0) cluster_arrive_relaxed();  // this block has started (see there); once: one pass
      if constexpr (kStoresEarly) {
        s_offset = scale_byte_offset<ScaleStore::kEither>(args, task_of(0));
        asm volatile("" : "+l"(row_elems), "+l"(s_offset));
      }
      if constexpr (kSumsEarly) {
        sum_store = shared_addr(&warp_sums[parity][0][warp_sum_slot()]);
        sum_load = shared_addr(&warp_sums[parity][0][warp_lane]);
        asm volatile("" : "+r"(sum_store), "+r"(sum_load));
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

    // ss: the pairwise tree over the vectors (see the header comment).
    float ss = 0.0f;
    if constexpr (kChunks == 1) {
      constexpr int k = 0;
      float s = ieee_add(butterfly_sum(a[k], 1, L), butterfly_sum(b[k], 1, L));
      s = butterfly_sum(s, L, team < 32 ? team : 32);
      if (team > 32 || cluster > 1) {  // one row per block or cluster: combine the row's warps
        float* sums = warp_sums[parity][k];
        const int slot = warp_sum_slot();
        if (cluster == 1) {
          if (warp_lane == 0) {
            if constexpr (kSumsEarly) st_shared_f32(sum_store, s); else sums[slot] = s;
          }
          __syncthreads();
        } else {
          cluster_wait();  // every block of the cluster runs: its shared memory exists
          // one arrival (this block's, with the row's byte count) and the row's warp sums complete the phase
          if (threadIdx.x == 0) mbar_arrive_expect_tx(&sums_bar, row_warps * 4);
          if (warp_lane < cluster) st_async_to_cluster_block(&sums[slot], &sums_bar, warp_lane, s);  // lane b: block b's copy
          mbar_wait_parity(&sums_bar, 0);
        }
        if constexpr (kClustered) {
          s = row_warps <= 8 ? tree_of_warp_sums<8>(sums, row_warps)
              : row_warps <= 16 ? tree_of_warp_sums<16>(sums, row_warps) : tree_of_warp_sums<32>(sums, row_warps);
        } else {
          float v = 0.0f;
          if (warp_lane < row_warps) v = kSumsEarly ? ld_shared_f32(sum_load) : sums[warp_lane];
          s = butterfly_sum(v, 1, 32);
        }
      }
      ss = s;
    } else {
      // several chunks per thread: a block per row (team >= 32, no clusters), the chunks' warp sums through
      // shared memory behind one barrier; chunk k's sum is an aligned part of the padded tree, so the
      // chunks' sums are added pairwise.
      float s[kChunks];
#pragma unroll
      for (int k = 0; k < kChunks; ++k) {
        s[k] = butterfly_sum(ieee_add(butterfly_sum(a[k], 1, L), butterfly_sum(b[k], 1, L)), L, 32);
      }
      if (team > 32) {
        if (warp_lane == 0) {
#pragma unroll
          for (int k = 0; k < kChunks; ++k) warp_sums[parity][k][warp] = s[k];
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kChunks; ++k) s[k] = butterfly_sum(warp_lane < row_warps ? warp_sums[parity][k][warp_lane] : 0.0f, 1, 32);
      }
#pragma unroll
      for (int w = 1; w < kChunks; w *= 2) {
#pragma unroll
        for (int k = 0; k < kChunks; k += 2 * w) s[k] = ieee_add(s[k], s[k + w]);
      }
      ss = s[0];
    }
    parity ^= 1;
    if constexpr (kPrefetch) {  // a block per row (rows_per_block == 1, cluster == 1)
      const int ahead = first + args.prefetch_rows;
      if (threadIdx.x == 0 && ahead < args.num_rows) {
        prefetch_to_l2(input_row_of(ahead), row_bytes);
        if (args.residual) prefetch_to_l2(residual_row_of(ahead), row_bytes);
      }
    }
    if constexpr (kStaged) {  // every thread has read this stage (the barrier of the warp sums): refill it
      const int next = first + args.stages * row_groups;
      if (threadIdx.x == 0 && next < args.num_rows) {
        fence_proxy_async_shared();
        stage_row(next, stage);
      }
      if (++stage == args.stages) stage = 0, stage_parity ^= 1;
    }
    const float inv = ieee_div(1.0f, ieee_sqrt(ieee_add(ieee_div(ss, static_cast<float>(args.hidden)), args.norm_eps)));
    if constexpr (!kNormedRowEarly) normed_row = normed_row_at(row_elems);

    uint32_t kept[kChunks][8];  // SCALED: the chunks' normed values, until the row's scale is known
    uint32_t amax = 0;          // SCALED: the largest |n| of this thread's chunks (fp32 bits)
#pragma unroll
    for (int k = 0; k < kChunks; ++k) {
      if (!kWeightWithRow && valid[k]) {
        // The weight's addresses do not depend on the row: ptxas would hoist them out of the row loop
        // and, at this kernel's 64 registers, spill them. An empty asm makes the offsets opaque per row.
        asm volatile("" : "+r"(offset[k][0]), "+r"(offset[k][1]));
        load_weight<T>(args.weight, offset[k], wv[k]);
      }
      uint32_t n[8];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t ww[4] = {wv[k][h].x, wv[k][h].y, wv[k][h].z, wv[k][h].w};
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const float2 w = Pack2<T>::to_float2(ww[m]);
          uint32_t x_word = reinterpret_cast<const uint32_t*>(&xin[k][h])[m];
          // opaque, so that ptxas converts the word anew rather than keeping z through the reduction (sm_100a
          // spilled the four-chunk kernel)
          if constexpr (kInputOnly) asm volatile("" : "+r"(x_word));
          const float2 x2 = Pack2<T>::to_float2(x_word);
          const float zx = kInputOnly ? x2.x : z[k][h * 8 + 2 * m], zy = kInputOnly ? x2.y : z[k][h * 8 + 2 * m + 1];
          n[h * 4 + m] = Pack2<T>::from_float2(make_float2(ieee_mul(ieee_mul(zx, inv), w.x), ieee_mul(ieee_mul(zy, inv), w.y)));
        }
        if (normed_row != nullptr && valid[k]) {
          *reinterpret_cast<uint4*>(normed_row + offset[k][h]) = make_uint4(n[h * 4], n[h * 4 + 1], n[h * 4 + 2], n[h * 4 + 3]);
        }
      }
      if constexpr (SCALED) {
#pragma unroll
        for (int j = 0; j < 8; ++j) kept[k][j] = n[j];
        if (valid[k]) amax = max(amax, abs_max_bits<T, 8>(n));
      } else if constexpr (kStoresEarly) {
        quantize_words<T, R, GS, ScaleStore::kEither, 8, true>(args, task_of(k), lane, valid[k], n, s_offset);
      } else {
        quantize_words<T, R, GS, ScaleStore::kEither>(args, task_of(k), lane, valid[k], n);
      }
    }
    if constexpr (SCALED) {
      // docs/spec.md §8.1 on v = float(n): per token the row's amax (its team's lanes, then, for a block per
      // row, its warps through shared memory), per tensor the caller's scale; then the codes of the chunks.
      __shared__ uint32_t warp_amax[2][kRmsNormMaxTeam / 32];  // alternate rows: as warp_sums
      float s, y;
      bool finite;
      if (static_scale) {
        s = scale_value;
        finite = usable_static_scale(s);
      } else {
        for (int o = 1; o < (team < 32 ? team : 32); o <<= 1) amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        if (team > 32) {
          if (warp_lane == 0) warp_amax[parity][warp] = amax;
          __syncthreads();
          for (int i = 0; i < row_warps; ++i) amax = max(amax, warp_amax[parity][i]);
        }
        finite = amax < kNonFiniteBits;
        s = symmetric_scale(__uint_as_float(amax), scale_value, args.eps, R::kMax);
        if (t == 0 && row_valid) {
          static_cast<float*>(args.output_s)[row * args.s_row_stride] = finite ? s : __uint_as_float(kNanBits);
        }
      }
      y = ieee_div(1.0f, s);
      constexpr uint32_t nan_word = R::kIsFp8 ? 0x7f7f7f7fu : 0u;  // fp8 NaN codes; int8 has none: 0
      uint8_t* const codes = static_cast<uint8_t*>(args.output_q) + row_elems;
#pragma unroll
      for (int k = 0; k < kChunks; ++k) {
        if (!valid[k]) continue;
        const CodeWords<4> c = finite ? encode_words<T, R, 8, true>(kept[k], y) : CodeWords<4>::filled(nan_word);
        *reinterpret_cast<uint2*>(codes + offset[k][0]) = make_uint2(c.v[0], c.v[1]);
        *reinterpret_cast<uint2*>(codes + offset[k][1]) = make_uint2(c.v[2], c.v[3]);
      }
    }
  }
}

}  // namespace sgl_quant
