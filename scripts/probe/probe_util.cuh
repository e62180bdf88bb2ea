// Shared by the probes: a CUDA error check, a bf16 fill, and graph-replay timing (median µs per launch
// over 25 replays of a CUDA graph, after 200 replays to ramp the clocks up), as the benchmark times: the
// graph holds as many launches as take about 10 ms (at least `calls`), so that the graph's own launch (a
// few µs, inside each replay's events) adds nothing visible per launch (20 launches per graph, as until
// session 6, added ~0.2 µs to every small call).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); std::exit(1); } } while (0)

// bf16 values of about +-4 (exponents 2^-1 .. 2^2, both signs) from a hash of the index and seed.
__global__ void fill_bf16_kernel(uint16_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = static_cast<uint16_t>(0x3c00 + (h & 0x3ff) + ((h >> 10) & 1) * 0x8000 + ((h >> 11) & 3) * 0x80);
  }
}

// true: capture and instantiate as torch.cuda.graph does (global capture mode, auto-free on launch)
bool g_torch_like_capture = false;

double time_graph_once(const std::function<void(cudaStream_t)>& fn, cudaStream_t s, int calls, int replays) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, g_torch_like_capture ? cudaStreamCaptureModeGlobal : cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i) fn(s);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, g_torch_like_capture ? cudaGraphInstantiateFlagAutoFreeOnLaunch : 0));
  const int warmup = std::max(2, 200 * 20 / calls);
  for (int i = 0; i < warmup; ++i) CK(cudaGraphLaunch(ge, s));  // clocks up
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
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return v[v.size() / 2];
}

double time_graph(const std::function<void(cudaStream_t)>& fn, int calls, int replays = 25) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  fn(s);
  CK(cudaStreamSynchronize(s));
  const double estimate = time_graph_once(fn, s, calls, 5);
  const int sized = static_cast<int>(std::min(5000.0, std::max<double>(calls, 1e4 / std::max(estimate, 1e-3))));
  const double us = time_graph_once(fn, s, sized, replays);
  CK(cudaStreamDestroy(s));
  return us;
}

// The median of v (the upper one of an even count).
inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

#ifdef SGLQ_PROBE_PHASES
// One launch's block timeline: (start, end) of every block in ns from the first block's start, by block index.
inline std::vector<std::pair<double, double>> block_timeline(const std::function<void()>& launch) {
  std::vector<unsigned long long> t(2 * sgl_quant::kProbeMaxBlocks);
  void* addr = nullptr;
  CK(cudaGetSymbolAddress(&addr, sgl_quant::g_probe_blocks));
  CK(cudaMemset(addr, 0, t.size() * 8));
  launch();
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(t.data(), addr, t.size() * 8, cudaMemcpyDeviceToHost));
  unsigned long long t0 = ~0ull;
  int nb = 0;
  for (int b = 0; b < sgl_quant::kProbeMaxBlocks && t[2 * b] != 0; ++b, ++nb) t0 = std::min(t0, t[2 * b]);
  std::vector<std::pair<double, double>> out(nb);
  for (int b = 0; b < nb; ++b) out[b] = {double(t[2 * b] - t0), double(t[2 * b + 1] - t0)};
  return out;
}

// Block timeline of single launches (the kernels' SGLQ_PROBE_BLOCK marks, thread 0 of every block),
// medians over `reps` launches of `launch`: blocks, and in ns from the first block's start the last
// block's start, the median and the longest block run, the last block's end. All zero for a kernel
// without marks (small_call_quant_kernel).
struct BlockSpans {
  double blocks, last_start, median_run, max_run, last_end;
};
inline BlockSpans block_spans(const std::function<void()>& launch, int reps = 21) {
  std::vector<double> n, last_start, median_run, max_run, last_end;
  for (int rep = 0; rep < reps; ++rep) {
    const auto tl = block_timeline(launch);
    if (tl.empty()) return {0, 0, 0, 0, 0};
    std::vector<double> runs;
    double ls = 0, le = 0;
    for (const auto& [start, end] : tl) {
      ls = std::max(ls, start);
      le = std::max(le, end);
      runs.push_back(end - start);
    }
    n.push_back(tl.size()), last_start.push_back(ls), median_run.push_back(median_of(runs));
    max_run.push_back(*std::max_element(runs.begin(), runs.end())), last_end.push_back(le);
  }
  return {median_of(n), median_of(last_start), median_of(median_run), median_of(max_run), median_of(last_end)};
}
#endif
