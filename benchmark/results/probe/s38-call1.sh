#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Session 38, call 1: the three GPU-only scripts that now set the launch hook through
# sgl_quant.testing.launch_config (the v2 benchmark's launch sweep, profile_case.py, launch_config_sweep.py):
# build, run each briefly, and check that the hook is back at its defaults after each.
set -uo pipefail
mkdir -p "$OUT"
export TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 PYTHONUNBUFFERED=1
t0=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps -v -e . > "$OUT/build.log" 2>&1; echo "build rc=$? $(( $(date +%s) - t0 ))s"
hook() { python3 -c "from sgl_quant import _C; print(_C._launch_config())"; }
echo "defaults: $(hook)"
timeout 150 python3 - > "$OUT/sweep.log" 2>&1 <<'PY'
import sys
sys.path.insert(0, "benchmark")
import bench_per_token_group_quant as b
from sgl_quant import _C
before = _C._launch_config()
b.settle_graph_state()
b.sweep_launch_shapes()
after = _C._launch_config()
print("hook before", before, "after", after, "restored" if before == after else "NOT RESTORED")
PY
echo "sweep rc=$?: $(tail -1 "$OUT/sweep.log")"
for c in dense masked; do
  timeout 60 python3 - "$c" > "$OUT/profile_$c.log" 2>&1 <<'PY'
import runpy, sys
from sgl_quant import _C
before = _C._launch_config()
sys.argv = ["profile_case.py", sys.argv[1]]
runpy.run_path("scripts/gpu/profile_case.py", run_name="__main__")
after = _C._launch_config()
print("hook before", before, "after", after, "restored" if before == after else "NOT RESTORED")
PY
  echo "profile_case $c rc=$?: $(tail -1 "$OUT/profile_$c.log")"
done
timeout 120 python3 scripts/probe/launch_config_sweep.py rms-cases 64:7168,256:7168 1,2 > "$OUT/lcs.log" 2>&1
echo "launch_config_sweep rc=$?"; cat "$OUT/lcs.log"
cat "$OUT/sweep.log"
echo "total $(( $(date +%s) - t0 ))s"
