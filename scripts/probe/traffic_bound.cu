// What the fused op's bytes cost without its math: a kernel that moves exactly the traffic of the fused
// RMSNorm -> quant call (bf16 -> fp8, group 128, residual, column-major TMA fp32 scales) but has no row
// reduction and no dependence between threads: each thread reads its x, residual and weight vectors and
// writes a residual vector, 8 code bytes (and, "normed", a normed vector), one thread per 128 elements a
// scale. The fused op as dispatched (launch_rmsnorm_quant) is timed in the same process for comparison,
// all as the benchmark times (CUDA-graph replay, median, probe_util.cuh).
//   traffic M,M,... H         rows spread over a 2-D grid (x: slices of the row, y: rows) in several block
//                             shapes, the fastest per call; and one block per row (H / 16 threads of two
//                             vectors) with a barrier after the loads ("row-sync": the one dependency every
//                             RMSNorm has, its row's sum before any output, without the sum)
//   traffic M,M,... H rows    long calls: the row-sync kernel as the fused op runs them, with its L2 prefetch
//                             of the rows one round of resident blocks ahead, at its own occupancy and held
//                             to 2 or 3 blocks per SM (by dynamic shared memory), against the flat 256 x 1
//                             shape and the fused op
//   PROBE=scripts/probe/traffic_bound.cu scripts/probe/build_probe.sh /tmp/traffic && /tmp/traffic 64,256 7168
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "cuda/rmsnorm_quant.cuh"
#include "probe_util.cuh"

using namespace sgl_quant;

struct TrafficArgs {
  const uint4* x;
  uint4* r;
  const uint4* w;
  uint2* q;
  uint4* normed;  // null: not written
  float* s;       // column-major: s[group * m4 + row]
  int vecs_per_row;
  int m4;
  int num_rows;
  int prefetch_rows;  // PREFETCH: how far ahead thread 0 prefetches rows into L2 (one round)
};

// V vectors of 8 elements per thread, blockDim.x apart (coalesced); the stores depend on the loads only,
// or (ROW_SYNC, one block per row) also on a block barrier after the loads: the one dependency every
// RMSNorm has (its row's sum before any output), without the sum. PREFETCH (with ROW_SYNC): after the
// barrier thread 0 prefetches the x and residual rows one round ahead into L2, as the fused op's
// prefetching kernel does after its reduction.
template <int V, bool ROW_SYNC = false, bool PREFETCH = false>
__global__ void traffic_kernel(const TrafficArgs a) {
  pdl_wait_for_producer();
  pdl_allow_dependents();
  const int row = blockIdx.y;
  const int64_t base = static_cast<int64_t>(row) * a.vecs_per_row;
  uint4 xv[V], rv[V], wv[V];
  int c[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    c[k] = (blockIdx.x * V + k) * blockDim.x + threadIdx.x;
    if (c[k] < a.vecs_per_row) {
      xv[k] = a.x[base + c[k]];
      rv[k] = a.r[base + c[k]];
      wv[k] = a.w[c[k]];
    }
  }
  if constexpr (ROW_SYNC) __syncthreads();
  if constexpr (PREFETCH) {
    const int ahead = row + a.prefetch_rows;
    if (threadIdx.x == 0 && ahead < a.num_rows) {
      prefetch_to_l2(a.x + static_cast<int64_t>(ahead) * a.vecs_per_row, a.vecs_per_row * 16);
      prefetch_to_l2(a.r + static_cast<int64_t>(ahead) * a.vecs_per_row, a.vecs_per_row * 16);
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    if (c[k] >= a.vecs_per_row) continue;
    const uint4 sum = make_uint4(xv[k].x + rv[k].x, xv[k].y + rv[k].y, xv[k].z + rv[k].z, xv[k].w + rv[k].w);
    a.r[base + c[k]] = sum;
    const uint4 n = make_uint4(sum.x ^ wv[k].x, sum.y ^ wv[k].y, sum.z ^ wv[k].z, sum.w ^ wv[k].w);
    if (a.normed != nullptr) a.normed[base + c[k]] = n;
    a.q[base + c[k]] = make_uint2(__byte_perm(n.x, n.y, 0x7531), __byte_perm(n.z, n.w, 0x7531));
    if (c[k] % 16 == 0) a.s[static_cast<int64_t>(c[k] / 16) * a.m4 + row] = __uint_as_float((n.x & 0x3fffffffu) | 0x30000000u);
  }
}

template <int V, bool ROW_SYNC = false, bool PREFETCH = false>
void launch_traffic(const TrafficArgs& a, int m, int threads, bool pdl, cudaStream_t st, int smem = 0) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3((a.vecs_per_row + threads * V - 1) / (threads * V), m);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  config.stream = st;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attr;
  config.numAttrs = pdl ? 1 : 0;
  CK(cudaLaunchKernelEx(&config, traffic_kernel<V, ROW_SYNC, PREFETCH>, a));
}

int main(int argc, char** argv) {
  std::vector<int> ms = {1, 64, 256, 1024, 4096, 16384};
  if (argc > 1) {
    ms.clear();
    for (const char* p = argv[1]; *p;) {
      ms.push_back(std::atoi(p));
      while (*p && *p != ',') ++p;
      if (*p == ',') ++p;
    }
  }
  const int h = argc > 2 ? std::atoi(argv[2]) : 7168;
  int max_m = 1;
  for (int m : ms) max_m = std::max(max_m, m);
  const size_t n = size_t(max_m) * h;
  uint16_t *x, *r, *w, *nrm;
  uint8_t* q;
  float* s;
  CK(cudaMalloc(&x, n * 2));
  CK(cudaMalloc(&r, n * 2));
  CK(cudaMalloc(&w, size_t(h) * 2));
  CK(cudaMalloc(&nrm, n * 2));
  CK(cudaMalloc(&q, n));
  CK(cudaMalloc(&s, size_t(max_m + 3) / 4 * 4 * (h / 128) * 4));
  fill_bf16_kernel<<<1024, 256>>>(x, n, 1);
  fill_bf16_kernel<<<1024, 256>>>(r, n, 2);
  fill_bf16_kernel<<<64, 256>>>(w, h, 3);
  CK(cudaDeviceSynchronize());
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

  auto refill_residual = [&] {  // before timing the fused op: the traffic kernels' adds leave no bf16 values to normalize
    fill_bf16_kernel<<<1024, 256>>>(r, n, 2);
    CK(cudaDeviceSynchronize());
  };
  auto fused = [&](int m, bool normed, bool pdl) {
    return [=](cudaStream_t st) {
      RmsNormQuantParams p;
      QuantParams& qp = p.quant;
      qp.input = x; qp.output_q = q; qp.output_s = s;
      qp.num_outer = 1; qp.rows_per_outer = m; qp.in_row_stride = h;
      qp.s_row_stride = 1; qp.s_group_stride = (m + 3) / 4 * 4;
      qp.hidden = h; qp.groups_per_row = h / 128; qp.group_size = 128; qp.eps = 1e-10f;
      qp.scale_kind = ScaleKind::kFloat;
      p.weight = w; p.residual = r; p.output_normed = normed ? nrm : nullptr; p.norm_eps = 1e-6f;
      LaunchOptions o;
      o.stream = st; o.num_sms = sms; o.pdl = pdl; o.clusters = true;
      CK((launch_rmsnorm_quant<__nv_bfloat16, Fp8Range, 128, ScaleKind::kFloat>(p, o)));
    };
  };
  auto args_of = [&](int m, bool normed) {
    TrafficArgs a;
    a.x = reinterpret_cast<const uint4*>(x); a.r = reinterpret_cast<uint4*>(r); a.w = reinterpret_cast<const uint4*>(w);
    a.q = reinterpret_cast<uint2*>(q); a.normed = normed ? reinterpret_cast<uint4*>(nrm) : nullptr; a.s = s;
    a.vecs_per_row = h / 8; a.m4 = (m + 3) / 4 * 4; a.num_rows = m; a.prefetch_rows = 0;
    return a;
  };
  if (argc > 3 && std::string(argv[3]) == "rows") {
    const int threads = h / 16;
    constexpr auto prefetching = traffic_kernel<2, true, true>;
    CK(cudaFuncSetAttribute(prefetching, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    std::printf("%-18s %6s | %-17s %-17s %-17s %-17s %-17s %-17s | µs without / with PDL\n", "problem", "normed", "flat 256x1",
                "row-sync", "row-sync PF", "row-sync PF 2/SM", "row-sync PF 3/SM", "fused");
    for (int m : ms) {
      for (int normed = 0; normed < 2; ++normed) {
        TrafficArgs a = args_of(m, normed != 0);
        auto both = [&](const std::function<void(cudaStream_t, bool)>& launch) {
          const double t0 = time_graph([&](cudaStream_t st) { launch(st, false); }, 20);
          const double t1 = time_graph([&](cudaStream_t st) { launch(st, true); }, 20);
          char buf[64];
          std::snprintf(buf, sizeof(buf), "%8.3f/%-8.3f", t0, t1);
          return std::string(buf);
        };
        std::string cols[6];
        cols[0] = both([&](cudaStream_t st, bool pdl) { launch_traffic<1>(a, m, 256, pdl, st); });
        cols[1] = both([&](cudaStream_t st, bool pdl) { launch_traffic<2, true>(a, m, threads, pdl, st); });
        const int smem_of[3] = {0, 100 * 1024, 70 * 1024};  // own occupancy, 2 and 3 blocks per SM
        for (int k = 0; k < 3; ++k) {
          int occupancy = 0;
          CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occupancy, prefetching, threads, smem_of[k]));
          TrafficArgs ap = a;
          ap.prefetch_rows = occupancy * sms;
          cols[2 + k] = both([&](cudaStream_t st, bool pdl) { launch_traffic<2, true, true>(ap, m, threads, pdl, st, smem_of[k]); });
          if (k == 0) std::printf("(row-sync PF: %d blocks per SM)\n", occupancy);
        }
        refill_residual();
        cols[5] = both([&](cudaStream_t st, bool pdl) { fused(m, normed != 0, pdl)(st); });
        std::printf("M=%-5d H=%-5d %6d |", m, h, normed);
        for (const auto& c : cols) std::printf(" %-17s", c.c_str());
        std::printf("\n");
        std::fflush(stdout);
      }
    }
    return 0;
  }
  struct Shape {
    int threads, vecs;
  };
  const std::vector<Shape> shapes = {{128, 1}, {128, 2}, {256, 1}, {256, 2}, {448, 1}, {448, 2}, {512, 1}, {896, 1}, {1024, 1}};
  // columns: the fastest shape (threads x vectors per thread) and its µs without PDL, then with PDL; one
  // block per row (threads of two vectors each, H / 16) with a barrier after the loads; the fused op
  std::printf("%-18s %6s | %-8s %8s | %-8s %8s | %9s %9s | %9s %9s | roofline\n", "problem", "normed", "shape", "us",
              "shape", "us PDL", "row-sync", "rs PDL", "fused", "fused PDL");
  for (int m : ms) {
    for (int normed = 0; normed < 2; ++normed) {
      const TrafficArgs a = args_of(m, normed != 0);
      double best[2] = {1e30, 1e30};
      std::string best_shape[2];
      for (const Shape& sh : shapes) {
        if (sh.threads * sh.vecs > 2 * a.vecs_per_row) continue;  // most of the block idle
        for (int pdl = 0; pdl < 2; ++pdl) {
          const double us = time_graph([&](cudaStream_t st) {
            if (sh.vecs == 1) launch_traffic<1>(a, m, sh.threads, pdl != 0, st);
            else launch_traffic<2>(a, m, sh.threads, pdl != 0, st);
          }, 20);
          if (us < best[pdl]) {
            best[pdl] = us;
            best_shape[pdl] = std::to_string(sh.threads) + "x" + std::to_string(sh.vecs);
          }
        }
      }
      double row_sync[2] = {0, 0};
      if (h / 16 <= 1024) {
        for (int pdl = 0; pdl < 2; ++pdl) {
          row_sync[pdl] = time_graph([&](cudaStream_t st) { launch_traffic<2, true>(a, m, h / 16, pdl != 0, st); }, 20);
        }
      }
      refill_residual();
      const double bytes = double(m) * h * (normed ? 9 : 7) + double(m) * (h / 128) * 4;
      std::printf("M=%-5d H=%-5d %6d | %-8s %8.3f | %-8s %8.3f | %9.3f %9.3f | %9.3f %9.3f | %.2f us at 4.2 TB/s\n", m, h,
                  normed, best_shape[0].c_str(), best[0], best_shape[1].c_str(), best[1], row_sync[0], row_sync[1],
                  time_graph(fused(m, normed != 0, false), 20), time_graph(fused(m, normed != 0, true), 20), bytes / 4.2e6);
      std::fflush(stdout);
    }
  }
  return 0;
}
