"""Fixed points of the kernels the serving stacks use today, per GPU model (docs/spec.md §5, §6.5).

The reference (sgl-kernel's AOT v2 per-token-group kernel, built with fast-math for sm_90a) and FlashInfer's
and vLLM's fused add + RMSNorm + FP8 block quant cannot be built here; they were timed with the same method
(CUDA-graph replay, median), in one process with sgl_quant, on one GPU of each model. Each entry is
(µs without PDL, µs with PDL); None where that launch mode was not timed. The benchmarks show the ratio of
ours to them only on the GPU model they were measured on.
"""

# v2 benchmark case name -> (no PDL, PDL). H100 80GB HBM3, 2026-12-07; H200, 2026-11-29/30.
V2_REFERENCE_US = {
    "H100": {
        "dense-M1-H4096-col_f32": (1.34, 0.85), "dense-M8-H7168-col_f32": (1.43, 1.09),
        "dense-M64-H7168-col_f32": (1.86, 1.40), "dense-M256-H7168-col_f32": (2.51, 2.25),
        "dense-M1024-H4096-col_f32": (3.78, 3.76), "dense-M4096-H4096-col_f32": (17.77, 17.08),
        "dense-M16384-H7168-col_f32": (120.02, 119.24),
        "masked-silu-E256x128-H2048-col_ue8m0": (317.9, 317.9), "masked-silu-E32x256-H2048-col_ue8m0": (40.7, 40.7),
        "masked-silu-E8x512-H2048-col_ue8m0": (10.85, 10.85), "chain10-nopdl-M1-H4096": (13.53, None),
        "chain10-pdl-M1-H4096": (None, 11.23),
    },
    "H200": {
        "dense-M1-H4096-col_f32": (1.29, None), "dense-M8-H4096-col_f32": (1.33, None),
        "dense-M1-H7168-col_f32": (1.33, None), "dense-M8-H7168-col_f32": (1.37, None),
        "dense-M64-H7168-col_f32": (1.79, None), "dense-M256-H7168-col_f32": (2.46, None),
        "dense-M64-H4096-col_ue8m0": (1.63, None), "dense-M64-H7168-col_ue8m0": (1.74, None),
        "dense-M256-H7168-col_ue8m0": (2.37, None), "dense-M1024-H4096-col_f32": (3.71, None),
        "dense-M4096-H4096-col_f32": (13.62, None), "dense-M4096-H4096-col_ue8m0": (12.66, None),
        "dense-M16384-H7168-col_f32": (84.7, None),
        "masked-silu-E256x128-H2048-col_ue8m0": (318.0, None), "masked-silu-E32x256-H2048-col_ue8m0": (40.7, None),
        "masked-silu-E8x512-H2048-col_ue8m0": (10.8, None), "chain10-nopdl-M1-H4096": (13.25, None),
        "chain10-pdl-M1-H4096": (None, 10.4),
    },
}

# Fused add + RMSNorm -> FP8 block quant, bf16, H = 7168, group 128, residual, column-major TMA fp32 scales,
# normed output written (FlashInfer 0.7 always writes it): M -> (no PDL, PDL).
FLASHINFER_FUSED_US = {
    "H100": {1: (2.35, 1.85), 64: (2.97, 2.41), 256: (4.67, 4.02), 1024: (24.73, 24.23), 4096: (93.41, 92.74),
             16384: (364.3, 363.7)},
    "H200": {1: (2.38, 1.87), 64: (2.82, 2.30), 256: (4.30, 3.76), 1024: (17.7, None), 4096: (68.8, None),
             16384: (266.5, None)},
}
# vLLM's rms_norm_per_block_quant (no PDL), the same case.
VLLM_FUSED_US = {"H200": {1: 7.93, 64: 7.96, 256: 11.3, 1024: 36.8, 4096: 141.9, 16384: 534.0}}
FUSED_ANCHOR_H = 7168  # the row length of the fused op's fixed points


def gpu_model(device_name):
    """"H100" or "H200" for a device name that holds one of them, else None (no fixed points)."""
    return next((model for model in ("H100", "H200") if model in device_name), None)
