#!/usr/bin/env bash
# Session 42, call 4: call 3 read H=5120 M=16384 slower with PDL (149.64) than without (144.42); twice more, H=5120 and 7168.
set -uo pipefail
export TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16
python3 -m pip install --no-build-isolation --no-deps -e . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
cd benchmark
for r in 1 2; do python3 bench_rmsnorm_quant.py --quick --no-baselines --hidden 5120,7168 --out $OUT/r$r > $OUT/r$r.log 2>&1; done
for r in 1 2; do echo "== run $r"; grep -E "M(4096|16384)-|M256-" $OUT/r$r/rmsnorm.txt; done
