// Whether a device can run this build's kernels, and if not, why, in words a user can act on.
// Host code on the CUDA runtime API only (no torch), so that tests/test_kernel_image.py can compile it
// beside a kernel built for an arch the test GPU does not have.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace sgl_quant {

// "" when `kernel` has code that `device` can run; otherwise a message that names the device, the CUDA
// code the build holds (`built_archs`, e.g. "sm_90a,sm_100a,compute_90") and the way out. Every kernel
// of a build is compiled for the same archs, so one kernel answers for all of them. Without this check
// an A100 or L40S under the default build (sm_90a and sm_100a SASS, compute_90 PTX) fails in the first
// occupancy query with the runtime's "no kernel image is available", which names neither the device
// nor the fix. The failed query's error is cleared (it is not sticky), so that torch's next launch
// check does not report it as its own.
inline std::string kernel_image_problem(const void* kernel, int device, const char* built_archs) {
  cudaFuncAttributes attr = {};
  const cudaError_t err = cudaFuncGetAttributes(&attr, kernel);
  if (err == cudaSuccess) return "";
  (void)cudaGetLastError();
  std::string where = "cuda:" + std::to_string(device);
  std::string arch;  // "8.0"
  cudaDeviceProp prop = {};
  if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
    arch = std::to_string(prop.major) + "." + std::to_string(prop.minor);
    where += " (" + std::string(prop.name) + ", compute capability " + arch + ")";
  } else {
    (void)cudaGetLastError();
  }
  const std::string built = built_archs != nullptr && *built_archs != '\0' ? built_archs : "archs not recorded";
  std::string message = "sgl_quant: cannot run its CUDA kernels on " + where + ": " + cudaGetErrorName(err) + " (" +
                        cudaGetErrorString(err) + "). This build holds CUDA code for " + built + ". ";
  if (err == cudaErrorNoKernelImageForDevice) {
    // SASS runs only on its own compute capability (within its major version, and an "a" arch only on
    // exactly its own); PTX on its own compute capability or a newer one.
    message += "Build sgl_quant from source for this GPU (TORCH_CUDA_ARCH_LIST=\"" + (arch.empty() ? "<X.Y>" : arch) +
               "\" pip install --no-build-isolation . in a source checkout), or use the CPU implementation.";
  } else if (err == cudaErrorUnsupportedPtxVersion) {
    int driver = 0;
    (void)cudaDriverGetVersion(&driver);
    message += "Its PTX comes from a newer CUDA toolkit than the driver supports (CUDA " +
               std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10) +
               "): update the NVIDIA driver, or build sgl_quant from source with SASS for this GPU.";
  } else {
    message += "The kernels could not be loaded.";
  }
  return message;
}

}  // namespace sgl_quant
