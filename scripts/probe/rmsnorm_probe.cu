// Probe of the fused RMSNorm -> quant kernel (csrc/cuda/rmsnorm_quant.cuh) without torch: the real
// launcher and kernel (bf16 -> fp8, group 128, residual, column-major TMA fp32 scales), timed like the
// benchmark (CUDA-graph replay, median; probe_util.cuh), without and with PDL.
//   rms            M = 1 ... 16384 at H = 7168 and 4096: as dispatched, with one and with two chunks per thread
//   rms normed     H = 7168 as dispatched, without and with output_normed
//   rms normsweep  M = 64 ... 4096 at H = 7168 and 4096, without and with output_normed: as dispatched, one
//                  chunk in clusters of 1, 2, 4 (below 4096 rows), two chunks; two rounds
//   rms mid        M = 1024 ... 4096 around the L2 size and rows of H = 12288, 16384, without and with output_normed
//   rms sweep      M = 1, 64, 256 in clusters of 1, 2, 4, 8 blocks (LaunchOptions::rmsnorm_cluster)
//   rms check      the bytes (codes, scales, residual) of every cluster size and of two chunks per thread
//                  equal those of one block per row, over H = 256 ... 16384 and M = 1, 5, 64, 1024 (exits 1
//                  if not); two-chunk grids of one wave, so that at M=1024 their blocks loop over rows
//                  (both warp-sum buffers; one-chunk blocks and clusters take one row group each)
//   rms waves      two chunks per thread under grids of 16, 4, 2, 1 waves, M = 1024 ... 16384
//   rms capture    M = 1, 64 (H = 7168) in clusters of 1 and 4, in graphs captured as here and as torch does
//   rms cases M:H,... C,... K,... N,... S,...  the given cases in clusters of C blocks (0: automatic) with K
//                  chunks per thread (0, the default: as dispatched), without (N = 0, the default) or with (1)
//                  output_normed, with S rows staged per block (0, the default: as dispatched; > 0: the kStaged
//                  kernel, one chunk), two rounds
//   rms staged [check|quick]  the kStaged kernel's bytes (1-3 stages) against the dispatched kernels' over H =
//                  1024 ... 16384 and M = 1 ... 3000 (exits 1 if any differ), then (not with "check") its times
//                  against them at M = 256 ... 16384 ("quick": H = 7168, M = 1024 ... 16384)
//   rms once M H   one launch as dispatched (for ncu)
//   rms dump DIR   codes, residual and scales of H = 256 ... 16384, M = 1, 5, 64, 1024 as dispatched, and of
//                  three long calls (the prefetching kernel), one file per shape (compare two builds with cmp)
// With -DSGLQ_PROBE_PHASES (mode "phases": only these), where block 0's time goes at M = 1, 64, 256
// (%globaltimer at the kernel's phases, median of 50 launches), and when every block starts and ends;
// mode "timeline" (only this): the large calls' ramp and tail against their steady rate.
// For an A/B, put SGLQ_EXP_* switches in the header (removed after their runs: benchmark/NOTES.md), or
// build the committed header against the working tree's (it first on the include path: -I <copy> -I csrc).
//   PROBE=scripts/probe/rmsnorm_probe.cu scripts/probe/build_probe.sh /tmp/rms [nvcc flags] && /tmp/rms
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cuda/rmsnorm_quant.cuh"
#include "probe_util.cuh"

using namespace sgl_quant;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "table";
  const int kMaxM = mode == "check" ? 1024 : 16384, kMaxH = 16384;
  uint16_t *x, *r, *r0, *w, *nrm;
  uint8_t* q;
  float* s;
  CK(cudaMalloc(&x, size_t(kMaxM) * kMaxH * 2));
  CK(cudaMalloc(&r, size_t(kMaxM) * kMaxH * 2));
  CK(cudaMalloc(&r0, size_t(64) * kMaxH * 2));
  CK(cudaMalloc(&w, kMaxH * 2));
  CK(cudaMalloc(&nrm, size_t(kMaxM) * kMaxH * 2));
  CK(cudaMalloc(&q, size_t(kMaxM) * kMaxH));
  CK(cudaMalloc(&s, size_t(kMaxM) * (kMaxH / 128) * 4));
  fill_bf16_kernel<<<1024, 256>>>(x, size_t(kMaxM) * kMaxH, 1);
  fill_bf16_kernel<<<1024, 256>>>(r, size_t(kMaxM) * kMaxH, 2);
  fill_bf16_kernel<<<64, 256>>>(w, kMaxH, 3);
  CK(cudaDeviceSynchronize());
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  auto params = [&](int m, int h, bool normed) {  // normed: output_normed written
    RmsNormQuantParams p;
    QuantParams& qp = p.quant;
    qp.input = x; qp.output_q = q; qp.output_s = s;
    qp.num_outer = 1; qp.rows_per_outer = m; qp.in_row_stride = h;
    const int m4 = (m + 3) / 4 * 4;
    qp.s_row_stride = 1; qp.s_group_stride = m4;  // column-major, TMA-aligned
    qp.hidden = h; qp.groups_per_row = h / 128; qp.group_size = 128; qp.eps = 1e-10f;
    qp.scale_kind = ScaleKind::kFloat;
    p.weight = w; p.residual = r; p.output_normed = normed ? nrm : nullptr; p.norm_eps = 1e-6f;
    return p;
  };
  // One call of M rows of H and how it is launched (the fields after h: LaunchOptions, defaults as the
  // extension's).
  struct Launch {
    int m, h;
    int cluster = 0;      // blocks per row (rmsnorm_cluster): 0 automatic
    int chunks = 0;       // chunks per thread: 0 as the extension dispatches (launch_rmsnorm_quant), else 1 or 2
    int stages = 0;       // rows staged per block (rmsnorm_stages): 0 automatic (as dispatched), > 0 forced (one chunk)
    int waves = 64;       // two-chunk grids: rounds of resident blocks
    bool normed = false;  // output_normed written
  };
  auto launcher = [&](const Launch& c, bool pdl) {
    return [=](cudaStream_t st) {
      LaunchOptions o;
      o.stream = st; o.num_sms = sms; o.pdl = pdl; o.clusters = true; o.rmsnorm_cluster = c.cluster; o.waves = c.waves;
      o.rmsnorm_stages = c.stages;
      const RmsNormQuantParams p = params(c.m, c.h, c.normed);
      if (c.chunks == 0) {
        CK((launch_rmsnorm_quant<__nv_bfloat16, Fp8Range, 128, ScaleKind::kFloat>(p, o)));
      } else if (c.chunks == 2) {
        CK((launch_rmsnorm_quant_kernel<__nv_bfloat16, Fp8Range, 128, ScaleKind::kFloat, 2>(p, o)));
      } else {
        CK((launch_rmsnorm_quant_kernel<__nv_bfloat16, Fp8Range, 128, ScaleKind::kFloat, 1>(p, o)));
      }
    };
  };
  // A call's graph-replay medians without and with PDL, as "%9.3f %9.3f".
  auto times = [&](const Launch& c) {
    char text[32];
    std::snprintf(text, sizeof(text), "%9.3f %9.3f", time_graph(launcher(c, false), 20), time_graph(launcher(c, true), 20));
    return std::string(text);
  };
  // Runs `launch` on the same residual every time (it is updated in place) and on poisoned codes and
  // scales; returns what it wrote.
  struct Outputs {
    std::vector<uint8_t> codes, residual, scales;
  };
  auto run_and_read = [&](int m, int h, const std::function<void(cudaStream_t)>& launch) {
    const size_t nq = size_t(m) * h, ns = size_t((m + 3) / 4 * 4) * (h / 128) * 4;
    fill_bf16_kernel<<<64, 256>>>(r, nq, 7);
    CK(cudaMemset(q, 0xA5, nq));
    CK(cudaMemset(s, 0xA5, ns));
    launch(0);
    CK(cudaDeviceSynchronize());
    Outputs o{std::vector<uint8_t>(nq), std::vector<uint8_t>(nq * 2), std::vector<uint8_t>(ns)};
    CK(cudaMemcpy(o.codes.data(), q, nq, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(o.residual.data(), r, nq * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(o.scales.data(), s, ns, cudaMemcpyDeviceToHost));
    return o;
  };
  if (mode == "check") {
    int bad = 0, runs = 0;
    for (int h : {256, 640, 1024, 2048, 4096, 7168, 8192, 16384}) {
      for (int m : {1, 5, 64, 1024}) {
        Outputs want;
        for (int c = 1; c <= 9; ++c) {  // clusters of 1..8 blocks, then (9) two chunks per thread
          if (c == 9 && h < 1024) continue;
          // one wave: at M=1024 two-chunk blocks loop
          const Launch one_wave = {.m = m, .h = h, .cluster = c == 9 ? 1 : c, .chunks = c == 9 ? 2 : 1, .waves = 1};
          const Outputs got = run_and_read(m, h, launcher(one_wave, false));
          ++runs;
          if (c == 1) {
            want = got;
          } else if (got.codes != want.codes || got.scales != want.scales || got.residual != want.residual) {
            std::printf("DIFFERENT bytes: H=%d M=%d cluster=%d (9: two chunks) (codes %d scales %d residual %d)\n", h, m, c,
                        int(got.codes != want.codes), int(got.scales != want.scales), int(got.residual != want.residual));
            ++bad;
          }
        }
      }
    }
    std::printf("check: %d launches, %d differ from cluster 1\n", runs, bad);
    return bad ? 1 : 0;
  }
  if (mode == "staged") {  // the kStaged kernel's bytes against the dispatched kernels', then its times
    int bad = 0, runs = 0;
    for (int h : {1024, 4096, 7168, 8192, 16384}) {
      for (int m : {1, 5, 64, 1024, 3000}) {
        const Outputs want = run_and_read(m, h, launcher({.m = m, .h = h}, false));
        for (int st : {1, 2, 3}) {
          const Outputs got = run_and_read(m, h, launcher({.m = m, .h = h, .cluster = 1, .chunks = 1, .stages = st}, false));
          ++runs;
          if (got.codes != want.codes || got.scales != want.scales || got.residual != want.residual) {
            std::printf("DIFFERENT bytes: H=%d M=%d stages=%d (codes %d scales %d residual %d)\n", h, m, st,
                        int(got.codes != want.codes), int(got.scales != want.scales), int(got.residual != want.residual));
            ++bad;
          }
        }
      }
    }
    std::printf("staged check: %d launches, %d differ from the dispatched kernels\n", runs, bad);
    if (argc > 2 && std::string(argv[2]) == "check") return bad ? 1 : 0;
    const bool quick = argc > 2 && std::string(argv[2]) == "quick";  // H=7168, M = 1024, 2048, 4096, 16384, 2-3 stages
    std::printf("%-22s %7s %8s %9s %9s\n", "problem", "normed", "stages", "us", "us PDL");
    for (int round = 0; round < 2; ++round) {
      for (int nm : {0, 1}) {
        for (int h : {7168, 4096}) {
          if (quick && h != 7168) continue;
          for (int m : {256, 512, 1024, 2048, 4096, 8192, 16384}) {
            if (quick && (m < 1024 || m == 8192)) continue;
            for (int st : {0, 2, 3, 4}) {  // 0: as dispatched
              if (st == 4 && (quick || nm == 1)) continue;
              std::printf("rms M=%-5d H=%-5d r%d %7d %8d %s\n", m, h, round, nm, st,
                          times({.m = m, .h = h, .chunks = st > 0 ? 1 : 0, .stages = st, .normed = nm == 1}).c_str());
            }
          }
        }
      }
    }
    return bad ? 1 : 0;
  }
  if (mode == "dump") {  // codes, residual and scales of a few shapes as dispatched, into argv[2], for cmp across builds
    const std::string dir = argc > 2 ? argv[2] : ".";
    std::vector<std::pair<int, int>> shapes;  // (H, M)
    for (int h : {256, 1024, 4096, 7168, 16384}) {
      for (int m : {1, 5, 64, 1024}) shapes.emplace_back(h, m);
    }
    for (auto hm : {std::make_pair(7168, 4096), std::make_pair(8192, 4200), std::make_pair(4096, 16384)}) {
      shapes.push_back(hm);  // long one-chunk calls: the prefetching kernel
    }
    for (const auto& [h, m] : shapes) {
      const Outputs o = run_and_read(m, h, launcher({.m = m, .h = h}, false));
      const std::string path = dir + "/rms_h" + std::to_string(h) + "_m" + std::to_string(m) + ".bin";
      FILE* f = std::fopen(path.c_str(), "wb");
      if (f == nullptr) return 1;
      bool ok = true;
      for (const auto* v : {&o.codes, &o.residual, &o.scales}) ok = ok && std::fwrite(v->data(), 1, v->size(), f) == v->size();
      std::fclose(f);
      if (!ok) return 1;
    }
    return 0;
  }
  if (mode == "waves") {  // two chunks per thread under grids of 16 ... 1 waves of resident blocks
    std::printf("%-22s %6s %9s %9s\n", "problem", "waves", "us", "us PDL");
    for (int h : {7168, 16384}) {
      for (int m : {1024, 4096, 16384}) {
        for (int wv : {16, 4, 2, 1}) {
          std::printf("rms M=%-5d H=%-5d     %6d %s\n", m, h, wv,
                      times({.m = m, .h = h, .cluster = 1, .chunks = 2, .waves = wv}).c_str());
        }
      }
    }
    return 0;
  }
  if (mode == "sweep") {
    std::printf("%-22s %8s %9s %9s\n", "problem", "cluster", "us", "us PDL");
    for (int h : {7168, 4096}) {
      for (int m : {1, 64, 256}) {
        for (int c : {1, 2, 4, 8}) {
          std::printf("rms M=%-5d H=%-5d     %8d %s\n", m, h, c, times({.m = m, .h = h, .cluster = c}).c_str());
        }
      }
    }
    return 0;
  }
  if (mode == "cases") {  // M:H cases (argv[2], e.g. 64:16384,48:16384), launch lists argv[3..6] (see the top)
    auto split = [](const std::string& text, char sep) {  // "a<sep>b<sep>c" -> {"a", "b", "c"}
      std::vector<std::string> parts;
      for (size_t at = 0; at <= text.size();) {
        const size_t end = std::min(text.find(sep, at), text.size());
        parts.push_back(text.substr(at, end - at));
        at = end + 1;
      }
      return parts;
    };
    std::vector<std::pair<int, int>> cases;  // (M, H)
    for (const std::string& mh : split(argc > 2 ? argv[2] : "64:16384", ',')) {
      const std::vector<std::string> v = split(mh, ':');
      cases.emplace_back(std::atoi(v[0].c_str()), v.size() > 1 ? std::atoi(v[1].c_str()) : 7168);
    }
    std::vector<int> clusters, chunks;
    for (const std::string& c : split(argc > 3 ? argv[3] : "0", ',')) clusters.push_back(std::atoi(c.c_str()));
    for (const std::string& c : split(argc > 4 ? argv[4] : "0", ',')) chunks.push_back(std::atoi(c.c_str()));
    std::vector<int> normed;  // argv[5]: 0 without output_normed, 1 with (default 0)
    for (const std::string& n : split(argc > 5 ? argv[5] : "0", ',')) normed.push_back(std::atoi(n.c_str()));
    std::vector<int> stages;  // argv[6]: rows staged per block (default 0: as dispatched)
    for (const std::string& n : split(argc > 6 ? argv[6] : "0", ',')) stages.push_back(std::atoi(n.c_str()));
    std::printf("%-25s %6s %8s %7s %7s %9s %9s\n", "problem", "normed", "cluster", "chunks", "stages", "us", "us PDL");
    for (int round = 0; round < 2; ++round) {
      for (const auto& [m, h] : cases) {
        for (int nm : normed) {
          for (int c : clusters) {
            for (int k : chunks) {
              for (int st : stages) {
                std::printf("rms M=%-5d H=%-5d r%d    %6d %8d %7d %7d %s\n", m, h, round, nm, c, k, st,
                            times({.m = m, .h = h, .cluster = c, .chunks = k, .stages = st, .normed = nm != 0}).c_str());
              }
            }
          }
        }
      }
    }
    return 0;
  }
  if (mode == "capture") {  // M=1, 64 H=7168 in clusters of 1 and 4, graphs captured as here and as torch does
    std::printf("%-22s %8s %9s %9s %12s %12s\n", "problem", "cluster", "us", "us PDL", "torch-like", "t-like PDL");
    for (int m : {1, 64}) {
      for (int c : {1, 4}) {
        double t[4];
        for (int k = 0; k < 4; ++k) {
          g_torch_like_capture = k >= 2;
          t[k] = time_graph(launcher({.m = m, .h = 7168, .cluster = c}, k % 2 == 1), 20);
        }
        g_torch_like_capture = false;
        std::printf("rms M=%-5d H=%-5d     %8d %9.3f %9.3f %12.3f %12.3f\n", m, 7168, c, t[0], t[1], t[2], t[3]);
      }
    }
    return 0;
  }
  if (mode == "once") {  // one launch of M (argv[2]) x H (argv[3]) as dispatched, no PDL: for ncu
    const int m = argc > 2 ? std::atoi(argv[2]) : 4096, h = argc > 3 ? std::atoi(argv[3]) : 7168;
    launcher({.m = m, .h = h}, false)(0);
    CK(cudaDeviceSynchronize());
    return 0;
  }
  // Modes "normed" and "mid": the shapes {M, H} as dispatched, without and then with output_normed.
  auto normed_table = [&](const std::vector<std::pair<int, int>>& shapes) {
    std::printf("%-22s %7s %9s %9s\n", "problem", "normed", "us", "us PDL");
    for (int nm : {0, 1}) {
      for (const auto& [m, h] : shapes) {
        std::printf("rms M=%-5d H=%-5d     %7d %s\n", m, h, nm, times({.m = m, .h = h, .normed = nm == 1}).c_str());
      }
    }
  };
  if (mode == "normsweep") {  // launch shapes without and with output_normed: clusters 1, 2, 4 (one chunk), two chunks
    std::printf("%-22s %7s %9s %9s %9s\n", "problem", "normed", "shape", "us", "us PDL");
    for (int round = 0; round < 2; ++round) {
      for (int nm : {0, 1}) {
        for (int h : {7168, 4096}) {
          for (int m : {64, 128, 256, 512, 1024, 2048, 4096}) {
            for (int shape = 0; shape < 5; ++shape) {  // 0 as dispatched, 1/2/3 one chunk in clusters of 1/2/4, 4 two chunks
              if (m >= 4096 && (shape == 2 || shape == 3)) continue;
              const int cluster = shape == 2 ? 2 : shape == 3 ? 4 : shape == 0 ? 0 : 1;
              const int chunks = shape == 0 ? 0 : shape == 4 ? 2 : 1;
              const char* names[5] = {"dispatch", "1ch-c1", "1ch-c2", "1ch-c4", "2ch"};
              std::printf("rms M=%-5d H=%-5d r%d %7d %9s %s\n", m, h, round, nm, names[shape],
                          times({.m = m, .h = h, .cluster = cluster, .chunks = chunks, .normed = nm == 1}).c_str());
            }
          }
        }
      }
    }
    return 0;
  }
  if (mode == "normed") {  // H = 7168
    normed_table({{1, 7168}, {64, 7168}, {256, 7168}, {1024, 7168}, {4096, 7168}, {16384, 7168}});
    return 0;
  }
  if (mode == "mid") {  // calls around the L2 size and long rows
    normed_table({{1024, 7168}, {2048, 7168}, {3072, 7168}, {1024, 4096}, {2048, 4096},
                  {1024, 12288}, {4096, 12288}, {1024, 16384}, {4096, 16384}});
    return 0;
  }
#ifdef SGLQ_PROBE_PHASES
  // Mode "timeline": where the large calls' time beyond their steady rate goes (one-chunk prefetching
  // kernel at M=4096 and 16384, H=7168; isolated launches, no PDL; block = thread 0's start and end).
  // The steady rate is the blocks' completion rate between 20% and 80% of them done; "ramp" is the
  // 20% point's lateness against that rate, "tail" the end's lateness after the 80% point. First round:
  // blocks that start before the first block ends; last round: the same count of the last blocks.
  if (mode == "timeline") {
    for (int m : {4096, 16384}) {
      for (int i = 0; i < 3; ++i) block_timeline([&] { launcher({.m = m, .h = 7168}, false)(0); });  // warm
      struct LaunchStats {  // one launch's timeline, ns from the first block's start
        double total, steady, ramp, tail, first_round, run_first, run_middle, run_last, first_end, last_start;
      };
      std::vector<LaunchStats> stats;
      std::vector<std::vector<std::pair<double, double>>> launches;
      for (int i = 0; i < 9; ++i) {
        auto tl = block_timeline([&] { launcher({.m = m, .h = 7168}, false)(0); });
        const int n = static_cast<int>(tl.size());
        std::vector<double> ends(n), starts(n);
        for (int b = 0; b < n; ++b) starts[b] = tl[b].first, ends[b] = tl[b].second;
        std::sort(ends.begin(), ends.end());
        std::sort(starts.begin(), starts.end());
        const int k20 = n / 5, k80 = n * 4 / 5;
        const double rate = (k80 - k20) / (ends[k80] - ends[k20]);  // blocks per ns
        const double total = ends[n - 1];
        const int first_round = static_cast<int>(std::lower_bound(starts.begin(), starts.end(), ends[0]) - starts.begin());
        auto median_run = [&](int lo, int hi) {  // blocks [lo, hi) by index
          std::vector<double> r;
          for (int b = lo; b < hi; ++b) r.push_back(tl[b].second - tl[b].first);
          return r.empty() ? 0.0 : median_of(r);
        };
        stats.push_back({total, n / rate, ends[k20] - k20 / rate, (total - ends[k80]) - (n - 1 - k80) / rate,
                         double(first_round), median_run(0, first_round), median_run(first_round, n - first_round),
                         median_run(n - first_round, n), ends[0], starts[n - 1]});
        launches.push_back(tl);
      }
      std::vector<int> order(stats.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
      std::sort(order.begin(), order.end(), [&](int a, int b) { return stats[a].total < stats[b].total; });
      const int mid = order[order.size() / 2];  // the launch of median length
      const auto& st = stats[mid];
      std::printf("timeline M=%d H=7168 blocks %zu: total %.0f ns, at the steady rate %.0f ns (ramp %.0f, tail %.0f); "
                  "first round %.0f blocks; block run median first / middle / last round %.0f / %.0f / %.0f ns; "
                  "first block ends %.0f, last block starts %.0f\n",
                  m, launches[mid].size(), st.total, st.steady, st.ramp, st.tail, st.first_round, st.run_first,
                  st.run_middle, st.run_last, st.first_end, st.last_start);
      std::printf("timeline M=%d all 9 totals:", m);
      for (int i : order) std::printf(" %.0f", stats[i].total);
      std::printf("\n");
      // running blocks (thread 0 between its start and end) and completions, per 1 us bin, of the median launch
      const auto& tl = launches[mid];
      const int bins = static_cast<int>(st.total / 1000) + 1;
      std::vector<double> busy(bins, 0.0);
      std::vector<int> done(bins, 0);
      for (const auto& [a, b] : tl) {
        for (int k = static_cast<int>(a / 1000); k <= static_cast<int>(b / 1000) && k < bins; ++k) {
          busy[k] += (std::min(b, 1000.0 * (k + 1)) - std::max(a, 1000.0 * k)) / 1000.0;
        }
        ++done[std::min(bins - 1, static_cast<int>(b / 1000))];
      }
      const int show = m == 4096 ? bins : std::min(bins, 8);
      for (int pass = 0; pass < 2; ++pass) {
        std::printf("timeline M=%d %s per us:", m, pass == 0 ? "running" : "ended");
        for (int k = 0; k < show; ++k) std::printf(" %.0f", pass == 0 ? busy[k] : double(done[k]));
        if (show < bins) {
          std::printf(" ... last 8:");
          for (int k = bins - 8; k < bins; ++k) std::printf(" %.0f", pass == 0 ? busy[k] : double(done[k]));
        }
        std::printf("\n");
      }
    }
    return 0;
  }
#endif
  if (mode != "phases") {  // the default table ("phases": only the SGLQ_PROBE_PHASES output below)
    std::printf("%-22s %9s %9s %9s %9s %9s %9s\n", "problem", "us", "us PDL", "1ch us", "1ch PDL", "2ch us", "2ch PDL");
    for (int h : {7168, 4096}) {
      for (int m : {1, 64, 256, 1024, 4096, 16384}) {
        const double bytes = double(m) * h * 7 + double(m) * (h / 128) * 4;
        std::printf("rms M=%-5d H=%-5d     %s %s %s  roof %.2f\n", m, h, times({.m = m, .h = h}).c_str(),
                    times({.m = m, .h = h, .chunks = 1}).c_str(), times({.m = m, .h = h, .chunks = 2}).c_str(),
                    bytes / 4.23e6);
      }
    }
  }
#ifdef SGLQ_PROBE_PHASES
  for (int m : {1, 64, 256}) {  // block 0's phases (isolated launches, no PDL)
    std::vector<std::vector<double>> d(4);
    for (int i = 0; i < 50; ++i) {
      launcher({.m = m, .h = 7168}, false)(0);
      CK(cudaDeviceSynchronize());
      unsigned long long t[8];
      CK(cudaMemcpyFromSymbol(t, g_probe_phases, sizeof(t)));
      for (int k = 0; k < 4; ++k) d[k].push_back(double(t[k + 1] - t[k]));
    }
    const char* names[4] = {"start -> loads used", "-> ss known", "-> inv known", "-> quantized, stored"};
    for (int k = 0; k < 4; ++k) std::printf("phase M=%d H=7168 %-22s %8.0f ns (median of 50)\n", m, names[k], median_of(d[k]));
  }
  // Every block's start and end (thread 0, %globaltimer), isolated launches as dispatched, no PDL:
  // how late the last block starts, how long a block runs, when the last one ends (medians of 21).
  std::printf("%-22s %7s %12s %12s %12s %12s\n", "blocks", "grid", "last start", "block (med)", "block (max)", "last end");
  for (int h : {7168, 4096}) {
    for (int m : {1, 64, 256, 1024, 4096}) {
      const BlockSpans b = block_spans([&] { launcher({.m = m, .h = h}, false)(0); });
      std::printf("blocks M=%-5d H=%-5d %7.0f %9.0f ns %9.0f ns %9.0f ns %9.0f ns\n", m, h, b.blocks, b.last_start,
                  b.median_run, b.max_run, b.last_end);
    }
  }
#endif
  return 0;
}
