// Shared by the probes: a CUDA error check and graph-replay timing (median µs per launch over 25
// replays of a CUDA graph, after 200 replays to ramp the clocks up), as the benchmark times: the graph
// holds as many launches as take about 10 ms (at least `calls`), so that the graph's own launch (a few
// µs, inside each replay's events) adds nothing visible per launch (20 launches per graph, as until
// session 6, added ~0.2 µs to every small call).
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); std::exit(1); } } while (0)

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
