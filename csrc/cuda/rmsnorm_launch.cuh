// The fused (add +) RMSNorm -> quantization launchers (docs/spec.md §6, §8.3): which schedule of
// rmsnorm_quant_kernel a call runs (rmsnorm_quant.cuh), its launch shape, and the instantiation macros.
#pragma once

#include "rmsnorm_quant.cuh"

namespace sgl_quant {

// Blocks per row when the caller leaves it to us (opt.rmsnorm_cluster == 0): for rows of H >= 4096, a
// cluster of 4 while the calls' quarter-row blocks fit 2 to an SM (3 for H >= 6144), else one block per
// row. Quarter rows are small blocks (64-112 threads at H = 4096-7168) that share an SM well; past that
// one block of the whole row wins (a sweep of 1, 2 and 4 blocks per row over M and H = 2048 ... 7168:
// clusters of 4 gained 3-14% at M <= 64 with PDL, and lost at H = 2048 and where blocks queue).
inline int auto_rmsnorm_cluster(int64_t num_rows, int num_chunks, int num_sms) {
  if (num_chunks < 256) return 1;
  const int64_t quarter_blocks_per_sm = num_chunks >= 384 ? 3 : 2;
  return num_rows * 4 <= num_sms * quarter_blocks_per_sm ? 4 : 1;
}

// Warps of a one-chunk block that holds a 1/cluster share of a row of num_chunks (> 32) chunks.
inline int rmsnorm_warps_per_block(int num_chunks, int cluster) { return (num_chunks + 32 * cluster - 1) / (32 * cluster); }

// One-chunk calls prefetch (the kPrefetch kernel) when a block holds one row of H >= 4096 and the grid
// has at least this many rounds of resident blocks (below it, no gain was measured).
constexpr int kRmsNormPrefetchMinRounds = 8;

// Output_normed calls of 448-512 chunks per row (H = 7168-8192) and more than 3, at most 5 rounds of
// resident one-chunk blocks run the kStaged kernel with this many stages (launch_rmsnorm_quant): H100,
// M=1024 H=7168 with output_normed 11-12% faster than one chunk per thread in both launch modes. Not
// elsewhere: without output_normed it lost as often as it won, at 3 rounds or fewer it lost, and from DRAM
// it is ~10% slower (rows copied by the bulk-copy engine stream slower than the prefetching kernel's loads).
constexpr int kRmsNormAutoStages = 2;

// Lets `kernel` use as much dynamic shared memory as the device allows a block beside the kernel's static
// shared memory (set once per device), and returns that amount.
template <auto kernel>
cudaError_t dynamic_smem_limit(const LaunchOptions& opt, int& limit) {
  static PerDeviceInt cached;  // 0: not set yet
  limit = cached.get(opt.device);
  if (limit > 0) return cudaSuccess;
  cudaError_t err = cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, opt.device);
  if (err != cudaSuccess) return err;
  cudaFuncAttributes attr = {};
  err = cudaFuncGetAttributes(&attr, kernel);
  if (err != cudaSuccess) return err;
  limit -= static_cast<int>(attr.sharedSizeBytes);  // the opt-in maximum counts static and dynamic together
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, limit);
  if (err != cudaSuccess) return err;
  cached.set(opt.device, limit);
  return cudaSuccess;
}

// The kStaged launch of one-chunk arguments (a block of `threads` > 32 per row) with opt.rmsnorm_stages
// stages: a grid of resident blocks, block b taking rows b, b + grid, ..., balanced so that blocks differ
// by at most one row. Nothing is launched (`launched` false) where the stages exceed the device's shared
// memory.
template <typename T, typename R, int GS>
cudaError_t launch_rmsnorm_quant_staged(RmsNormKernelArgs args, int64_t num_rows, int threads, const LaunchOptions& opt,
                                        bool& launched) {
  constexpr auto staged = rmsnorm_quant_kernel<T, R, GS, RmsNormSchedule::kStaged>;
  launched = false;
  args.stages = opt.rmsnorm_stages < kRmsNormMaxStages ? opt.rmsnorm_stages : kRmsNormMaxStages;
  // a stage holds a row of x and one of residual (unused without residual)
  const size_t smem = kRmsNormStageHeader + static_cast<size_t>(args.stages) * 2 * args.hidden * sizeof(T);
  int limit = 0;
  cudaError_t err = dynamic_smem_limit<staged>(opt, limit);
  if (err != cudaSuccess || smem > static_cast<size_t>(limit)) return err;
  int occupancy = 0;
  err = resident_blocks_per_sm<staged>(threads, smem, opt, occupancy);
  if (err != cudaSuccess) return err;
  int64_t grid = static_cast<int64_t>(opt.num_sms) * occupancy;
  if (grid > num_rows) grid = num_rows;
  const int64_t rows_each = (num_rows + grid - 1) / grid;
  grid = (num_rows + rows_each - 1) / rows_each;
  launched = true;
  return launch_kernel(staged, grid, threads, smem, opt, args);
}

// The one-chunk kernel of schedule S (kOnePass, kPrefetch, kClustered: from global memory) for a launch
// with or without PDL: PDL launches wait for the producer at the row (WAIT_AT_ROW: H100, PDL, H=7168,
// M=1 and 64 3-5% faster than waiting at the top), launches without PDL at the top (at the row: 2-3%
// slower there).
template <typename T, typename R, int GS, RmsNormSchedule S, bool SCALED = false>
auto one_chunk_kernel(bool pdl) {
  return pdl ? rmsnorm_quant_kernel<T, R, GS, S, true, SCALED> : rmsnorm_quant_kernel<T, R, GS, S, false, SCALED>;
}

// Launch shape and arguments of one call with CHUNKS chunks per thread (1 for H <= 16384 = 16 *
// kRmsNormMaxTeam, 2 for H >= 1024, 4 for H >= 2048); the launchers below pick CHUNKS. SCALED: per-token /
// per-tensor codes (no clusters, no staged rows). NO_RESIDUAL (SCALED calls without residual): the kernels that
// keep the input words (kTwoChunksNoResidual, kFourChunksNoResidual; four chunks only there).
template <typename T, typename R, int GS, int CHUNKS, bool SCALED, bool NO_RESIDUAL = false>
cudaError_t launch_rmsnorm_quant_kernel(const RmsNormQuantParams& rp, const LaunchOptions& requested) {
  static_assert(CHUNKS == 1 || CHUNKS == 2 || (CHUNKS == 4 && NO_RESIDUAL), "chunks per thread");
  static_assert(!NO_RESIDUAL || (SCALED && CHUNKS > 1), "the input-word kernels: per-token / per-tensor codes");
  const int num_chunks = rp.quant.hidden / kElemsPerThread;
  const int max_team = CHUNKS == 4 ? kRmsNormFourChunksMaxThreads : kRmsNormMaxTeam;
  if (CHUNKS == 1 ? num_chunks > kRmsNormMaxTeam : num_chunks < 32 * CHUNKS || num_chunks > CHUNKS * max_team) {
    return cudaErrorInvalidValue;
  }
  if (NO_RESIDUAL && rp.residual != nullptr) return cudaErrorInvalidValue;
  constexpr RmsNormSchedule schedule = CHUNKS == 4 ? RmsNormSchedule::kFourChunksNoResidual
                                       : CHUNKS == 1 ? RmsNormSchedule::kOnePass
                                       : NO_RESIDUAL ? RmsNormSchedule::kTwoChunksNoResidual : RmsNormSchedule::kTwoChunks;
  constexpr auto kernel = rmsnorm_quant_kernel<T, R, GS, schedule, false, SCALED>;
  const LaunchOptions opt = options_for<kernel>(requested);
  const int64_t num_rows = rp.quant.num_rows();
  int team = 1, cluster = 1;
  if (CHUNKS > 1) {
    while (team * CHUNKS < num_chunks) team *= 2;  // 1/CHUNKS of the chunk count padded to a power of two (>= 32)
  } else {
    while (team < num_chunks && team < 32) team *= 2;
    if (!SCALED && num_chunks > 32 && opt.clusters && num_rows <= kMaxClusterRows) {
      cluster = opt.rmsnorm_cluster > 0 ? opt.rmsnorm_cluster : auto_rmsnorm_cluster(num_rows, num_chunks, opt.num_sms);
    }
    // every block holds chunks, and the row's warps fit the 32 slots of the warp-sum butterfly
    for (; cluster > 1; --cluster) {
      const int warps = rmsnorm_warps_per_block(num_chunks, cluster);
      if ((cluster - 1) * warps * 32 < num_chunks && cluster * warps <= 32) break;
    }
    if (num_chunks > 32) team = rmsnorm_warps_per_block(num_chunks, cluster) * 32;
  }
  const int threads = team >= 32 ? team : kRmsNormSmallTeamBlock;
  const int rows_per_block = threads / team;
  const int64_t blocks_needed = (num_rows + rows_per_block - 1) / rows_per_block * cluster;
  int64_t grid = blocks_needed;  // one chunk per thread: a block (cluster) per row group, one pass
  if constexpr (CHUNKS > 1) {  // rounds of resident blocks (64: at two chunks a block per row up to ~33k rows of 7168)
    const cudaError_t err = capped_grid<kernel>(blocks_needed, threads, 0, opt.waves > 0 ? opt.waves : 64, opt, grid);
    if (err != cudaSuccess) return err;
  }
  RmsNormKernelArgs args;
  args.input = rp.quant.input;
  args.residual = rp.residual;
  args.weight = rp.weight;
  args.in_row_stride = rp.quant.in_row_stride;
  args.hidden = rp.quant.hidden;
  args.num_rows = static_cast<int32_t>(num_rows);
  args.team = team;
  const int team_log2 = team < 32 ? log2_of_power_of_two(team) : 10;
  args.shape = static_cast<uint32_t>(team_log2 | rows_per_block << 8 | cluster << 16);
  args.output_q = rp.quant.output_q;
  args.output_s = rp.quant.output_s;
  args.output_normed = rp.output_normed;
  args.s_row_stride = rp.quant.s_row_stride;
  args.s_group_stride = rp.quant.s_group_stride;
  args.groups_per_row = rp.quant.groups_per_row;
  args.eps = rp.quant.eps;
  args.norm_eps = rp.norm_eps;
  args.prefetch_rows = 0;
  args.stages = 0;
  args.scale_kind = rp.quant.scale_kind;
  args.scale = rp.scale;
  args.granularity = rp.granularity;
  if constexpr (CHUNKS == 1 && !SCALED) {
    if (cluster > 1) {
      return launch_kernel(one_chunk_kernel<T, R, GS, RmsNormSchedule::kClustered>(opt.pdl), grid, threads, 0,
                           opt, args, cluster);
    }
    if (opt.rmsnorm_stages > 0 && opt.clusters && rows_per_block == 1 && team > 32) {  // clusters: SM90 code
      bool launched = false;
      const cudaError_t err = launch_rmsnorm_quant_staged<T, R, GS>(args, num_rows, threads, opt, launched);
      if (err != cudaSuccess || launched) return err;
    }
  }
  if constexpr (CHUNKS == 1) {
    // (occupancy of the form without PDL; the row-wait form gets the same register allocation: sm_90a 52 / 52,
    // sm_100a 53 / 50 registers, both 56 allocated)
    constexpr auto prefetching = rmsnorm_quant_kernel<T, R, GS, RmsNormSchedule::kPrefetch, false, SCALED>;
    if (opt.clusters && rows_per_block == 1 && num_chunks >= 256 &&  // clusters: SM90 code, as the prefetch
        num_rows >= static_cast<int64_t>(opt.num_sms) * kRmsNormPrefetchMinRounds) {  // (resident >= SMs): no query for fewer
      int occupancy = 0;
      const cudaError_t err = resident_blocks_per_sm<prefetching>(threads, 0, opt, occupancy);
      if (err != cudaSuccess) return err;
      const int64_t resident = static_cast<int64_t>(opt.num_sms) * occupancy;
      if (num_rows >= resident * kRmsNormPrefetchMinRounds) {
        args.prefetch_rows = static_cast<int32_t>(resident);
        return launch_kernel(one_chunk_kernel<T, R, GS, RmsNormSchedule::kPrefetch, SCALED>(opt.pdl), grid, threads, 0, opt,
                             args);
      }
    }
    // one block per row group (cluster == 1)
    return launch_kernel(one_chunk_kernel<T, R, GS, RmsNormSchedule::kOnePass, SCALED>(opt.pdl), grid, threads, 0, opt,
                         args);
  }
  return launch_kernel(kernel, grid, threads, 0, opt, args);
}

// Whether a call runs two chunks per thread: where one block cannot hold the row (H > 16384), and for rows
// of more than `min_chunks` chunks in calls of at least 8 rows per SM.
inline bool rmsnorm_two_chunks(int num_chunks, int64_t num_rows, int num_sms, int min_chunks) {
  return num_chunks > kRmsNormMaxTeam || (num_chunks > min_chunks && num_rows >= 8 * static_cast<int64_t>(num_sms));
}

// Chunks per thread: two where one block cannot hold the row (H > 16384), and for rows of more than 512
// chunks (H > 8192) in calls of at least 8 rows per SM: blocks of half the threads, so that more of them
// share an SM and overlap one another's barriers. One elsewhere. Output_normed calls of 448-512 chunks and
// 3-5 rounds of resident one-chunk blocks run the staged kernel (kRmsNormAutoStages); the hook's
// rmsnorm_stages forces (> 0) or forbids (< 0) it.
template <typename T, typename R, int GS>
cudaError_t launch_rmsnorm_quant(const RmsNormQuantParams& rp, const LaunchOptions& opt) {
  const int num_chunks = rp.quant.hidden / kElemsPerThread;
  const int64_t num_rows = rp.quant.num_rows();
  LaunchOptions o = opt;
  // (a round holds at least num_sms rows: calls of at most 3 * num_sms rows need no occupancy query)
  if (o.rmsnorm_stages == 0 && o.clusters && rp.output_normed != nullptr && num_chunks >= 448 && num_chunks <= 512 &&
      num_rows > 3 * static_cast<int64_t>(opt.num_sms)) {
    int occupancy = 0;  // of the one-chunk kernel that such a call would run: a block per row (team >= 32)
    const int threads = rmsnorm_warps_per_block(num_chunks, 1) * 32;
    constexpr auto one_pass = rmsnorm_quant_kernel<T, R, GS, RmsNormSchedule::kOnePass>;
    const cudaError_t err = resident_blocks_per_sm<one_pass>(threads, 0, opt, occupancy);
    if (err != cudaSuccess) return err;
    const int64_t round = static_cast<int64_t>(opt.num_sms) * occupancy;
    if (num_rows > 3 * round && num_rows <= 5 * round) o.rmsnorm_stages = kRmsNormAutoStages;
  }
  const bool staged = o.rmsnorm_stages > 0 && o.clusters;  // (SM90 code)
  const bool two_chunks = rmsnorm_two_chunks(num_chunks, num_rows, opt.num_sms, staged ? kRmsNormMaxTeam : 512);
  return two_chunks ? launch_rmsnorm_quant_kernel<T, R, GS, 2, false>(rp, o)
                    : launch_rmsnorm_quant_kernel<T, R, GS, 1, false>(rp, o);
}

// The fused op with per-token / per-tensor codes (docs/spec.md §8.3): the group op's schedule rules but for
// clusters and staged rows, which it does not use (chunks laid out as group size 16's), and for calls without
// residual of H > 2048 and at least 3 rows per SM. Those keep each chunk's input words (z = float(x)), so that
// two or four chunks per thread fit the registers in blocks of at most 128 threads (four where two would take
// more): 7 rows per SM at H = 7168 where one chunk holds 2 and two chunks of fp32 values 4, for a row's chain
// of reductions that, at 3 bytes per element, bounds these calls (H100, M = 1024 ... 16384: 5-19% faster than
// the best of one and two chunks of fp32 values; at M = 256, 2 rows per SM, 4-23% slower than one chunk).
template <typename T, typename R>
cudaError_t launch_rmsnorm_scaled_quant(const RmsNormQuantParams& rp, const LaunchOptions& opt) {
  static_assert(kElemsPerThread == kElemsPerChunk, "a thread's chunk");
  const int num_chunks = rp.quant.hidden / kElemsPerThread;
  const int64_t num_rows = rp.quant.num_rows();
  if (rp.residual == nullptr && num_chunks > 128 && num_rows >= 3 * static_cast<int64_t>(opt.num_sms)) {
    return num_chunks > 256 ? launch_rmsnorm_quant_kernel<T, R, kElemsPerThread, 4, true, true>(rp, opt)
                            : launch_rmsnorm_quant_kernel<T, R, kElemsPerThread, 2, true, true>(rp, opt);
  }
  return rmsnorm_two_chunks(num_chunks, num_rows, opt.num_sms, 512)
             ? launch_rmsnorm_quant_kernel<T, R, kElemsPerThread, 2, true>(rp, opt)
             : launch_rmsnorm_quant_kernel<T, R, kElemsPerThread, 1, true>(rp, opt);
}

// Every variant of one group size: {bf16, fp16} x {fp8, int8} (either scale store; each with its kernels
// of every schedule).
#define SGLQ_FOR_EACH_RMSNORM_VARIANT(GS, X) \
  X(__nv_bfloat16, Fp8Range, GS)             \
  X(__nv_bfloat16, Int8Range, GS)            \
  X(__half, Fp8Range, GS)                    \
  X(__half, Int8Range, GS)

#define SGLQ_RMSNORM_LAUNCHER_SIGNATURE(T, R, GS) \
  cudaError_t launch_rmsnorm_quant<T, R, GS>(const RmsNormQuantParams&, const LaunchOptions&);
#define SGLQ_INSTANTIATE_RMSNORM_LAUNCHER(T, R, GS) template SGLQ_RMSNORM_LAUNCHER_SIGNATURE(T, R, GS)
#define SGLQ_DECLARE_RMSNORM_LAUNCHER(T, R, GS) extern template SGLQ_RMSNORM_LAUNCHER_SIGNATURE(T, R, GS)

// The per-token / per-tensor launchers: {bf16, fp16} x {fp8, int8}.
#define SGLQ_FOR_EACH_RMSNORM_SCALED_VARIANT(X) \
  X(__nv_bfloat16, Fp8Range)                    \
  X(__nv_bfloat16, Int8Range)                   \
  X(__half, Fp8Range)                           \
  X(__half, Int8Range)
#define SGLQ_RMSNORM_SCALED_LAUNCHER_SIGNATURE(T, R) \
  cudaError_t launch_rmsnorm_scaled_quant<T, R>(const RmsNormQuantParams&, const LaunchOptions&);
#define SGLQ_INSTANTIATE_RMSNORM_SCALED_LAUNCHER(T, R) template SGLQ_RMSNORM_SCALED_LAUNCHER_SIGNATURE(T, R)
#define SGLQ_DECLARE_RMSNORM_SCALED_LAUNCHER(T, R) extern template SGLQ_RMSNORM_SCALED_LAUNCHER_SIGNATURE(T, R)

}  // namespace sgl_quant
