// Latency probe (issue 5; results in benchmark/NOTES.md): the real launcher and kernel without
// torch, timed under CUDA-graph replay (20 launches per graph, median of 25 replays, like the
// benchmark), next to an empty kernel and a bare load/store round trip of the M=1 bytes. Problems:
// dense bf16 -> fp8 g128 with column-major fp32 scales (M=1..16384), and fused SiLU H=2048 with
// packed UE8M0 scales, masked (the benchmark's counts) and dense over the same valid rows. Each
// without and with PDL, a steady-state chain of 10, and a launch-shape sweep (threads x waves).
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
  std::string name;
  QuantParams p;
  int waves;
  void (*launch)(const QuantParams&, const LaunchOptions&);
};

void* device_bf16(size_t n) {
  std::vector<uint16_t> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<uint16_t>(0x3f80 + (i * 37 % 251) - 125);  // bf16 near 1
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
  CK((launch_per_token_group_quant<__nv_bfloat16, Fp8Range, 128, SK, SILU>(p, o)));
}

// bf16 [M, H] -> fp8, g128, column-major TMA-aligned fp32 scales
Problem dense_problem(int M, int H) {
  Problem r;
  r.name = "M" + std::to_string(M) + " H" + std::to_string(H);
  const int G = H / 128, m_pad = (M + 3) / 4 * 4;
  QuantParams& p = r.p;
  p.input = device_bf16(static_cast<size_t>(M) * H);
  p.output_q = device_zeros(static_cast<size_t>(M) * H);
  p.output_s = device_zeros(4ull * m_pad * G);
  p.num_outer = 1;
  p.rows_per_outer = M;
  p.in_row_stride = H;
  p.s_row_stride = 1;
  p.s_group_stride = m_pad;
  p.hidden = H;
  p.groups_per_row = G;
  p.group_size = 128;
  r.waves = 16;
  r.launch = launch_variant<ScaleKind::kFloat, false>;
  return r;
}

// Fused SiLU, H=2048, packed UE8M0 column-major scales; masked [E, rows, 2H] with the benchmark's
// counts (make_masked_m(E, rows, seed=3)), or dense [M, 2H] over the same number of valid rows.
Problem silu_problem(int E, int rows, const std::vector<int>& counts, bool masked) {
  Problem r;
  const int H = 2048, G = H / 128;
  int valid = 0;
  for (int c : counts) valid += c;
  const int outer = masked ? E : 1, per_outer = masked ? rows : valid, m_pad = (per_outer + 3) / 4 * 4;
  r.name = masked ? "masked E" + std::to_string(E) + "x" + std::to_string(rows) : "dense silu M" + std::to_string(valid);
  QuantParams& p = r.p;
  p.input = device_bf16(static_cast<size_t>(outer) * per_outer * 2 * H);
  p.output_q = device_zeros(static_cast<size_t>(outer) * per_outer * H);
  p.output_s = device_zeros(4ull * outer * m_pad * ((G + 3) / 4));
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
  r.waves = masked ? 2 : 16;
  r.launch = launch_variant<ScaleKind::kPackedUE8M0, true>;
  return r;
}

int main() {
  int num_sms;
  CK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, 0));
  const std::vector<int> c8 = {0, 88, 142, 438, 5, 40, 265, 512};  // make_masked_m(8, 512, seed=3)
  const std::vector<int> c32 = {0,   105, 86,  222, 149, 156, 151, 42,  172, 93,  22,  216, 173, 215, 166, 61,
                                64,  81,  171, 4,   72,  139, 253, 47,  200, 235, 222, 148, 198, 147, 37,  256};
  std::vector<Problem> probs = {dense_problem(1, 4096), dense_problem(64, 7168), dense_problem(256, 7168),
                                dense_problem(1024, 4096), dense_problem(4096, 4096), dense_problem(16384, 7168),
                                silu_problem(8, 512, c8, true), silu_problem(8, 512, c8, false),
                                silu_problem(32, 256, c32, true), silu_problem(32, 256, c32, false)};
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
