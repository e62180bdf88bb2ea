// The CUDA launcher: validates (shared checks), picks the kernel variant, launches it on the
// current stream of the input's device, and registers the ops for the CUDA dispatch key.
// No host synchronization, and allocations only from torch's caching allocator on the call's stream (the
// dynamic per-tensor workspace, staged copies), so calls are CUDA-graph capturable.
// Host code on the LibTorch stable ABI: the device guard and the current stream come from its C shim.
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <string>
#include <type_traits>
#include <vector>

#include "../quant_args.h"
#include "kernel_image.h"
#include "per_token_group_quant.cuh"
#include "rmsnorm_launch.cuh"

namespace sgl_quant {

#define SGLQ_DECLARE_LAUNCHERS(GS)                   \
  SGLQ_FOR_EACH_VARIANT(GS, SGLQ_DECLARE_LAUNCHER) \
  SGLQ_FOR_EACH_RMSNORM_VARIANT(GS, SGLQ_DECLARE_RMSNORM_LAUNCHER)
SGLQ_DECLARE_LAUNCHERS(16)
SGLQ_DECLARE_LAUNCHERS(32)
SGLQ_DECLARE_LAUNCHERS(64)
SGLQ_DECLARE_LAUNCHERS(128)
SGLQ_DECLARE_LAUNCHERS(256)
SGLQ_FOR_EACH_RMSNORM_SCALED_VARIANT(SGLQ_DECLARE_RMSNORM_SCALED_LAUNCHER)
SGLQ_FOR_EACH_PACKED_PADDED_VARIANT(SGLQ_DECLARE_LAUNCHER)

// csrc/cuda/scaled_quant.cu
cudaError_t scaled_quant_workspace(const ScaledQuantParams& p, bool bf16, const LaunchOptions& opt, int& entries);
cudaError_t launch_scaled_quant(const ScaledQuantParams& p, bool bf16, bool fp8, uint32_t* partials, int num_partials,
                                const LaunchOptions& opt);

const char* built_cuda_archs();  // csrc/ops.cpp: the archs the build holds code for, "sm_90a,sm_100a,compute_90"

namespace {

// The test hook's launch shape (sgl_quant._C._set_launch_config): all zero, automatic, unless a test sets
// it to check that the bytes do not depend on the launch shape.
struct LaunchOverride {
  int block_threads = 0;
  int waves = 0;
  int rmsnorm_cluster = 0;
  int rmsnorm_stages = 0;
};
LaunchOverride g_launch_override;

#define SGLQ_CUDA_CHECK(expr)                                                                  \
  do {                                                                                         \
    const cudaError_t err_ = (expr);                                                           \
    SGLQ_CHECK(err_ == cudaSuccess, "sgl_quant: CUDA error ", cudaGetErrorName(err_), ": ", \
               cudaGetErrorString(err_), " (", #expr, ")");                                    \
  } while (0)

struct DeviceInfo {
  int num_sms = 1;
  bool sm90 = false;  // programmatic dependent launch and thread-block clusters need SM90+
};

// Does nothing: it asks whether the build has code for a device (kernel_image_problem), with the archs
// of every other kernel.
__global__ void arch_probe_kernel() {}

std::string kernel_image_problem_on(int device) {
  return kernel_image_problem(reinterpret_cast<const void*>(arch_probe_kernel), device, built_cuda_archs());
}

// Of the current device (the launcher's guard): refuses, before any launch, a device the build has no
// code for. Cached per device in one word, num_sms * 2 + sm90 (0: not known yet), read without a lock:
// every launch passes here, and host threads launching on different devices must not serialize on it.
DeviceInfo device_info(int device) {
  static PerDeviceInt cached;
  const int known = cached.get(device);
  DeviceInfo info;
  if (known != 0) {
    info.num_sms = known / 2;
    info.sm90 = (known & 1) != 0;
    return info;
  }
  const std::string problem = kernel_image_problem_on(device);
  SGLQ_CHECK(problem.empty(), problem);
  int major = 0;
  SGLQ_CUDA_CHECK(cudaDeviceGetAttribute(&info.num_sms, cudaDevAttrMultiProcessorCount, device));
  SGLQ_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  info.sm90 = major >= 9;
  cached.set(device, info.num_sms * 2 + (info.sm90 ? 1 : 0));
  return info;
}

// v2/DSV4 with the store and layout fixed: plain or fused SiLU.
template <typename T, typename R, int GS, ScaleStore SS, bool MASKED>
cudaError_t launch_v2(const QuantParams& p, const LaunchOptions& o) {
  return p.fuse_silu_and_mul ? launch_per_token_group_quant<T, R, GS, SS, true, MASKED>(p, o)
                             : launch_per_token_group_quant<T, R, GS, SS, false, MASKED>(p, o);
}

// One (T, R, GS) of either op family. v2/DSV4: the masked kernels take every scale kind; dense ones are
// compiled per scale store (it decides their task order). The fused RMSNorm op's launcher picks its
// schedule itself.
template <typename T, typename R, int GS>
cudaError_t launch_variant(const QuantParams& p, const LaunchOptions& o) {
  if constexpr (GS == 128) {  // vLLM's packed op with padding rows to write (make_packed_params: group size 128)
    if (p.s_pad_rows > 0) return launch_per_token_group_quant<T, R, 128, ScaleStore::kPackedPadded, false, false>(p, o);
  }
  if (p.masked_m != nullptr) return launch_v2<T, R, GS, ScaleStore::kEither, true>(p, o);
  return p.scale_kind == ScaleKind::kPackedUE8M0 ? launch_v2<T, R, GS, ScaleStore::kPacked, false>(p, o)
                                                 : launch_v2<T, R, GS, ScaleStore::kFloat, false>(p, o);
}

template <typename T, typename R, int GS>
cudaError_t launch_variant(const RmsNormQuantParams& p, const LaunchOptions& o) {
  return launch_rmsnorm_quant<T, R, GS>(p, o);
}

// The launcher of the call's group size (the fused op's per-token / per-tensor codes: their own launcher).
template <typename T, typename R, typename P>
cudaError_t dispatch_group_size(const P& p, const QuantParams& q, const LaunchOptions& o) {
  if constexpr (std::is_same_v<P, RmsNormQuantParams>) {
    if (p.scaled) return launch_rmsnorm_scaled_quant<T, R>(p, o);  // per-token / per-tensor codes
  }
  switch (q.group_size) {
    case 16: return launch_variant<T, R, 16>(p, o);
    case 32: return launch_variant<T, R, 32>(p, o);
    case 64: return launch_variant<T, R, 64>(p, o);
    case 128: return launch_variant<T, R, 128>(p, o);
    case 256: return launch_variant<T, R, 256>(p, o);
  }
  return cudaErrorInvalidValue;
}

// The codes and scales a problem writes (the fused op's are described by its `quant`).
const QuantParams& codes_of(const QuantParams& p) { return p; }
const QuantParams& codes_of(const RmsNormQuantParams& p) { return p.quant; }

// The launch options of a call on input's device (its current stream), which the caller guards.
LaunchOptions launch_options(int device, bool enable_pdl) {
  const DeviceInfo info = device_info(device);
  LaunchOptions o;
  void* stream = nullptr;
  SGLQ_CHECK(aoti_torch_get_current_cuda_stream(device, &stream) == AOTI_TORCH_SUCCESS,
             "sgl_quant: cannot get the current CUDA stream of device ", device);
  o.stream = static_cast<cudaStream_t>(stream);
  o.device = device;
  o.num_sms = info.num_sms;
  o.pdl = enable_pdl && info.sm90;
  o.clusters = info.sm90;
  o.block_threads = g_launch_override.block_threads;
  o.waves = g_launch_override.waves;
  o.rmsnorm_cluster = g_launch_override.rmsnorm_cluster;
  o.rmsnorm_stages = g_launch_override.rmsnorm_stages;
  return o;
}

// Rows off 16-byte boundaries (a column-offset view, an odd row stride) and padded code rows: the kernels move
// 16-byte vectors of contiguous rows, so such a call runs on aligned contiguous copies of the tensors concerned
// (docs/design.md): inputs copied in, outputs copied back after the kernel, 2-D copies on the call's stream
// (graph-capturable) into buffers from torch's caching allocator. Aligned calls never come here.
class Staging {
 public:
  Staging(const Tensor& like, cudaStream_t stream) : like_(like), stream_(stream) {}

  // A contiguous copy of `outer` blocks of `rows` rows of `width` bytes, the rows `pitch` bytes and the blocks
  // `outer_pitch` bytes apart from `src`.
  void* in(const void* src, int64_t pitch, int64_t width, int64_t rows, int64_t outer = 1, int64_t outer_pitch = 0) {
    uint8_t* const dst = workspace(width * rows * outer);
    for (int64_t o = 0; o < outer; ++o) {
      copy(dst + o * width * rows, width, static_cast<const uint8_t*>(src) + o * outer_pitch, pitch, width, rows);
    }
    return dst;
  }
  // Contiguous rows for an output, copied back into `dst` by finish(); with `keep`, first copied from it (rows
  // the kernel does not write keep their bytes).
  void* out(void* dst, int64_t pitch, int64_t width, int64_t rows, bool keep) {
    void* const ws = keep ? in(dst, pitch, width, rows) : workspace(width * rows);
    back_.push_back({dst, pitch, ws, width, rows});
    return ws;
  }
  void finish() {
    for (const Back& c : back_) copy(c.dst, c.pitch, c.src, c.width, c.width, c.rows);
  }

 private:
  struct Back {
    void* dst;
    int64_t pitch;
    const void* src;
    int64_t width, rows;
  };
  uint8_t* workspace(int64_t bytes) {
    buffers_.push_back(torch::stable::new_empty(like_, {bytes}, ScalarType::Byte));
    return static_cast<uint8_t*>(buffers_.back().data_ptr());
  }
  void copy(void* dst, int64_t dpitch, const void* src, int64_t spitch, int64_t width, int64_t rows) {
    SGLQ_CUDA_CHECK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDeviceToDevice, stream_));
  }
  const Tensor& like_;
  cudaStream_t stream_;
  std::vector<Tensor> buffers_;  // released after the copies are queued: the allocator orders reuse by stream
  std::vector<Back> back_;
};

// Whether `ptr` and `stride_bytes` are multiples of 16 bytes (strides of one-element dimensions: pass 0).
bool aligned16(const void* ptr, int64_t stride_bytes) {
  return (reinterpret_cast<uintptr_t>(ptr) | static_cast<uintptr_t>(stride_bytes)) % 16 == 0;
}

// Where a v2 / DSV4 / packed-op call is off 16-byte boundaries: the input's rows, the codes' rows (or padded).
bool input_off(const QuantParams& q) {
  return !aligned16(q.input, (q.rows_per_outer > 1 ? q.in_row_stride : 0) * 2) ||
         !aligned16(nullptr, (q.num_outer > 1 ? q.in_outer_stride : 0) * 2);
}
bool codes_off(const QuantParams& q) { return q.q_row_stride != q.hidden || !aligned16(q.output_q, q.q_row_stride); }
// The fused op's other tensors (contiguous rows of H % 16 == 0 elements: their addresses decide).
bool off(const void* ptr) { return ptr != nullptr && !aligned16(ptr, 0); }

bool needs_staging(const QuantParams& q) { return input_off(q) || codes_off(q); }
bool needs_staging(const RmsNormQuantParams& r) {
  return needs_staging(r.quant) || off(r.weight) || off(r.residual) || off(r.output_normed);
}

// v2 / DSV4 / the packed op: the input's rows, the codes' rows (a masked call's codes kept: rows past the counts
// are not written).
void stage(QuantParams& q, Staging& s) {
  const int64_t in_width = (q.fuse_silu_and_mul ? 2 : 1) * int64_t{q.hidden} * 2;
  const bool one_stride = q.num_outer == 1 || q.in_outer_stride == q.rows_per_outer * q.in_row_stride;
  if (input_off(q)) {
    q.input = one_stride ? s.in(q.input, q.in_row_stride * 2, in_width, q.num_rows())
                         : s.in(q.input, q.in_row_stride * 2, in_width, q.rows_per_outer, q.num_outer,
                                q.in_outer_stride * 2);
    q.in_row_stride = in_width / 2;
    q.in_outer_stride = q.rows_per_outer * q.in_row_stride;
  }
  if (codes_off(q)) {
    q.output_q = s.out(q.output_q, q.q_row_stride, q.hidden, q.num_rows(), q.masked_m != nullptr);
    q.q_row_stride = q.hidden;
  }
}

// The fused op: input, weight, residual (copied back: it is updated), output_normed and the codes.
void stage(RmsNormQuantParams& r, Staging& s) {
  stage(r.quant, s);
  const int64_t rows = r.quant.num_rows(), width = int64_t{r.quant.hidden} * 2;
  if (off(r.weight)) r.weight = s.in(r.weight, width, width, 1);
  if (off(r.residual)) r.residual = s.out(r.residual, width, width, rows, true);
  if (off(r.output_normed)) r.output_normed = s.out(r.output_normed, width, width, rows, false);
}

template <typename P>
void launch_kernels(const P& p, const Tensor& input, const Tensor& output_q, const LaunchOptions& o) {
  const QuantParams& q = codes_of(p);
  cudaError_t err;
  if (is_bf16(input)) {
    err = is_fp8(output_q) ? dispatch_group_size<__nv_bfloat16, Fp8Range>(p, q, o)
                           : dispatch_group_size<__nv_bfloat16, Int8Range>(p, q, o);
  } else {
    err = is_fp8(output_q) ? dispatch_group_size<__half, Fp8Range>(p, q, o) : dispatch_group_size<__half, Int8Range>(p, q, o);
  }
  SGLQ_CUDA_CHECK(err);
}

// Launches the variant of `p` (QuantParams: v2/DSV4; RmsNormQuantParams: the fused op) on the current
// stream of input's device.
template <typename P>
void launch(const P& p, const Tensor& input, const Tensor& output_q, bool enable_pdl) {
  const QuantParams& q = codes_of(p);
  SGLQ_CHECK(input.is_cuda(), "sgl_quant: the CUDA implementation got input on ", input.device());
  if (q.num_groups() == 0) return;  // M == 0 or E == 0: nothing to launch
  const int device = input.get_device_index();
  const torch::stable::accelerator::DeviceGuard guard(device);
  const LaunchOptions o = launch_options(device, enable_pdl);
  if (!needs_staging(p)) return launch_kernels(p, input, output_q, o);
  Staging s(input, o.stream);
  P staged = p;
  stage(staged, s);
  launch_kernels(staged, input, output_q, o);
  s.finish();
}

// Per-token / per-tensor calls (docs/spec.md §8): dynamic per-tensor calls of several rows get their
// workspace (one uint32 per block of the amax kernel) from torch's caching allocator on the call's stream,
// which CUDA graphs capture like any allocation.
void launch_scaled(const ScaledQuantParams& p, const Tensor& input, const Tensor& output_q, bool enable_pdl) {
  SGLQ_CHECK(input.is_cuda(), "sgl_quant: the CUDA implementation got input on ", input.device());
  if (p.num_rows == 0) return;
  const int device = input.get_device_index();
  const torch::stable::accelerator::DeviceGuard guard(device);
  const LaunchOptions o = launch_options(device, enable_pdl);
  int entries = 0;
  SGLQ_CUDA_CHECK(scaled_quant_workspace(p, is_bf16(input), o, entries));
  std::optional<Tensor> workspace;
  if (entries > 0) workspace = torch::stable::new_empty(input, {entries}, ScalarType::Int);
  uint32_t* partials = workspace ? static_cast<uint32_t*>(workspace->data_ptr()) : nullptr;
  SGLQ_CUDA_CHECK(launch_scaled_quant(p, is_bf16(input), is_fp8(output_q), partials, entries, o));
}

void per_token_group_quant_8bit_v2_cuda(const Tensor& input, Tensor output_q, Tensor output_s, int64_t group_size,
                                        double eps, double min_8bit, double max_8bit, bool scale_ue8m0,
                                        bool fuse_silu_and_mul, std::optional<Tensor> masked_m, bool enable_pdl) {
  const QuantParams p = make_v2_params(input, output_q, output_s, group_size, eps, min_8bit, max_8bit, scale_ue8m0,
                                       fuse_silu_and_mul, masked_m);
  launch(p, input, output_q, enable_pdl);
}

void per_token_group_quant_8bit_packed_cuda(const Tensor& input, Tensor output_q, Tensor output_s, int64_t group_size,
                                            double eps, double min_8bit, double max_8bit, bool enable_pdl) {
  const QuantParams p = make_packed_params(input, output_q, output_s, group_size, eps, min_8bit, max_8bit);
  launch(p, input, output_q, enable_pdl);
}

void per_token_group_quant_fp8_dsv4_cuda(const Tensor& input, Tensor output_q, Tensor output_s, bool enable_pdl) {
  const QuantParams p = make_dsv4_params(input, output_q, output_s);
  launch(p, input, output_q, enable_pdl);
}

void rmsnorm_per_token_group_quant_8bit_cuda(const Tensor& input, const Tensor& weight, std::optional<Tensor> residual,
                                             Tensor output_q, Tensor output_s, std::optional<Tensor> output_normed,
                                             int64_t group_size, double norm_eps, double eps, double min_8bit,
                                             double max_8bit, bool scale_ue8m0, bool enable_pdl) {
  const RmsNormQuantParams p = make_rmsnorm_params(input, weight, residual, output_q, output_s, output_normed,
                                                   group_size, norm_eps, eps, min_8bit, max_8bit, scale_ue8m0);
  launch(p, input, output_q, enable_pdl);
}

void rmsnorm_per_token_quant_8bit_cuda(const Tensor& input, const Tensor& weight, std::optional<Tensor> residual,
                                       Tensor output_q, Tensor output_s, std::optional<Tensor> output_normed,
                                       std::optional<Tensor> scale_ub, double norm_eps, double eps, bool enable_pdl) {
  launch(make_rmsnorm_scaled_params("sgl_quant.rmsnorm_per_token_quant_8bit", input, weight, residual, output_q,
                                    output_s, output_normed, scale_ub, norm_eps, eps, false),
         input, output_q, enable_pdl);
}

void rmsnorm_per_tensor_quant_8bit_cuda(const Tensor& input, const Tensor& weight, std::optional<Tensor> residual,
                                        Tensor output_q, const Tensor& scale, std::optional<Tensor> output_normed,
                                        double norm_eps, bool enable_pdl) {
  launch(make_rmsnorm_scaled_params("sgl_quant.rmsnorm_per_tensor_quant_8bit", input, weight, residual, output_q,
                                    scale, output_normed, std::nullopt, norm_eps, 1e-10, true),
         input, output_q, enable_pdl);
}

void per_token_quant_8bit_cuda(const Tensor& input, Tensor output_q, Tensor output_s, std::optional<Tensor> output_azp,
                               std::optional<Tensor> scale_ub, double eps, bool fuse_silu_and_mul, bool enable_pdl) {
  launch_scaled(make_per_token_params(input, output_q, output_s, output_azp, scale_ub, eps, fuse_silu_and_mul), input,
                output_q, enable_pdl);
}

void per_tensor_quant_8bit_cuda(const Tensor& input, Tensor output_q, Tensor output_s, bool is_static, double eps,
                                bool fuse_silu_and_mul, bool enable_pdl) {
  launch_scaled(make_per_tensor_params(input, output_q, output_s, is_static, eps, fuse_silu_and_mul), input, output_q,
                enable_pdl);
}

}  // namespace

std::string set_launch_config(int block_threads, int waves, int rmsnorm_cluster, int rmsnorm_stages) {
  if (block_threads != 0 && (block_threads < 32 || block_threads > kMaxBlockThreads || block_threads % 32 != 0)) {
    return detail::message("block_threads must be 0 (automatic) or a multiple of 32 in [32, ", kMaxBlockThreads,
                           "], got ", block_threads);
  }
  if (waves < 0 || waves > 64) return detail::message("waves must be 0 (automatic) or in [1, 64], got ", waves);
  if (rmsnorm_cluster < 0 || rmsnorm_cluster > kRmsNormMaxCluster) {
    return detail::message("rmsnorm_cluster must be 0 (automatic) or in [1, ", kRmsNormMaxCluster, "], got ",
                           rmsnorm_cluster);
  }
  if (rmsnorm_stages < -1 || rmsnorm_stages > kRmsNormMaxStages) {
    return detail::message("rmsnorm_stages must be 0 (automatic), -1 (never) or in [1, ", kRmsNormMaxStages, "], got ",
                           rmsnorm_stages);
  }
  g_launch_override = {block_threads, waves, rmsnorm_cluster, rmsnorm_stages};
  return "";
}

std::string device_kernel_problem(int device) {
  const torch::stable::accelerator::DeviceGuard guard(device);
  return kernel_image_problem_on(device);
}

void launch_config(int out[4]) {
  out[0] = g_launch_override.block_threads;
  out[1] = g_launch_override.waves;
  out[2] = g_launch_override.rmsnorm_cluster;
  out[3] = g_launch_override.rmsnorm_stages;
}

STABLE_TORCH_LIBRARY_IMPL(sgl_quant, CUDA, m) {
  m.impl("per_token_group_quant_8bit_v2", TORCH_BOX(&per_token_group_quant_8bit_v2_cuda));
  m.impl("per_token_group_quant_8bit_packed", TORCH_BOX(&per_token_group_quant_8bit_packed_cuda));
  m.impl("per_token_group_quant_fp8_dsv4", TORCH_BOX(&per_token_group_quant_fp8_dsv4_cuda));
  m.impl("rmsnorm_per_token_group_quant_8bit", TORCH_BOX(&rmsnorm_per_token_group_quant_8bit_cuda));
  m.impl("per_token_quant_8bit", TORCH_BOX(&per_token_quant_8bit_cuda));
  m.impl("per_tensor_quant_8bit", TORCH_BOX(&per_tensor_quant_8bit_cuda));
  m.impl("rmsnorm_per_token_quant_8bit", TORCH_BOX(&rmsnorm_per_token_quant_8bit_cuda));
  m.impl("rmsnorm_per_tensor_quant_8bit", TORCH_BOX(&rmsnorm_per_tensor_quant_8bit_cuda));
}

}  // namespace sgl_quant
