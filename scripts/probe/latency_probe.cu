// Latency probe (issue 5; results in benchmark/NOTES.md): the real launcher and kernel without
// torch, timed under CUDA-graph replay (graphs of ~10 ms, median of 25 replays, like the
// benchmark: probe_util.cuh), next to an empty kernel and a bare load/store round trip of the M=1 bytes. Problems:
// dense bf16 -> fp8 g128 with column-major fp32 scales (M=1..16384; two also row-major), and fused SiLU H=2048 with
// packed UE8M0 scales, masked (the benchmark's counts; 256 x 128 with counts of its own) and dense
// over the same valid rows; then the rest of issue 13's cases (M=8, M=1 H=7168, packed UE8M0 M=64..4096),
// row-major M=1, and masked SiLU with a few rows per expert (8 x 512, 32 x 256: decode-sized MoE).
// Modes:
//   all   (default) each problem without and with PDL, a steady-state chain of 10, a launch-shape sweep
//   grid  PDL only, the problems under a few (threads x waves) shapes (waves cap masked grids only)
//   smid  where the block scheduler puts the blocks of one wave (it spreads them evenly)
//   dump DIR  one launch of each problem, codes and scales to DIR/q<i>.bin (compare builds)
//   redo  masked counts rewritten by a producer still running under PDL: same bytes as the final counts
//   quick PDL only, every problem, three passes (PROBE_PROBLEMS=0,5,...: only those, also for nopdl, masked)
//   nopdl without PDL, every problem, three passes
//   masked the masked problems only, without and with PDL, three passes
//   ncu I [J...]  three plain launches of problems I, J, ... for Nsight Compute
//   phases  (built with -DSGLQ_PROBE_PHASES) where block 0's time goes at M=1 without PDL
//   blocks  (built with -DSGLQ_PROBE_PHASES) every block's start and end: dense, masked, decode-sized masked
//   lean  issue 13: the kernel against two lean one-task kernels (least index math), M=1..256, both
//         launch modes, three passes (and their phases when built with -DSGLQ_PROBE_PHASES)
//   lean8 issue 13: lean kernels with the reference's 16 threads x 8 elements per group, with plain
//         instead of read-only loads, with 64 instead of 144 bytes of parameters
//
//   scripts/probe/build_probe.sh /tmp/latency_probe && /tmp/latency_probe [mode]
// or on the device machine, with logs, optional ncu and A/B builds: MODES="all grid" scripts/probe/probe_run.sh
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "cuda/per_token_group_quant.cuh"
#include "probe_util.cuh"

using namespace sgl_quant;

__global__ void empty_kernel() {}

__global__ void empty_pdl_kernel() {
  pdl_wait_for_producer();
  pdl_allow_dependents();
}

// The same bytes as the real kernel at M=1, H=4096: 256 threads, two 16-byte loads, one 16-byte store.
__global__ void round_trip_kernel(const uint4* in, uint4* out) {
  pdl_wait_for_producer();
  pdl_allow_dependents();
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const uint4 a = __ldg(in + 2 * t), b = __ldg(in + 2 * t + 1);
  out[t] = make_uint4(a.x ^ b.x, a.y ^ b.y, a.z ^ b.z, a.w ^ b.w);
}

// KernelArgs' divisor by a row's groups: `task_columns` since session 19, `groups_per_row` before, so
// that A/B builds against older headers (scripts/probe/headers_of.sh) compile too.
template <typename A>
__host__ __device__ auto row_divisor(A& a, int) -> decltype((a.task_columns)) { return a.task_columns; }
template <typename A>
__host__ __device__ auto row_divisor(A& a, long) -> decltype((a.groups_per_row)) { return a.groups_per_row; }

// Issue 13 experiment (mode "lean"): the dense kernel's one-task-per-sub-warp case with the least
// index math before the first load: one 32-bit division, 32-bit offsets (LEAN32) or locate_task's
// 64-bit ones, no rows-first order, no (outer, row) split, no grid-stride loop. Same quantize_task.
template <int GS, bool LEAN32>
__global__ void __launch_bounds__(kMaxBlockThreads, 4) lean_kernel(const KernelArgs args) {
  using T = __nv_bfloat16;
  constexpr int kThreadsPerGroup = GS / kElemsPerThread;
  const QuantParams& p = args.p;
  SGLQ_PROBE_PHASE(0, 0.0f);
  const int sub = threadIdx.x / kThreadsPerGroup, lane = threadIdx.x % kThreadsPerGroup;
  const int task = blockIdx.x * (blockDim.x / kThreadsPerGroup) + sub;
  const bool valid = task < args.num_tasks;
  const int row = row_divisor(args, 0).div(task);
  const int g = task - row * p.groups_per_row;
  Task<T> t;
  if constexpr (LEAN32) {
    t.src = static_cast<const T*>(p.input) + (row * static_cast<int>(p.in_row_stride) + g * GS);
    t.dst = static_cast<uint8_t*>(p.output_q) + (row * p.hidden + g * GS);
    t.s_row = row * static_cast<int>(p.s_row_stride);
    t.g = g;
  } else {
    t = locate_task<T, GS>(p, 0, row, g);
  }
  SGLQ_PROBE_PHASE(1, __int_as_float(static_cast<int>(reinterpret_cast<uintptr_t>(t.src))));
  pdl_wait_for_producer();
  pdl_allow_dependents();
  TaskInput<false> in = {};  // (the loads of load_task_input, written out: its signature differs between versions)
  if (valid) {
    in.v[0] = load_input_vec(t.src + lane * 8);
    in.v[1] = load_input_vec(t.src + GS / 2 + lane * 8);
  }
  SGLQ_PROBE_PHASE(2, __int_as_float(static_cast<int>(in.v[0].x)));
  quantize_task<T, Fp8Range, GS, ScaleKind::kFloat, false>(p, t, lane, valid, in);
  SGLQ_PROBE_PHASE(3, 0.0f);
}

template <bool LEAN32>
void launch_lean(const QuantParams& p, const LaunchOptions& o) {
  KernelArgs args;
  args.p = p;
  row_divisor(args, 0) = FastDivmod(static_cast<uint32_t>(p.groups_per_row));
  args.num_tasks = static_cast<int32_t>(p.num_groups());
  const int threads = 128, per_block = threads / 8;
  launch_kernel(lean_kernel<128, LEAN32>, (args.num_tasks + per_block - 1) / per_block, threads, 0, o, args);
}

// Issue 13 experiment (mode "lean8"): the reference's granularity, 16 threads per group of 128 with 8
// elements (one 16-byte load, one 8-byte store) each, instead of 8 threads with 16; the lean prologue.
// bf16 -> fp8, fp32 scales (any strides), num_outer == 1, one task per 16 threads, row order.
// PLAIN: ld.global instead of the read-only path (ld.global.nc). Args: KernelArgs (144 bytes), or
// the 64 bytes it needs (Lean8Args: the small-call kernel grew out of this experiment; its own
// arguments are 48 bytes since session 22).
struct Lean8Args {
  const void* input;
  void* output_q;
  void* output_s;
  FastDivmod groups_per_row;
  int32_t num_tasks;
  int32_t groups;  // per row
  int32_t in_row_stride, hidden, s_row_stride, s_group_stride;
  float eps;
};

// From the problem and the divisor (FastDivmod's constructor is host code); num_tasks is p's groups.
__host__ __device__ inline Lean8Args lean8_args(const QuantParams& p, FastDivmod groups_per_row, int32_t num_tasks) {
  Lean8Args a;
  a.input = p.input;
  a.output_q = p.output_q;
  a.output_s = p.output_s;
  a.groups_per_row = groups_per_row;
  a.num_tasks = num_tasks;
  a.groups = p.groups_per_row;
  a.in_row_stride = static_cast<int32_t>(p.in_row_stride);
  a.hidden = p.hidden;
  a.s_row_stride = static_cast<int32_t>(p.s_row_stride);
  a.s_group_stride = static_cast<int32_t>(p.s_group_stride);
  a.eps = p.eps;
  return a;
}

template <bool PLAIN>
__device__ __forceinline__ void lean8_task(const Lean8Args& a) {
  constexpr int GS = 128, kThreadsPerGroup = 16;
  const int sub = threadIdx.x / kThreadsPerGroup, lane = threadIdx.x % kThreadsPerGroup;
  const int task = blockIdx.x * (blockDim.x / kThreadsPerGroup) + sub;
  const bool valid = task < a.num_tasks;
  const int row = a.groups_per_row.div(task);
  const int g = task - row * a.groups;
  const __nv_bfloat16* src =
      static_cast<const __nv_bfloat16*>(a.input) + static_cast<int64_t>(row) * a.in_row_stride + g * GS + lane * 8;
  pdl_wait_for_producer();
  pdl_allow_dependents();
  uint4 v = make_uint4(0, 0, 0, 0);
  if (valid) {
    if constexpr (PLAIN) {
      asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(src));
    } else {
      v = load_input_vec(src);
    }
  }
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t m2 = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) m2 = __vmaxu2(m2, w[j] & 0x7fff7fffu);
  uint32_t amax_bits = max(m2 & 0xffffu, m2 >> 16) << 16;
#pragma unroll
  for (int o = 8; o > 0; o /= 2) amax_bits = max(amax_bits, __shfl_xor_sync(0xffffffffu, amax_bits, o));
  if (!valid) return;
  const bool finite = amax_bits < kNonFiniteBits;
  const float amax = fmaxf(__uint_as_float(amax_bits), a.eps);
  const float s = amax * Fp8Range::kInvMax, y = Fp8Range::kMax / amax;
  uint32_t out[2] = {0x7f7f7f7fu, 0x7f7f7f7fu};
  if (finite) {
#pragma unroll
    for (int j = 0; j < 4; j += 2) {
      float2 x0 = Pack2<__nv_bfloat16>::to_float2(w[j]), x1 = Pack2<__nv_bfloat16>::to_float2(w[j + 1]);
      x0.x *= y, x0.y *= y, x1.x *= y, x1.y *= y;
      out[j / 2] = static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(x0, __NV_SATFINITE, __NV_E4M3)) |
                   (static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(x1, __NV_SATFINITE, __NV_E4M3)) << 16);
    }
  }
  uint8_t* dst = static_cast<uint8_t*>(a.output_q) + static_cast<int64_t>(row) * a.hidden + g * GS + lane * 8;
  *reinterpret_cast<uint2*>(dst) = make_uint2(out[0], out[1]);
  float* scale = static_cast<float*>(a.output_s) + row * a.s_row_stride + g * a.s_group_stride;
  if (lane == 0) *scale = finite ? s : __uint_as_float(kNanBits);
}

// The same task with the parameters of the real kernel (KernelArgs) or the small ones.
template <bool PLAIN>
__global__ void __launch_bounds__(kMaxBlockThreads, 4) lean8_kernel(const KernelArgs args) {
  lean8_task<PLAIN>(lean8_args(args.p, row_divisor(args, 0), args.num_tasks));
}
template <bool PLAIN>
__global__ void __launch_bounds__(kMaxBlockThreads, 4) lean8_small_kernel(const Lean8Args a) {
  lean8_task<PLAIN>(a);
}

template <int THREADS, bool PLAIN = false, bool SMALL = false>
void launch_lean8(const QuantParams& p, const LaunchOptions& o) {
  const int per_block = THREADS / 16;
  const int grid = static_cast<int>((p.num_groups() + per_block - 1) / per_block);
  if constexpr (SMALL) {
    launch_kernel(lean8_small_kernel<PLAIN>, grid, THREADS, 0, o,
                  lean8_args(p, FastDivmod(static_cast<uint32_t>(p.groups_per_row)), static_cast<int32_t>(p.num_groups())));
  } else {
    KernelArgs args;
    args.p = p;
    row_divisor(args, 0) = FastDivmod(static_cast<uint32_t>(p.groups_per_row));
    args.num_tasks = static_cast<int32_t>(p.num_groups());
    launch_kernel(lean8_kernel<PLAIN>, grid, THREADS, 0, o, args);
  }
}

// Records the SM of each block; spins so that the blocks of one wave are resident together.
__global__ void smid_kernel(int* ids, long long spin_cycles) {
  if (threadIdx.x == 0) {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    ids[blockIdx.x] = static_cast<int>(id);
  }
  const long long t0 = clock64();
  while (clock64() - t0 < spin_cycles) {
  }
}

// A producer that lets its dependents launch at once, then writes the counts late: a masked launch
// with PDL behind it reads the old counts before its PDL wait and the new ones after it.
__global__ void late_counts_kernel(int32_t* counts, const int32_t* new_counts, int n, long long spin_cycles) {
  pdl_allow_dependents();
  const long long t0 = clock64();
  while (clock64() - t0 < spin_cycles) {
  }
  if (threadIdx.x < n) counts[threadIdx.x] = new_counts[threadIdx.x];
}

template <typename K, typename... A>
void launch_ex(K kernel, int grid, int block, cudaStream_t s, bool pdl, A... args) {
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(grid);
  c.blockDim = dim3(block);
  c.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
  c.attrs = attr;
  c.numAttrs = 1;
  CK(cudaLaunchKernelEx(&c, kernel, args...));
}

struct Problem {
  std::string name;
  QuantParams p;
  int waves;
  size_t s_bytes;  // size of output_s
  void (*launch)(const QuantParams&, const LaunchOptions&);
};

void* device_bf16(size_t n) {
  std::vector<uint16_t> host(n);
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < n; ++i) {  // bf16 of both signs, magnitudes 2^-8 .. 2^8 (xorshift)
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    host[i] = static_cast<uint16_t>((x & 0x807f) | ((0x77 + (x >> 8) % 17) << 7));
  }
  void* d;
  CK(cudaMalloc(&d, 2 * n));
  CK(cudaMemcpy(d, host.data(), 2 * n, cudaMemcpyHostToDevice));
  return d;
}

void* device_zeros(size_t bytes) {
  void* d;
  CK(cudaMalloc(&d, bytes));
  CK(cudaMemset(d, 0, bytes));
  return d;
}

template <ScaleKind SK, bool SILU>
void launch_variant(const QuantParams& p, const LaunchOptions& o) {
  if (p.masked_m != nullptr) {
    CK((launch_per_token_group_quant<__nv_bfloat16, Fp8Range, 128, SK, SILU, true>(p, o)));
  } else {
    CK((launch_per_token_group_quant<__nv_bfloat16, Fp8Range, 128, SK, SILU, false>(p, o)));
  }
}

// bf16 [M, H] -> fp8, g128, column-major TMA-aligned fp32 scales (row-major with col = false; packed
// UE8M0 column-major words with packed = true, which needs col)
Problem dense_problem(int M, int H, bool col = true, bool packed = false) {
  Problem r;
  r.name = "M" + std::to_string(M) + " H" + std::to_string(H) + (col ? "" : " row") + (packed ? " packed" : "");
  const int G = H / 128, m_pad = (M + 3) / 4 * 4;
  QuantParams& p = r.p;
  p.input = device_bf16(static_cast<size_t>(M) * H);
  p.output_q = device_zeros(static_cast<size_t>(M) * H);
  r.s_bytes = 4ull * m_pad * G;
  p.output_s = device_zeros(r.s_bytes);
  p.num_outer = 1;
  p.rows_per_outer = M;
  p.in_row_stride = H;
  p.s_row_stride = col ? 1 : G;  // column-major TMA-aligned, or row-major [M, G]
  p.s_group_stride = col ? m_pad : 1;
  p.hidden = H;
  p.groups_per_row = G;
  p.group_size = 128;
  r.waves = 16;
  r.launch = launch_variant<ScaleKind::kFloat, false>;
  if (packed) {  // the column-major strides above, in int32 words of four scales
    p.scale_kind = ScaleKind::kPackedUE8M0;
    r.s_bytes = 4ull * m_pad * ((G + 3) / 4);
    r.launch = launch_variant<ScaleKind::kPackedUE8M0, false>;
  }
  return r;
}

// Fused SiLU, H=2048, packed UE8M0 column-major scales; masked [E, rows, 2H] with the benchmark's
// counts (make_masked_m(E, rows, seed=3)), or dense [M, 2H] over the same number of valid rows.
Problem silu_problem(int E, int rows, const std::vector<int>& counts, bool masked, const std::string& tag = "") {
  Problem r;
  const int H = 2048, G = H / 128;
  int valid = 0;
  for (int c : counts) valid += c;
  const int outer = masked ? E : 1, per_outer = masked ? rows : valid, m_pad = (per_outer + 3) / 4 * 4;
  r.name = masked ? "masked E" + std::to_string(E) + "x" + std::to_string(rows) + tag : "dense silu M" + std::to_string(valid);
  QuantParams& p = r.p;
  p.input = device_bf16(static_cast<size_t>(outer) * per_outer * 2 * H);
  p.output_q = device_zeros(static_cast<size_t>(outer) * per_outer * H);
  r.s_bytes = 4ull * outer * m_pad * ((G + 3) / 4);
  p.output_s = device_zeros(r.s_bytes);
  if (masked) {
    p.masked_m = static_cast<const int32_t*>(device_zeros(4 * E));
    CK(cudaMemcpy(const_cast<int32_t*>(p.masked_m), counts.data(), 4 * E, cudaMemcpyHostToDevice));
  }
  p.num_outer = outer;
  p.rows_per_outer = per_outer;
  p.in_outer_stride = static_cast<int64_t>(per_outer) * 2 * H;
  p.in_row_stride = 2 * H;
  p.s_outer_stride = static_cast<int64_t>(m_pad) * ((G + 3) / 4);
  p.s_row_stride = 1;
  p.s_group_stride = m_pad;
  p.hidden = H;
  p.groups_per_row = G;
  p.group_size = 128;
  p.scale_kind = ScaleKind::kPackedUE8M0;
  p.fuse_silu_and_mul = true;
  r.waves = masked ? 1 : 16;  // the extension's defaults (csrc/cuda/quant_cuda.cu)
  r.launch = launch_variant<ScaleKind::kPackedUE8M0, true>;
  return r;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "all";
  int num_sms;
  CK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, 0));
  const std::vector<int> c8 = {0, 88, 142, 438, 5, 40, 265, 512};  // make_masked_m(8, 512, seed=3)
  const std::vector<int> c32 = {0,   105, 86,  222, 149, 156, 151, 42,  172, 93,  22,  216, 173, 215, 166, 61,
                                64,  81,  171, 4,   72,  139, 253, 47,  200, 235, 222, 148, 198, 147, 37,  256};
  const std::vector<int> c8_few = {0, 3, 1, 7, 2, 0, 5, 4};
  std::vector<int> c32_few(32);
  for (int e = 0; e < 32; ++e) c32_few[e] = (e * 7) % 5;
  std::vector<int> c256(256);  // 256 experts x 128 rows: counts from a fixed LCG (not the benchmark's)
  for (uint32_t i = 0, x = 12345; i < 256; ++i) c256[i] = static_cast<int>((x = x * 1664525u + 1013904223u) >> 8) % 129;
  std::vector<Problem> probs = {dense_problem(1, 4096), dense_problem(64, 7168), dense_problem(256, 7168),
                                dense_problem(1024, 4096), dense_problem(4096, 4096), dense_problem(16384, 7168),
                                silu_problem(8, 512, c8, true), silu_problem(8, 512, c8, false),
                                silu_problem(32, 256, c32, true), silu_problem(32, 256, c32, false),
                                silu_problem(256, 128, c256, true), dense_problem(4096, 4096, false),
                                dense_problem(16384, 7168, false),
                                // issue 13's other cases
                                dense_problem(8, 4096), dense_problem(1, 7168), dense_problem(8, 7168),
                                dense_problem(64, 4096, true, true), dense_problem(64, 7168, true, true),
                                dense_problem(256, 7168, true, true), dense_problem(4096, 4096, true, true),
                                dense_problem(4096, 7168, true, true), dense_problem(1, 4096, false),
                                // decode-sized MoE: a few rows per expert
                                silu_problem(8, 512, c8_few, true, " few"), silu_problem(32, 256, c32_few, true, " few"),
                                silu_problem(8, 512, c8_few, false)};  // dense over the decode-sized rows
  const Problem one_7168 = dense_problem(1, 7168);
  auto ours = [num_sms](const Problem& pr, bool pdl, int threads = 0, int waves = 0) {
    return [&pr, pdl, num_sms, threads, waves](cudaStream_t st) {
      LaunchOptions o;
      o.stream = st;
      o.num_sms = num_sms;
      o.pdl = pdl;
      o.block_threads = threads;
      o.waves = waves ? waves : pr.waves;
      pr.launch(pr.p, o);
    };
  };
  // A problem launched by another launcher (the lean experiment kernels), default shape.
  auto with = [num_sms](const Problem& pr, bool pdl, void (*launch)(const QuantParams&, const LaunchOptions&)) {
    return [&pr, pdl, num_sms, launch](cudaStream_t st) {
      LaunchOptions o;
      o.stream = st;
      o.num_sms = num_sms;
      o.pdl = pdl;
      launch(pr.p, o);
    };
  };
  if (mode == "ncu") {  // a few plain launches of the problems named by index, for Nsight Compute
    for (int a = 2; a < argc; ++a) {
      const Problem& pr = probs[std::atoi(argv[a])];
      std::printf("ncu problem %s\n", pr.name.c_str());
      for (int i = 0; i < 3; ++i) ours(pr, false)(nullptr);
      CK(cudaDeviceSynchronize());
    }
    return 0;
  }
  if (mode == "smid") {  // where the block scheduler puts the blocks of one wave (256 threads, blocks spin)
    int* d_ids;
    CK(cudaMalloc(&d_ids, 4 * 4096));
    CK(cudaFuncSetAttribute(smid_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 120 * 1024));
    const int cases[][2] = {{132, 8}, {264, 8}, {448, 8}, {448, 4}, {745, 8}, {745, 6}, {1056, 8}};
    for (auto& c : cases) {
      const size_t extra = c[1] == 8 ? 0 : 233472 / c[1] - 1024 - 512;
      smid_kernel<<<c[0], 256, extra>>>(d_ids, 40000);
      CK(cudaDeviceSynchronize());
      std::vector<int> ids(c[0]), per_sm(num_sms, 0);
      CK(cudaMemcpy(ids.data(), d_ids, 4 * c[0], cudaMemcpyDeviceToHost));
      for (int id : ids) per_sm[id]++;
      int used = 0, mx = 0, mn = 1 << 30;
      for (int n : per_sm) if (n) { used++; mx = std::max(mx, n); mn = std::min(mn, n); }
      std::printf("grid %4d cap %d: %3d SMs used, blocks per used SM %d..%d; first 24 block->SM:", c[0], c[1], used, mn, mx);
      for (int i = 0; i < 24; ++i) std::printf(" %d", ids[i]);
      std::printf("\n");
    }
    return 0;
  }
  if (mode == "grid") {  // PDL: launch shapes (threads, waves; 0 = automatic / the problem's default)
    const int configs[][2] = {{0, 0}, {0, 1}, {0, 2}, {0, 4}, {128, 0}, {128, 1}, {512, 0}};
    std::printf("grid sweep, PDL: columns threads x waves (0: automatic / the problem's default)\n%-24s", "");
    for (auto& c : configs) std::printf(" %7dx%d ", c[0], c[1]);
    std::printf("\n");
    for (const Problem& pr : probs) {
      std::printf("%-24s", pr.name.c_str());
      for (auto& c : configs) {
        auto fn = [&pr, num_sms, &c](cudaStream_t st) {
          LaunchOptions o;
          o.stream = st;
          o.num_sms = num_sms;
          o.pdl = true;
          o.block_threads = c[0];
          o.waves = c[1] ? c[1] : pr.waves;
          pr.launch(pr.p, o);
        };
        std::printf(" %10.3f", time_graph(fn, 20));
      }
      std::printf("\n");
    }
    return 0;
  }
  // Poisons the outputs of a problem, runs `launch`, and returns its codes followed by its scales.
  auto outputs_of = [](const Problem& pr, const std::function<void()>& launch) {
    const QuantParams& p = pr.p;
    const size_t q_bytes = static_cast<size_t>(p.num_rows()) * p.hidden;
    CK(cudaMemset(p.output_q, 0xcd, q_bytes));
    CK(cudaMemset(p.output_s, 0xcd, pr.s_bytes));
    launch();
    CK(cudaDeviceSynchronize());
    std::vector<char> out(q_bytes + pr.s_bytes);
    CK(cudaMemcpy(out.data(), p.output_q, q_bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(out.data() + q_bytes, p.output_s, pr.s_bytes, cudaMemcpyDeviceToHost));
    return out;
  };
  if (mode == "dump") {  // one launch of every problem, codes then scales to files (compare builds with cmp)
    const std::string dir = argc > 2 ? argv[2] : ".";
    for (size_t i = 0; i < probs.size(); ++i) {
      const std::vector<char> out = outputs_of(probs[i], [&] { ours(probs[i], false)(nullptr); });
      FILE* f = std::fopen((dir + "/q" + std::to_string(i) + ".bin").c_str(), "wb");
      std::fwrite(out.data(), 1, out.size(), f);
      std::fclose(f);
    }
    return 0;
  }
  if (mode == "redo") {  // masked counts that change under a PDL launch give the same bytes as the final counts
    int failures = 0;
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    for (int index : {6, 8}) {
      const Problem& pr = probs[index];
      int32_t* counts = const_cast<int32_t*>(pr.p.masked_m);
      const int E = static_cast<int>(pr.p.num_outer);
      std::vector<int> final_counts(E), old_counts(E);
      CK(cudaMemcpy(final_counts.data(), counts, 4 * E, cudaMemcpyDeviceToHost));
      for (int e = 0; e < E; ++e) old_counts[e] = final_counts[E - 1 - e] / 2;  // different rows and experts
      int32_t* d_final;
      CK(cudaMalloc(&d_final, 4 * E));
      CK(cudaMemcpy(d_final, final_counts.data(), 4 * E, cudaMemcpyHostToDevice));
      auto run = [&](bool late) {
        CK(cudaMemcpy(counts, (late ? old_counts : final_counts).data(), 4 * E, cudaMemcpyHostToDevice));
        return outputs_of(pr, [&] {
          if (late) launch_ex(late_counts_kernel, 1, 32, st, false, counts, static_cast<const int32_t*>(d_final), E, 200000LL);
          ours(pr, late)(st);
        });
      };
      const bool same = run(false) == run(true);
      failures += !same;
      std::printf("redo %s: counts changed under a PDL launch -> %s\n", pr.name.c_str(), same ? "same bytes" : "DIFFERENT bytes");
    }
    return failures ? 1 : 0;
  }
  if (mode == "lean") {  // issue 13: the base kernel against lean first-task kernels, without and with PDL, 3 passes
    std::vector<Problem> lean_probs = {dense_problem(1, 4096), dense_problem(8, 4096), dense_problem(1, 7168),
                                       dense_problem(8, 7168), dense_problem(64, 7168), dense_problem(256, 7168)};
    for (int pass = 0; pass < 3; ++pass) {
      for (const Problem& pr : lean_probs) {
        for (bool pdl : {false, true}) {
          std::printf("pass %d %-12s %-6s base %7.3f lean64 %7.3f lean32 %7.3f\n", pass, pr.name.c_str(), pdl ? "PDL" : "noPDL",
                      time_graph(ours(pr, pdl), 20), time_graph(with(pr, pdl, launch_lean<false>), 20),
                      time_graph(with(pr, pdl, launch_lean<true>), 20));
        }
      }
    }
#ifdef SGLQ_PROBE_PHASES
    for (int variant = 0; variant < 3; ++variant) {
      const Problem& pr = lean_probs[0];
      std::vector<std::vector<double>> d(3);
      for (int i = 0; i < 50; ++i) {
        if (variant == 0) ours(pr, false)(0); else with(pr, false, variant == 1 ? launch_lean<false> : launch_lean<true>)(0);
        CK(cudaDeviceSynchronize());
        unsigned long long t[8];
        CK(cudaMemcpyFromSymbol(t, g_probe_phases, sizeof(t)));
        for (int k = 0; k < 3; ++k) d[k].push_back(double(t[k + 1] - t[k]));
      }
      for (int k = 0; k < 3; ++k) {
        std::sort(d[k].begin(), d[k].end());
        std::printf("phase %s phase %d: %8.0f ns (median of 50)\n", variant == 0 ? "base" : variant == 1 ? "lean64" : "lean32", k, d[k][25]);
      }
    }
#endif
    return 0;
  }
  if (mode == "lean8") {  // issue 13: 16 threads x 8 elements per group against 8 x 16, 3 passes, both launch modes
    std::vector<Problem> lean_probs = {dense_problem(1, 4096), dense_problem(8, 4096), dense_problem(1, 7168),
                                       dense_problem(8, 7168), dense_problem(64, 7168, false)};
    for (const Problem& pr : lean_probs) {  // same bytes as the kernel?
      const auto a = outputs_of(pr, [&] { ours(pr, false)(nullptr); });
      const auto b = outputs_of(pr, [&] { with(pr, false, launch_lean8<256>)(nullptr); });
      const auto c = outputs_of(pr, [&] { with(pr, false, launch_lean8<128, true, true>)(nullptr); });
      std::printf("lean8 %s: %s\n", pr.name.c_str(), a == b && a == c ? "same bytes" : "DIFFERENT bytes");
    }
    for (int pass = 0; pass < 3; ++pass) {
      for (const Problem& pr : lean_probs) {
        for (bool pdl : {false, true}) {
          std::printf("pass %d %-12s %-6s base %7.3f lean64 %7.3f lean8x128 %7.3f lean8x256 %7.3f plain %7.3f "
                      "small %7.3f small+plain %7.3f\n", pass, pr.name.c_str(), pdl ? "PDL" : "noPDL",
                      time_graph(ours(pr, pdl), 20), time_graph(with(pr, pdl, launch_lean<false>), 20),
                      time_graph(with(pr, pdl, launch_lean8<128>), 20), time_graph(with(pr, pdl, launch_lean8<256>), 20),
                      time_graph(with(pr, pdl, launch_lean8<128, true>), 20),
                      time_graph(with(pr, pdl, launch_lean8<128, false, true>), 20),
                      time_graph(with(pr, pdl, launch_lean8<128, true, true>), 20));
        }
      }
    }
    return 0;
  }
#ifdef SGLQ_PROBE_PHASES
  if (mode == "phases") {  // where block 0's time goes without PDL (M=1 H=4096, M=1 H=7168), single launches
    for (const Problem* pr : std::vector<const Problem*>{&probs[0], &one_7168}) {
      std::vector<std::vector<double>> d(3);
      for (int i = 0; i < 50; ++i) {
        ours(*pr, false)(0);
        CK(cudaDeviceSynchronize());
        unsigned long long t[8];
        CK(cudaMemcpyFromSymbol(t, g_probe_phases, sizeof(t)));
        for (int k = 0; k < 3; ++k) d[k].push_back(double(t[k + 1] - t[k]));
      }
      const char* names[3] = {"start -> task located", "-> input loaded", "-> quantized, stored"};
      for (int k = 0; k < 3; ++k) {
        std::sort(d[k].begin(), d[k].end());
        std::printf("phase %-10s %-24s %8.0f ns (median of 50)\n", pr->name.c_str(), names[k], d[k][25]);
      }
    }
    return 0;
  }
  if (mode == "blocks") {  // every block's start and end (thread 0, %globaltimer), single launches without PDL
    std::printf("%-26s %6s %10s %10s %10s %10s %8s %8s\n", "problem", "blocks", "last start", "median run", "max run",
                "last end", "us", "us PDL");
    for (int i : {0, 13, 6, 7, 8, 9, 22, 24, 23}) {
      const Problem& pr = probs[i];
      const BlockSpans b = block_spans([&] { ours(pr, false)(0); });
      std::printf("%-26s %6.0f %7.0f ns %7.0f ns %7.0f ns %7.0f ns %8.3f %8.3f\n", pr.name.c_str(), b.blocks,
                  b.last_start, b.median_run, b.max_run, b.last_end, time_graph(ours(pr, false), 20),
                  time_graph(ours(pr, true), 20));
    }
    return 0;
  }
#endif
  // quick, nopdl, masked: PROBE_PROBLEMS (comma-separated indices into probs) limits them to those problems.
  std::vector<bool> chosen(probs.size(), true);
  if (const char* only = std::getenv("PROBE_PROBLEMS")) {
    std::fill(chosen.begin(), chosen.end(), false);
    for (const char* c = only; *c != '\0';) {
      char* end = nullptr;
      const long i = std::strtol(c, &end, 10);
      if (end == c) break;
      if (i >= 0 && i < static_cast<long>(probs.size())) chosen[i] = true;
      c = *end == ',' ? end + 1 : end;
    }
  }
  if (mode == "quick" || mode == "nopdl") {  // PDL only (quick) or none (nopdl), every problem, three passes
    const bool pdl = mode == "quick";        // (the spread between passes is the noise)
    for (int pass = 0; pass < 3; ++pass) {
      for (size_t i = 0; i < probs.size(); ++i) {
        if (chosen[i]) std::printf("pass %d %-24s %8.3f\n", pass, probs[i].name.c_str(), time_graph(ours(probs[i], pdl), 20));
      }
    }
    return 0;
  }
  if (mode == "masked") {  // the masked problems only, without and with PDL, three passes
    for (int pass = 0; pass < 3; ++pass) {
      for (size_t i = 0; i < probs.size(); ++i) {
        const Problem& pr = probs[i];
        if (pr.p.masked_m == nullptr || !chosen[i]) continue;
        for (bool pdl : {false, true}) {
          std::printf("pass %d %-24s %8.3f\n", pass, (pr.name + (pdl ? " PDL" : "")).c_str(), time_graph(ours(pr, pdl), 20));
        }
      }
    }
    return 0;
  }
  const void* x = probs[0].p.input;
  void* q = probs[0].p.output_q;
  std::printf("%-30s %10s %10s %14s\n", "kernel", "us", "us PDL", "chain10x20 PDL");
  auto row = [&](const std::string& name, const std::function<void(cudaStream_t)>& plain,
                 const std::function<void(cudaStream_t)>& pdl) {
    auto chain = [&](cudaStream_t st) { for (int i = 0; i < 10; ++i) pdl(st); };
    std::printf("%-30s %10.3f %10.3f %14.3f\n", name.c_str(), time_graph(plain, 20), time_graph(pdl, 20),
                time_graph(chain, 20));
  };
  row("empty 2x128", [](cudaStream_t st) { launch_ex(empty_kernel, 2, 128, st, false); },
      [](cudaStream_t st) { launch_ex(empty_pdl_kernel, 2, 128, st, true); });
  row("round trip 2x128", [&](cudaStream_t st) { launch_ex(round_trip_kernel, 2, 128, st, false, (const uint4*)x, (uint4*)q); },
      [&](cudaStream_t st) { launch_ex(round_trip_kernel, 2, 128, st, true, (const uint4*)x, (uint4*)q); });
  for (const Problem& pr : probs) row(pr.name, ours(pr, false), ours(pr, true));

  std::printf("\nshape sweep, PDL (threads x waves)\n%-24s", "");
  const int shapes[][2] = {{0, 0}, {128, 16}, {256, 16}, {512, 16}, {256, 2}, {256, 32}, {256, 64}, {512, 64}};
  for (auto& sh : shapes) std::printf(" %5dx%-3d", sh[0], sh[1]);
  std::printf("\n");
  for (const Problem& pr : probs) {
    std::printf("%-24s", pr.name.c_str());
    for (auto& sh : shapes) std::printf(" %9.3f", time_graph(ours(pr, true, sh[0], sh[1]), 20));
    std::printf("\n");
  }
  return 0;
}
