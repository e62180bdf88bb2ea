// SM90 primitives of the fused RMSNorm kernel: thread-block clusters, distributed shared memory,
// transaction barriers, bulk copies and L2 prefetch (each a no-op in code for older archs, where the
// launcher never uses them).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace sgl_quant {

// Thread-block cluster primitives (SM90+; the launcher uses clusters only there).
__device__ __forceinline__ int cluster_rank() {
  uint32_t r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
#endif
  return static_cast<int>(r);
}
// The cluster's start: every thread arrives without ordering once its block has started (the mbarrier
// inits before it are released by fence_mbar_init), and waits before its first remote store. ptxas
// guards the arrive with a read of a driver constant line (c[0x0][0x140]: launched in clusters or not),
// so the kernel arrives after issuing its row's loads, where that line's miss hides behind them.
__device__ __forceinline__ void cluster_arrive_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
#endif
}

__device__ __forceinline__ uint32_t shared_addr(const void* p) {  // the shared-window address of p
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// A float to / from this block's shared memory at a shared-window address (shared_addr), in program order
// with the barriers around it.
__device__ __forceinline__ void st_shared_f32(uint32_t addr, float v) {
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(addr), "f"(v) : "memory");
}
__device__ __forceinline__ float ld_shared_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}

// The warp sums of a clustered row travel on transaction barriers: every warp writes its sum into every
// block's shared memory with st.async, which counts its 4 bytes on that block's mbarrier, and a block
// waits on its own mbarrier only: no cluster-wide barrier per row, and nothing waits for the global
// stores issued before (a release would; a barrier.cluster per row made M=1 H=7168 10% slower).
__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_addr(bar)), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void fence_mbar_init() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_addr(bar)), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void mbar_wait_parity(uint64_t* bar, uint32_t phase) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t a = shared_addr(bar);
  uint32_t done = 0;
  do {
    asm volatile("{\n\t.reg .pred P;\n\tmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P, [%1], %2;\n\tselp.u32 %0, 1, 0, P;\n\t}"
                 : "=r"(done) : "r"(a), "r"(phase) : "memory");
  } while (!done);
#endif
}
// Stores v at the address of `local` in block `rank`'s shared memory and counts 4 bytes on that block's `bar`.
__device__ __forceinline__ void st_async_to_cluster_block(float* local, uint64_t* bar, int rank, float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t raddr, rbar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(raddr) : "r"(shared_addr(local)), "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rbar) : "r"(shared_addr(bar)), "r"(rank));
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(raddr), "r"(__float_as_uint(v)), "r"(rbar) : "memory");
#endif
}

// Asks the L2 to fetch `bytes` (a multiple of 16) from 16-byte aligned global memory at `ptr`: one
// instruction, no registers or shared memory to receive the data (SM90+).
__device__ __forceinline__ void prefetch_to_l2(const void* ptr, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(ptr), "r"(bytes));
#endif
}

// Copies `bytes` (a multiple of 16) from 16-byte aligned global memory into this block's shared memory
// with the bulk-copy engine, and counts them on `bar` (SM90+).
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(shared_addr(dst)), "l"(src), "r"(bytes), "r"(shared_addr(bar)) : "memory");
#endif
}
// Orders this thread's earlier shared-memory accesses before later ones of the async proxy (bulk copies).
__device__ __forceinline__ void fence_proxy_async_shared() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

}  // namespace sgl_quant
