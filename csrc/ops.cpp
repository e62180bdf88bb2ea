// Op schemas (docs/spec.md §3, §6.1, §8.2) and the small Python module sgl_quant._C (build information, the
// launch-shape test hook). The CPU and CUDA implementations register themselves in their own translation units.
//
// The module is written against Python's limited C API (abi3), not pybind11: together with the
// LibTorch stable ABI for the ops, one binary then loads in every CPython >= 3.10 and every torch
// from the one it targets on (docs/spec.md §7); pybind11 would tie it to one CPython minor version.
#include <Python.h>
#include <torch/csrc/stable/library.h>
#include <torch/headeronly/version.h>

#include <cstdint>
#include <exception>
#include <string>

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

STABLE_TORCH_LIBRARY(sgl_quant, m) {
  m.def(
      "per_token_group_quant_8bit_v2(Tensor input, Tensor(a!) output_q, Tensor(b!) output_s, int group_size, "
      "float eps, float min_8bit, float max_8bit, bool scale_ue8m0, bool fuse_silu_and_mul, Tensor? masked_m, "
      "bool enable_pdl=False) -> ()");
  m.def(
      "per_token_group_quant_8bit_packed(Tensor input, Tensor(a!) output_q, Tensor(b!) output_s, int group_size, "
      "float eps, float min_8bit, float max_8bit, bool enable_pdl=False) -> ()");
  m.def(
      "per_token_group_quant_fp8_dsv4(Tensor input, Tensor(a!) output_q, Tensor(b!) output_s, "
      "bool enable_pdl=False) -> ()");
  m.def(
      "rmsnorm_per_token_group_quant_8bit(Tensor input, Tensor weight, Tensor(a!)? residual, Tensor(b!) output_q, "
      "Tensor(c!) output_s, Tensor(d!)? output_normed, int group_size, float norm_eps, float eps, float min_8bit, "
      "float max_8bit, bool scale_ue8m0, bool enable_pdl=False) -> ()");
  m.def(
      "per_token_quant_8bit(Tensor input, Tensor(a!) output_q, Tensor(b!) output_s, Tensor(c!)? output_azp, "
      "Tensor? scale_ub, float eps, bool fuse_silu_and_mul, bool enable_pdl=False) -> ()");
  m.def(
      "per_tensor_quant_8bit(Tensor input, Tensor(a!) output_q, Tensor(b!) output_s, bool is_static, float eps, "
      "bool fuse_silu_and_mul, bool enable_pdl=False) -> ()");
  m.def(
      "rmsnorm_per_token_quant_8bit(Tensor input, Tensor weight, Tensor(a!)? residual, Tensor(b!) output_q, "
      "Tensor(c!) output_s, Tensor(d!)? output_normed, Tensor? scale_ub, float norm_eps, float eps, "
      "bool enable_pdl=False) -> ()");
  m.def(
      "rmsnorm_per_tensor_quant_8bit(Tensor input, Tensor weight, Tensor(a!)? residual, Tensor(b!) output_q, "
      "Tensor scale, Tensor(c!)? output_normed, float norm_eps, bool enable_pdl=False) -> ()");
}

#if defined(SGL_QUANT_WITH_CUDA)
namespace sgl_quant {
// csrc/cuda/quant_cuda.cu. Returns an error message, empty when the arguments are valid.
std::string set_launch_config(int block_threads, int waves, int rmsnorm_cluster, int rmsnorm_stages);
void launch_config(int out[4]);  // the same four, now
// "" when the build has CUDA code that device `device` runs; else why not (csrc/cuda/kernel_image.h).
std::string device_kernel_problem(int device);
const char* built_cuda_archs() { return SGL_QUANT_CUDA_ARCHS; }
}  // namespace sgl_quant
#endif

namespace {

// Adds name = value to the dict (steals the value reference); false on failure.
bool set_item(PyObject* dict, const char* name, PyObject* value) {
  if (value == nullptr) return false;
  const int rc = PyDict_SetItemString(dict, name, value);
  Py_DECREF(value);
  return rc == 0;
}

// "2.10": the oldest torch whose stable ABI the extension was compiled for (TORCH_TARGET_VERSION).
std::string stable_abi_target() {
  const uint64_t v = TORCH_FEATURE_VERSION;
  return std::to_string((v >> 56) & 0xff) + "." + std::to_string((v >> 48) & 0xff);
}

PyObject* build_info(PyObject*, PyObject*) {
  PyObject* info = PyDict_New();
  if (info == nullptr) return nullptr;
  bool ok = set_item(info, "version", PyUnicode_FromString(SGL_QUANT_VERSION)) &&
            set_item(info, "torch", PyUnicode_FromString(TORCH_VERSION)) &&
            set_item(info, "torch_abi_target", PyUnicode_FromString(stable_abi_target().c_str()));
#if defined(SGL_QUANT_WITH_CUDA)
  const std::string cuda = std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
  ok = ok && set_item(info, "cuda_kernels", PyBool_FromLong(1)) &&
       set_item(info, "cuda", PyUnicode_FromString(cuda.c_str())) &&
       set_item(info, "cuda_archs", PyUnicode_FromString(SGL_QUANT_CUDA_ARCHS)) &&
       set_item(info, "fast_math", PyBool_FromLong(1));
#else
  Py_INCREF(Py_None);
  ok = ok && set_item(info, "cuda_kernels", PyBool_FromLong(0)) && set_item(info, "cuda", Py_None) &&
       set_item(info, "cuda_archs", PyUnicode_FromString("")) && set_item(info, "fast_math", PyBool_FromLong(0));
#endif
  if (!ok) {
    Py_DECREF(info);
    return nullptr;
  }
  return info;
}

#if defined(SGL_QUANT_WITH_CUDA)
// Test hook, private: the launch shape of the CUDA kernels, for tests that check that the bytes do not
// depend on it (0 = automatic, the default): block_threads of v2 blocks; waves, the rounds of resident
// blocks of grids that loop (masked v2, the fused op's two-chunk kernel); rmsnorm_cluster, blocks per
// row of the fused op (1: no cluster); rmsnorm_stages, rows in flight per block of its staged kernel (-1:
// never). Process-global: not for use outside tests.
PyObject* set_launch_config_py(PyObject*, PyObject* args) {
  int block_threads = 0, waves = 0, rmsnorm_cluster = 0, rmsnorm_stages = 0;
  if (!PyArg_ParseTuple(args, "iiii:_set_launch_config", &block_threads, &waves, &rmsnorm_cluster, &rmsnorm_stages)) {
    return nullptr;
  }
  const std::string error = sgl_quant::set_launch_config(block_threads, waves, rmsnorm_cluster, rmsnorm_stages);
  if (!error.empty()) {
    PyErr_SetString(PyExc_RuntimeError, error.c_str());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* device_kernel_problem_py(PyObject*, PyObject* args) {
  int device = 0;
  if (!PyArg_ParseTuple(args, "i:_device_kernel_problem", &device)) return nullptr;
  try {
    return PyUnicode_FromString(sgl_quant::device_kernel_problem(device).c_str());
  } catch (const std::exception& e) {  // the device guard's own errors
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyObject* launch_config_py(PyObject*, PyObject*) {
  int c[4];
  sgl_quant::launch_config(c);
  return Py_BuildValue("[iiii]", c[0], c[1], c[2], c[3]);
}
#endif

PyMethodDef methods[] = {
    {"build_info", build_info, METH_NOARGS, "Version, torch/CUDA it was built with, compiled CUDA archs"},
#if defined(SGL_QUANT_WITH_CUDA)
    {"_set_launch_config", set_launch_config_py, METH_VARARGS,
     "_set_launch_config(block_threads, waves, rmsnorm_cluster, rmsnorm_stages): launch shape of the CUDA kernels "
     "(test hook)"},
    {"_device_kernel_problem", device_kernel_problem_py, METH_VARARGS,
     "_device_kernel_problem(device): '' when the build has CUDA code that device runs, else why not"},
    {"_launch_config", launch_config_py, METH_NOARGS,
     "[block_threads, waves, rmsnorm_cluster, rmsnorm_stages] now in use"},
#endif
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_C",
    "sgl_quant native extension: registers torch.ops.sgl_quant.* and reports build information", -1, methods,
};

}  // namespace

// Importing sgl_quant._C loads the library, whose static initializers register the ops.
PyMODINIT_FUNC PyInit__C() { return PyModule_Create(&module); }
