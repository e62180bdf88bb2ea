// Op schemas (SPEC §3) and the small pybind11 module sgl_quant._C (build information).
// The CPU and CUDA implementations register themselves in their own translation units.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/library.h>
#include <torch/version.h>

#include <vector>

#if defined(SGL_QUANT_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

// Build metadata arrives as bare tokens (-DSGL_QUANT_VERSION_TOKEN=0.1.0) so that no shell
// quoting is needed in the generated build files; stringify them here.
#define SGLQ_STR(...) #__VA_ARGS__
#define SGLQ_XSTR(...) SGLQ_STR(__VA_ARGS__)
#ifdef SGL_QUANT_VERSION_TOKEN
#define SGL_QUANT_VERSION SGLQ_XSTR(SGL_QUANT_VERSION_TOKEN)
#else
#define SGL_QUANT_VERSION "unknown"
#endif
#ifdef SGL_QUANT_CUDA_ARCHS_TOKEN
#define SGL_QUANT_CUDA_ARCHS SGLQ_XSTR(SGL_QUANT_CUDA_ARCHS_TOKEN)
#else
#define SGL_QUANT_CUDA_ARCHS ""
#endif

TORCH_LIBRARY(sgl_quant, m) {
  m.def(
      "per_token_group_quant_8bit_v2(Tensor input, Tensor(a!) output_q, Tensor(b!) output_s, int group_size, "
      "float eps, float min_8bit, float max_8bit, bool scale_ue8m0, bool fuse_silu_and_mul, Tensor? masked_m, "
      "bool enable_pdl=False) -> ()");
  m.def(
      "per_token_group_quant_fp8_dsv4(Tensor input, Tensor(a!) output_q, Tensor(b!) output_s, "
      "bool enable_pdl=False) -> ()");
}

#if defined(SGL_QUANT_WITH_CUDA)
namespace sgl_quant {
void set_launch_config(int block_threads, int waves, int masked_waves);  // csrc/cuda/quant_cuda.cu
std::vector<int64_t> launch_config();                                     // the same three, now
}
#endif

namespace {

pybind11::dict build_info() {
  pybind11::dict info;
  info["version"] = SGL_QUANT_VERSION;
  info["torch"] = TORCH_VERSION;
#if defined(SGL_QUANT_WITH_CUDA)
  info["cuda_kernels"] = true;
  info["cuda"] = std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
  info["cuda_archs"] = SGL_QUANT_CUDA_ARCHS;
  info["fast_math"] = true;
#else
  info["cuda_kernels"] = false;
  info["cuda"] = pybind11::none();
  info["cuda_archs"] = "";
  info["fast_math"] = false;
#endif
  return info;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "sgl_quant native extension: registers torch.ops.sgl_quant.* and reports build information";
  m.def("build_info", &build_info, "Version, torch/CUDA it was built with, compiled CUDA archs");
#if defined(SGL_QUANT_WITH_CUDA)
  // Benchmarking hook: the launch shape of the CUDA kernels (block_threads 0 = automatic; waves caps
  // the grid at waves rounds of resident blocks; defaults in csrc/cuda/quant_cuda.cu).
  m.def("_set_launch_config", &sgl_quant::set_launch_config, pybind11::arg("block_threads"), pybind11::arg("waves"),
        pybind11::arg("masked_waves"));
  m.def("_launch_config", &sgl_quant::launch_config, "[block_threads, waves, masked_waves] now in use");
#endif
}
