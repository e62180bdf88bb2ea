// Masked counts rewritten by a producer that is still running when the quantization kernel starts under
// PDL. The masked kernel reads the counts before its PDL wait (a guess that lets it locate its first task
// early), reads them again after the wait, and starts over where they changed: its bytes must be those
// of a launch that saw the final counts from the start. No test of Python can stage this race (torch's
// kernels never trigger their dependents early), so this program uses the real launcher and kernel
// without torch. Run by scripts/gpu/gpu_check.sh (step "redo"), also under compute-sanitizer:
//   nvcc -O3 -std=c++17 --use_fast_math -gencode arch=compute_90a,code=sm_90a -I csrc \
//     tests/cuda/masked_counts_under_pdl.cu -o /tmp/masked_counts_under_pdl && /tmp/masked_counts_under_pdl
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda/per_token_group_quant.cuh"

using namespace sgl_quant;

#define CK(expr)                                                                                   \
  do {                                                                                             \
    const cudaError_t e_ = (expr);                                                                 \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(2);                                                                                \
    }                                                                                              \
  } while (0)

// The producer: lets its dependent launch at once, then spins and writes the final counts.
__global__ void late_counts_kernel(int32_t* counts, const int32_t* final_counts, int n, long long spin_cycles) {
  pdl_allow_dependents();
  const long long t0 = clock64();
  while (clock64() - t0 < spin_cycles) {
  }
  if (threadIdx.x < n) counts[threadIdx.x] = final_counts[threadIdx.x];
}

template <typename T>
T* device_copy(const std::vector<T>& host) {
  T* d;
  CK(cudaMalloc(&d, host.size() * sizeof(T)));
  CK(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

// Masked [E, rows, 2H] bf16 -> fp8 with fused SiLU, H = 2048, group 128, packed UE8M0 column-major scales.
struct Problem {
  int experts, rows;
  QuantParams p;
  size_t q_bytes, s_bytes;
};

Problem masked_problem(int experts, int rows) {
  constexpr int H = 2048, G = H / 128;
  Problem r{experts, rows, {}, static_cast<size_t>(experts) * rows * H, 0};
  const int m_pad = (rows + 3) / 4 * 4;
  r.s_bytes = 4ull * experts * m_pad * ((G + 3) / 4);
  std::vector<uint16_t> x(static_cast<size_t>(experts) * rows * 2 * H);
  uint32_t s = 2463534242u;
  for (auto& v : x) {  // bf16 of both signs, magnitudes 2^-8 .. 2^8 (xorshift)
    s ^= s << 13, s ^= s >> 17, s ^= s << 5;
    v = static_cast<uint16_t>((s & 0x807f) | ((0x77 + (s >> 8) % 17) << 7));
  }
  QuantParams& p = r.p;
  p.input = device_copy(x);
  CK(cudaMalloc(&p.output_q, r.q_bytes));
  CK(cudaMalloc(&p.output_s, r.s_bytes));
  CK(cudaMalloc(const_cast<int32_t**>(&p.masked_m), 4 * experts));
  p.num_outer = experts;
  p.rows_per_outer = rows;
  p.in_outer_stride = static_cast<int64_t>(rows) * 2 * H;
  p.in_row_stride = 2 * H;
  p.s_outer_stride = static_cast<int64_t>(m_pad) * ((G + 3) / 4);
  p.s_row_stride = 1;
  p.s_group_stride = m_pad;
  p.hidden = H;
  p.groups_per_row = G;
  p.group_size = 128;
  p.scale_kind = ScaleKind::kPackedUE8M0;
  p.fuse_silu_and_mul = true;
  return r;
}

// Codes then scales of one launch (outputs poisoned first); `late`: the counts start as `first` and a
// producer writes `final_counts` while the kernel, launched with PDL, runs.
std::vector<char> run(const Problem& pr, const std::vector<int32_t>& first, const int32_t* d_final, bool late,
                      cudaStream_t stream, int num_sms) {
  CK(cudaMemcpy(const_cast<int32_t*>(pr.p.masked_m), first.data(), 4 * first.size(), cudaMemcpyHostToDevice));
  CK(cudaMemset(pr.p.output_q, 0xcd, pr.q_bytes));
  CK(cudaMemset(pr.p.output_s, 0xcd, pr.s_bytes));
  if (late) {
    late_counts_kernel<<<1, 32, 0, stream>>>(const_cast<int32_t*>(pr.p.masked_m), d_final, pr.experts, 200000LL);
    CK(cudaGetLastError());
  }
  LaunchOptions o;
  o.stream = stream;
  o.num_sms = num_sms;
  o.pdl = late;
  o.clusters = true;
  CK((launch_per_token_group_quant<__nv_bfloat16, Fp8Range, 128, ScaleStore::kEither, true, true>(pr.p, o)));
  CK(cudaStreamSynchronize(stream));
  std::vector<char> out(pr.q_bytes + pr.s_bytes);
  CK(cudaMemcpy(out.data(), pr.p.output_q, pr.q_bytes, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(out.data() + pr.q_bytes, pr.p.output_s, pr.s_bytes, cudaMemcpyDeviceToHost));
  return out;
}

int main() {
  int num_sms = 0;
  CK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int failures = 0;
  for (const auto& [experts, rows] : {std::pair{8, 512}, std::pair{32, 256}}) {
    const Problem pr = masked_problem(experts, rows);
    std::vector<int32_t> final_counts(experts), old_counts(experts);
    for (int e = 0; e < experts; ++e) final_counts[e] = (e * 37 + 11) % (rows + 1);
    for (int e = 0; e < experts; ++e) old_counts[e] = final_counts[experts - 1 - e] / 2;  // other rows and experts
    int32_t* d_final = device_copy(final_counts);
    const bool same = run(pr, final_counts, d_final, false, stream, num_sms) ==
                      run(pr, old_counts, d_final, true, stream, num_sms);
    failures += !same;
    std::printf("masked %d x %d: counts changed under a PDL launch -> %s\n", experts, rows,
                same ? "same bytes" : "DIFFERENT bytes");
  }
  return failures ? 1 : 0;
}
