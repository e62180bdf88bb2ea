// Host-side launch helpers shared by the launchers: launch options, per-device caches, occupancy
// queries and cudaLaunchKernelEx with PDL and thread-block clusters.
#pragma once

#include <atomic>

#include <cuda_runtime.h>

#include "common.cuh"

namespace sgl_quant {

struct LaunchOptions {
  cudaStream_t stream = nullptr;
  int device = 0;
  int num_sms = 1;
  bool pdl = false;       // launch with programmatic dependent launch
  bool clusters = false;  // the device runs thread-block clusters (SM90+)
  // Test hook (sgl_quant._C._set_launch_config): the launch shape, for checks that the bytes do not
  // depend on it. 0 everywhere means automatic.
  int block_threads = 0;    // v2: threads per block, a multiple of 32 <= kMaxBlockThreads
  int waves = 0;            // grids that loop (masked v2, the fused op's two-chunk kernel): rounds of resident blocks
  int rmsnorm_cluster = 0;  // the fused op: blocks per row (1: no cluster), <= kRmsNormMaxCluster
  int rmsnorm_stages = 0;   // the fused op's staged kernel: rows in flight per block (> 0), never (< 0)
};

constexpr int log2_of_power_of_two(int v) { return v <= 1 ? 0 : 1 + log2_of_power_of_two(v / 2); }

// One int per device (devices 0..63; others are never cached), 0 meaning not known yet: what a launcher
// learns about a device or a kernel once. Relaxed atomics: first calls on several host threads compute
// the same value, and either store wins.
class PerDeviceInt {
 public:
  int get(int device) const { return cached(device) ? values_[device].load(std::memory_order_relaxed) : 0; }
  void set(int device, int value) {
    if (cached(device)) values_[device].store(value, std::memory_order_relaxed);
  }

 private:
  static constexpr int kMaxDevices = 64;
  static bool cached(int device) { return device >= 0 && device < kMaxDevices; }
  std::atomic<int> values_[kMaxDevices];
};

// Blocks of `threads` of `kernel` with `smem` bytes of dynamic shared memory resident per SM (at least 1),
// cached per kernel, device and block size with the smem it was queried for (one word, so that a race
// between calls stores either query whole).
template <auto kernel>
cudaError_t resident_blocks_per_sm(int threads, size_t smem, const LaunchOptions& opt, int& occupancy) {
  constexpr int kMaxDevices = 64, kMaxThreads = 1024;
  static std::atomic<uint64_t> cached[kMaxDevices][kMaxThreads / 32 + 1];  // smem << 16 | occupancy (0: none)
  const bool cacheable = opt.device >= 0 && opt.device < kMaxDevices && smem < (uint64_t{1} << 40);
  const uint64_t entry = cacheable ? cached[opt.device][threads / 32].load(std::memory_order_relaxed) : 0;
  occupancy = (entry >> 16) == smem ? static_cast<int>(entry & 0xffffu) : 0;
  if (occupancy == 0) {
    const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occupancy, kernel, threads, smem);
    if (err != cudaSuccess) return err;
    occupancy = occupancy > 0 ? (occupancy < 0xffff ? occupancy : 0xffff) : 1;
    if (cacheable) {
      cached[opt.device][threads / 32].store(smem << 16 | static_cast<uint64_t>(occupancy), std::memory_order_relaxed);
    }
  }
  return cudaSuccess;
}

// The grid for blocks_needed blocks of `threads`, capped at `waves` rounds of resident blocks of `kernel`;
// grids of at most one block per SM need no occupancy query.
template <auto kernel>
cudaError_t capped_grid(int64_t blocks_needed, int threads, size_t smem, int waves, const LaunchOptions& opt,
                        int64_t& grid) {
  grid = blocks_needed;
  if (blocks_needed <= opt.num_sms) return cudaSuccess;
  int occupancy = 0;
  const cudaError_t err = resident_blocks_per_sm<kernel>(threads, smem, opt, occupancy);
  if (err != cudaSuccess) return err;
  const int64_t max_blocks = static_cast<int64_t>(opt.num_sms) * occupancy * waves;
  grid = blocks_needed < max_blocks ? blocks_needed : max_blocks;
  return cudaSuccess;
}

// The launch options as `kernel` can use them: PDL and clusters need the kernel's SM90 instructions, not
// only an SM90 device (a build for older archs runs there as JIT-compiled older PTX, without
// griddepcontrol and the cluster barriers), so they are dropped where its loaded code is older.
template <auto kernel>
LaunchOptions options_for(const LaunchOptions& requested) {
  LaunchOptions o = requested;
  if (!o.pdl && !o.clusters) return o;
  static PerDeviceInt cached;  // 0 unknown, 1 older code, 2 SM90 code
  int known = cached.get(o.device);
  if (known == 0) {
    cudaFuncAttributes attr = {};
    known = cudaFuncGetAttributes(&attr, kernel) == cudaSuccess && attr.ptxVersion >= 90 ? 2 : 1;
    cached.set(o.device, known);
  }
  if (known == 1) o.pdl = o.clusters = false;
  return o;
}

constexpr int64_t kMaxClusterRows = 65535;  // gridDim.y's limit: the most clusters of one launch

// kernel<<<grid, threads, smem, opt.stream>>>(args), as a programmatic dependent launch when opt.pdl, in
// thread-block clusters of `cluster` blocks when > 1 (grid a multiple of it, at most kMaxClusterRows
// clusters): then as a 2-D grid (cluster, grid / cluster), so that blockIdx.y is the block's cluster.
template <typename Kernel, typename Args>
cudaError_t launch_kernel(Kernel kernel, int64_t grid, int threads, size_t smem, const LaunchOptions& opt,
                          const Args& args, int cluster = 1) {
  if (cluster > 1 && grid / cluster > kMaxClusterRows) return cudaErrorInvalidValue;  // launchers keep within it
  cudaLaunchConfig_t config = {};
  config.gridDim = cluster > 1 ? dim3(static_cast<unsigned>(cluster), static_cast<unsigned>(grid / cluster))
                               : dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  config.stream = opt.stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = opt.pdl ? 1 : 0;
  config.attrs = attr;
  config.numAttrs = 1;
  if (cluster > 1) {
    attr[1].id = cudaLaunchAttributeClusterDimension;
    attr[1].val.clusterDim.x = static_cast<unsigned>(cluster);
    attr[1].val.clusterDim.y = 1;
    attr[1].val.clusterDim.z = 1;
    config.numAttrs = 2;
  }
  return cudaLaunchKernelEx(&config, kernel, args);
}

}  // namespace sgl_quant
