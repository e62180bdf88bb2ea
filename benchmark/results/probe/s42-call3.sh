#!/usr/bin/env bash
# Session 42, call 3: the fused op at the other real row lengths (Qwen3 5120 / 2048, DeepSeek-V3 q_a_layernorm 1536),
# against the torch.compile'd add+RMSNorm + v2 pair and the 7-byte roofline.
set -uo pipefail
mkdir -p $OUT/h
export TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16
python3 -m pip install --no-build-isolation --no-deps -e . > $OUT/h/build.log 2>&1 || { tail -30 $OUT/h/build.log; exit 1; }
cd benchmark && python3 bench_rmsnorm_quant.py --quick --hidden 5120,2048,1536 --out $OUT/h 2>&1 | tail -30
