// The CUDA launcher: validates (shared checks), picks the kernel variant, launches it on the
// current stream of the input's device, and registers both ops for the CUDA dispatch key.
// No host synchronization and no allocation here, so calls are CUDA-graph capturable.
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <mutex>
#include <unordered_map>
#include <vector>

#include "../quant_args.h"
#include "per_token_group_quant.cuh"

namespace sgl_quant {

#define SGLQ_DECLARE_BOTH_LAYOUTS(GS)                \
  SGLQ_FOR_EACH_VARIANT(GS, false, SGLQ_DECLARE_LAUNCHER) \
  SGLQ_FOR_EACH_VARIANT(GS, true, SGLQ_DECLARE_LAUNCHER)
SGLQ_DECLARE_BOTH_LAYOUTS(16)
SGLQ_DECLARE_BOTH_LAYOUTS(32)
SGLQ_DECLARE_BOTH_LAYOUTS(64)
SGLQ_DECLARE_BOTH_LAYOUTS(128)
SGLQ_DECLARE_BOTH_LAYOUTS(256)

namespace {

// Launch shape, adjustable for benchmarking through sgl_quant._C._set_launch_config.
// Defaults from the launch-shape sweeps on an H200 (benchmark/NOTES.md): a persistent grid of one
// wave lost ~10% at M=16384 (the warps' DRAM phases line up); 16 waves was best for large dense
// problems. A masked grid is sized for all rows, valid or not, and the blocks beyond the valid
// rows still read the counts: one wave keeps them few (8 x 512: 4.75 -> 4.45 us; 32 x 256 and
// 256 x 128 lose 3% and 1%, both far inside their targets).
struct LaunchTuning {
  int block_threads = 0;  // 0: automatic (see LaunchOptions)
  int waves = 16;
  int masked_waves = 1;
};
LaunchTuning g_tuning;

struct DeviceInfo {
  int num_sms = 1;
  bool supports_pdl = false;  // programmatic dependent launch needs SM90+
};

DeviceInfo device_info(int device) {
  static std::mutex mutex;
  static std::unordered_map<int, DeviceInfo> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(device);
  if (it != cache.end()) return it->second;
  DeviceInfo info;
  int major = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&info.num_sms, cudaDevAttrMultiProcessorCount, device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  info.supports_pdl = major >= 9;
  cache.emplace(device, info);
  return info;
}

template <typename T, typename R, int GS, ScaleKind SK>
cudaError_t dispatch_silu_and_layout(const QuantParams& p, const LaunchOptions& o) {
  const bool masked = p.masked_m != nullptr;
  if (p.fuse_silu_and_mul) {
    return masked ? launch_per_token_group_quant<T, R, GS, SK, true, true>(p, o)
                  : launch_per_token_group_quant<T, R, GS, SK, true, false>(p, o);
  }
  return masked ? launch_per_token_group_quant<T, R, GS, SK, false, true>(p, o)
                : launch_per_token_group_quant<T, R, GS, SK, false, false>(p, o);
}

template <typename T, typename R, int GS>
cudaError_t dispatch_scale_kind(const QuantParams& p, const LaunchOptions& o) {
  switch (p.scale_kind) {
    case ScaleKind::kFloat: return dispatch_silu_and_layout<T, R, GS, ScaleKind::kFloat>(p, o);
    case ScaleKind::kFloatUE8M0: return dispatch_silu_and_layout<T, R, GS, ScaleKind::kFloatUE8M0>(p, o);
    case ScaleKind::kPackedUE8M0: return dispatch_silu_and_layout<T, R, GS, ScaleKind::kPackedUE8M0>(p, o);
  }
  return cudaErrorInvalidValue;
}

template <typename T, typename R>
cudaError_t dispatch_group_size(const QuantParams& p, const LaunchOptions& o) {
  switch (p.group_size) {
    case 16: return dispatch_scale_kind<T, R, 16>(p, o);
    case 32: return dispatch_scale_kind<T, R, 32>(p, o);
    case 64: return dispatch_scale_kind<T, R, 64>(p, o);
    case 128: return dispatch_scale_kind<T, R, 128>(p, o);
    case 256: return dispatch_scale_kind<T, R, 256>(p, o);
  }
  return cudaErrorInvalidValue;
}

void launch(const QuantParams& p, const at::Tensor& input, const at::Tensor& output_q, bool enable_pdl) {
  SGLQ_CHECK(input.is_cuda(), "sgl_quant: the CUDA implementation got input on ", input.device());
  if (p.num_groups() == 0) return;  // M == 0 or E == 0: nothing to launch
  const c10::cuda::CUDAGuard guard(input.device());
  const int device = input.get_device();
  const DeviceInfo info = device_info(device);
  LaunchOptions o;
  o.stream = c10::cuda::getCurrentCUDAStream(device).stream();
  o.device = device;
  o.num_sms = info.num_sms;
  o.block_threads = g_tuning.block_threads;
  o.waves = p.masked_m != nullptr ? g_tuning.masked_waves : g_tuning.waves;
  o.pdl = enable_pdl && info.supports_pdl;
  const bool bf16 = input.scalar_type() == at::kBFloat16;
  const bool fp8 = output_q.scalar_type() == at::kFloat8_e4m3fn;
  cudaError_t err;
  if (bf16) {
    err = fp8 ? dispatch_group_size<__nv_bfloat16, Fp8Range>(p, o) : dispatch_group_size<__nv_bfloat16, Int8Range>(p, o);
  } else {
    err = fp8 ? dispatch_group_size<__half, Fp8Range>(p, o) : dispatch_group_size<__half, Int8Range>(p, o);
  }
  C10_CUDA_CHECK(err);
}

void per_token_group_quant_8bit_v2_cuda(const at::Tensor& input, at::Tensor& output_q, at::Tensor& output_s,
                                        int64_t group_size, double eps, double min_8bit, double max_8bit,
                                        bool scale_ue8m0, bool fuse_silu_and_mul,
                                        const std::optional<at::Tensor>& masked_m, bool enable_pdl) {
  const QuantParams p = make_v2_params(input, output_q, output_s, group_size, eps, min_8bit, max_8bit, scale_ue8m0,
                                       fuse_silu_and_mul, masked_m);
  launch(p, input, output_q, enable_pdl);
}

void per_token_group_quant_fp8_dsv4_cuda(const at::Tensor& input, at::Tensor& output_q, at::Tensor& output_s,
                                         bool enable_pdl) {
  const QuantParams p = make_dsv4_params(input, output_q, output_s);
  launch(p, input, output_q, enable_pdl);
}

}  // namespace

void set_launch_config(int block_threads, int waves, int masked_waves) {
  SGLQ_CHECK(block_threads == 0 || (block_threads >= 32 && block_threads <= kMaxBlockThreads && block_threads % 32 == 0),
             "block_threads must be 0 (automatic) or a multiple of 32 in [32, ", kMaxBlockThreads, "], got ",
             block_threads);
  SGLQ_CHECK(waves >= 1 && waves <= 64, "waves must be in [1, 64], got ", waves);
  SGLQ_CHECK(masked_waves >= 1 && masked_waves <= 64, "masked_waves must be in [1, 64], got ", masked_waves);
  g_tuning.block_threads = block_threads;
  g_tuning.waves = waves;
  g_tuning.masked_waves = masked_waves;
}

std::vector<int64_t> launch_config() {
  return {g_tuning.block_threads, g_tuning.waves, g_tuning.masked_waves};
}

TORCH_LIBRARY_IMPL(sgl_quant, CUDA, m) {
  m.impl("per_token_group_quant_8bit_v2", &per_token_group_quant_8bit_v2_cuda);
  m.impl("per_token_group_quant_fp8_dsv4", &per_token_group_quant_fp8_dsv4_cuda);
}

}  // namespace sgl_quant
