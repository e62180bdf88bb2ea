// Small-M latency probe (issue 5): where do the ~0.8 µs that our kernel adds over an empty kernel
// go? Times, under CUDA-graph replay (20 launches per graph, median of 25 replays, like the
// benchmark), an empty kernel, a bare load/store round trip of the same bytes, and the real
// kernel for M=1, H=4096 (bf16 -> fp8, g128, column-major fp32 scales), each with and without PDL.
//
//   nvcc -O3 -std=c++17 --use_fast_math -gencode arch=compute_90a,code=sm_90a -I csrc \
//        scripts/latency_probe.cu -o /tmp/latency_probe && /tmp/latency_probe
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "cuda/per_token_group_quant.cuh"

using namespace sgl_quant;

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); std::exit(1); } } while (0)

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


// Candidate: one task per sub-warp, no grid-stride loop, no masked branch, 2-D input only; the
// index math is done before the PDL wait.
template <int GS>
__global__ void __launch_bounds__(kMaxBlockThreads) lean_kernel(const KernelArgs args) {
  using T = __nv_bfloat16;
  using R = Fp8Range;
  const QuantParams& p = args.p;
  constexpr int kTPG = GS / kElemsPerThread;
  const int sub = threadIdx.x / kTPG, lane = threadIdx.x % kTPG;
  const int task_raw = blockIdx.x * (blockDim.x / kTPG) + sub;
  const bool valid = task_raw < args.num_tasks;
  const int task = valid ? task_raw : args.num_tasks - 1;
  const int row = args.groups_per_row.div(task);
  const int g = task - row * p.groups_per_row;
  const T* src = static_cast<const T*>(p.input) + row * p.in_row_stride + g * GS + lane * 8;
  uint8_t* dst = static_cast<uint8_t*>(p.output_q) + static_cast<int64_t>(row) * p.hidden + g * GS + lane * 8;
  float* sdst = static_cast<float*>(p.output_s) + row * p.s_row_stride + g * p.s_group_stride;
  pdl_wait_for_producer();
  pdl_allow_dependents();
  uint32_t w[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (valid) {
    const uint4 a = load_input_vec(src), b = load_input_vec(src + GS / 2);
    w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
  }
  uint32_t m2 = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) m2 = __vmaxu2(m2, w[j] & 0x7fff7fffu);
  uint32_t amax_bits = max(m2 & 0xffffu, m2 >> 16) << 16;
#pragma unroll
  for (int o = kTPG / 2; o > 0; o /= 2) amax_bits = max(amax_bits, __shfl_xor_sync(0xffffffffu, amax_bits, o));
  const bool finite = amax_bits < kNonFiniteBits;
  const float amax = fmaxf(__uint_as_float(amax_bits), p.eps);
  const float sc = amax * R::kInvMax, y = R::kMax / amax;
  if (valid) {
    const uint4 codes = finite ? encode16<T, R>(w, y) : make_uint4(0x7f7f7f7fu, 0x7f7f7f7fu, 0x7f7f7f7fu, 0x7f7f7f7fu);
    *reinterpret_cast<uint2*>(dst) = make_uint2(codes.x, codes.y);
    *reinterpret_cast<uint2*>(dst + GS / 2) = make_uint2(codes.z, codes.w);
    if (lane == 0) *sdst = finite ? sc : __uint_as_float(kNanBits);
  }
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

// Median µs per launch over replays of a graph holding `calls` launches of fn.
double time_graph(const std::function<void(cudaStream_t)>& fn, int calls, int replays = 25) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  fn(s);
  CK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i) fn(s);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < 200; ++i) CK(cudaGraphLaunch(ge, s));  // clocks up
  CK(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<double> v;
  for (int r = 0; r < replays; ++r) {
    CK(cudaEventRecord(a, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    v.push_back(ms * 1e3 / calls);
  }
  std::sort(v.begin(), v.end());
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaStreamDestroy(s));
  return v[v.size() / 2];
}

struct Problem {
  QuantParams p;
  KernelArgs lean;
  int lean_blocks;
};

Problem make_problem(int M, int H) {
  const int G = H / 128;
  void *x, *q, *s;
  const int m_pad = (M + 3) / 4 * 4;
  CK(cudaMalloc(&x, 2 * M * H));
  CK(cudaMalloc(&q, M * H));
  CK(cudaMalloc(&s, 4 * m_pad * G));
  std::vector<uint16_t> host(M * H);
  for (int i = 0; i < M * H; ++i) host[i] = static_cast<uint16_t>(0x3f80 + (i * 37 % 251) - 125);  // bf16 near 1
  CK(cudaMemcpy(x, host.data(), 2 * M * H, cudaMemcpyHostToDevice));
  Problem r;
  QuantParams& p = r.p;
  p.input = x;
  p.output_q = q;
  p.output_s = s;
  p.num_outer = 1;
  p.rows_per_outer = M;
  p.in_row_stride = H;
  p.s_row_stride = 1;
  p.s_group_stride = m_pad;  // column-major, TMA-aligned
  p.hidden = H;
  p.groups_per_row = G;
  p.group_size = 128;
  p.eps = 1e-10f;
  r.lean.p = p;
  r.lean.groups_per_row = FastDivmod(G);
  r.lean.rows_per_outer = FastDivmod(M);
  r.lean.num_tasks = M * G;
  r.lean_blocks = (M * G * 8 + 127) / 128;
  return r;
}

int main() {
  int num_sms;
  CK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, 0));
  std::vector<Problem> probs = {make_problem(1, 4096), make_problem(64, 7168), make_problem(256, 7168),
                                make_problem(1024, 4096), make_problem(4096, 4096)};
  const Problem& p1 = probs[0];
  void* x = const_cast<void*>(p1.p.input);
  void* q = p1.p.output_q;
  auto ours = [&](const Problem& pr, bool pdl, int threads = 0, int waves = 16) {
    return [&pr, pdl, num_sms, threads, waves](cudaStream_t st) {
      LaunchOptions o;
      o.stream = st;
      o.num_sms = num_sms;
      o.pdl = pdl;
      o.block_threads = threads;
      o.waves = waves;
      CK((launch_per_token_group_quant<__nv_bfloat16, Fp8Range, 128, ScaleKind::kFloat, false>(pr.p, o)));
    };
  };
  auto lean = [&](const Problem& pr, bool pdl) {
    return [&pr, pdl](cudaStream_t st) { launch_ex(lean_kernel<128>, pr.lean_blocks, 128, st, pdl, pr.lean); };
  };
  struct Row { std::string name; std::function<void(cudaStream_t)> fn; };
  std::vector<Row> rows = {
      {"empty 1x32", [](cudaStream_t st) { launch_ex(empty_kernel, 1, 32, st, false); }},
      {"empty 2x128", [](cudaStream_t st) { launch_ex(empty_kernel, 2, 128, st, false); }},
      {"empty+pdl-instr 2x128, PDL", [](cudaStream_t st) { launch_ex(empty_pdl_kernel, 2, 128, st, true); }},
      {"round trip 2x128", [&](cudaStream_t st) { launch_ex(round_trip_kernel, 2, 128, st, false, (const uint4*)x, (uint4*)q); }},
      {"round trip 2x128, PDL", [&](cudaStream_t st) { launch_ex(round_trip_kernel, 2, 128, st, true, (const uint4*)x, (uint4*)q); }},
  };
  const char* names[] = {"M1 H4096", "M64 H7168", "M256 H7168"};
  for (int i = 0; i < 3; ++i) {
    for (bool pdl : {false, true}) {
      rows.push_back({std::string("ours ") + names[i] + (pdl ? ", PDL" : ""), ours(probs[i], pdl)});
      rows.push_back({std::string("lean ") + names[i] + (pdl ? ", PDL" : ""), lean(probs[i], pdl)});
    }
  }
  // launch shapes of the real kernel, PDL on: threads x waves
  std::printf("%-24s", "shape sweep, PDL");
  const int shapes[][2] = {{0, 16}, {128, 16}, {256, 16}, {512, 16}, {128, 2}, {256, 2}, {256, 1}, {512, 1}};
  for (auto& sh : shapes) std::printf(" %5dx%-3d", sh[0], sh[1]);
  std::printf("\n");
  const char* all_names[] = {"M1 H4096", "M64 H7168", "M256 H7168", "M1024 H4096", "M4096 H4096"};
  for (int i = 0; i < 5; ++i) {
    std::printf("%-24s", all_names[i]);
    for (auto& sh : shapes) std::printf(" %9.3f", time_graph(ours(probs[i], true, sh[0], sh[1]), 20));
    std::printf("\n");
  }
  std::printf("%-34s %10s %12s %14s\n", "kernel", "us/launch", "chain10 us", "chain10 x20 us");
  for (auto& r : rows) {
    const double one = time_graph(r.fn, 20);
    auto chain = [&](cudaStream_t st) { for (int i = 0; i < 10; ++i) r.fn(st); };
    const double c1 = time_graph(chain, 1, 50);
    const double c20 = time_graph(chain, 20);
    std::printf("%-34s %10.3f %12.3f %14.3f\n", r.name.c_str(), one, c1, c20);
  }
  return 0;
}
