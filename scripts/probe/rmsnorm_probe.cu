// Probe of the fused RMSNorm -> quant kernel (csrc/cuda/rmsnorm_quant.cuh) without torch: the real
// launcher and kernel (bf16 -> fp8, group 128, residual, column-major TMA fp32 scales), timed like the
// benchmark (CUDA graph of 20 launches, median of 25 replays), for M = 1 ... 16384 at H = 7168 and 4096,
// without and with PDL; with -DSGLQ_PROBE_PHASES, where one block's time goes at M = 1 (%globaltimer at
// the kernel's phases, median of 50 launches). For an A/B, put SGLQ_EXP_* switches in the header (session 5's
// were removed after their runs: benchmark/NOTES.md).
//   PROBE=scripts/probe/rmsnorm_probe.cu scripts/probe/build_probe.sh /tmp/rms [nvcc flags] && /tmp/rms
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "cuda/rmsnorm_quant.cuh"
#include "probe_util.cuh"

using namespace sgl_quant;

__global__ void fill_kernel(uint16_t* p, size_t n, uint32_t seed) {  // bf16 values of about +-4
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = static_cast<uint16_t>(0x3c00 + (h & 0x3ff) + ((h >> 10) & 1) * 0x8000 + ((h >> 11) & 3) * 0x80);
  }
}

int main() {
  const int kMaxM = 16384, kMaxH = 7168;
  uint16_t *x, *r, *w;
  uint8_t* q;
  float* s;
  CK(cudaMalloc(&x, size_t(kMaxM) * kMaxH * 2));
  CK(cudaMalloc(&r, size_t(kMaxM) * kMaxH * 2));
  CK(cudaMalloc(&w, kMaxH * 2));
  CK(cudaMalloc(&q, size_t(kMaxM) * kMaxH));
  CK(cudaMalloc(&s, size_t(kMaxM) * (kMaxH / 128) * 4));
  fill_kernel<<<1024, 256>>>(x, size_t(kMaxM) * kMaxH, 1);
  fill_kernel<<<1024, 256>>>(r, size_t(kMaxM) * kMaxH, 2);
  fill_kernel<<<64, 256>>>(w, kMaxH, 3);
  CK(cudaDeviceSynchronize());
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  auto params = [&](int m, int h) {
    RmsNormQuantParams p;
    QuantParams& qp = p.quant;
    qp.input = x; qp.output_q = q; qp.output_s = s;
    qp.num_outer = 1; qp.rows_per_outer = m; qp.in_row_stride = h;
    const int m4 = (m + 3) / 4 * 4;
    qp.s_row_stride = 1; qp.s_group_stride = m4;  // column-major, TMA-aligned
    qp.hidden = h; qp.groups_per_row = h / 128; qp.group_size = 128; qp.eps = 1e-10f;
    qp.scale_kind = ScaleKind::kFloat;
    p.weight = w; p.residual = r; p.output_normed = nullptr; p.norm_eps = 1e-6f;
    return p;
  };
  auto launcher = [&](int m, int h, bool pdl) {
    return [=](cudaStream_t st) {
      LaunchOptions o;
      o.stream = st; o.num_sms = sms; o.pdl = pdl;
      CK((launch_rmsnorm_quant<__nv_bfloat16, Fp8Range, 128, ScaleKind::kFloat, 1>(params(m, h), o)));
    };
  };
  std::printf("%-22s %9s %9s %9s\n", "problem", "us", "us PDL", "roof us");
  for (int h : {7168, 4096}) {
    for (int m : {1, 64, 256, 1024, 4096, 16384}) {
      const double bytes = double(m) * h * 7 + double(m) * (h / 128) * 4;
      std::printf("rms M=%-5d H=%-5d     %9.2f %9.2f %9.2f\n", m, h, time_graph(launcher(m, h, false), 20),
                  time_graph(launcher(m, h, true), 20), bytes / 4.23e6);
    }
  }
#ifdef SGLQ_PROBE_PHASES
  std::vector<std::vector<double>> d(4);
  for (int i = 0; i < 50; ++i) {
    launcher(1, 7168, false)(0);
    CK(cudaDeviceSynchronize());
    unsigned long long t[8];
    CK(cudaMemcpyFromSymbol(t, g_probe_phases, sizeof(t)));
    for (int k = 0; k < 4; ++k) d[k].push_back(double(t[k + 1] - t[k]));
  }
  const char* names[4] = {"start -> loads used", "-> ss known", "-> inv known", "-> quantized, stored"};
  for (int k = 0; k < 4; ++k) {
    std::sort(d[k].begin(), d[k].end());
    std::printf("phase M=1 H=7168 %-22s %8.0f ns (median of 50)\n", names[k], d[k][25]);
  }
#endif
  return 0;
}
