#!/usr/bin/env bash
# Session 33 call 2 (ran from scratch/; archived here, paths adjusted): build; the masked spread check; ncu of the fused op at M = 64, 256, 4096 (warm L2).
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
export TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 PYTHONUNBUFFERED=1
t0=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps -e . >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 ))s"
python3 benchmark/results/probe/s33-masked-spread.py 2>&1 | tee "$OUT/masked_spread.txt"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 240 "$NCU" --clock-control none --cache-control none -k regex:rmsnorm --launch-skip 1 --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
  --metrics lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,gpu__time_duration.sum \
  python3 benchmark/results/probe/s33-rms-ncu.py >"$OUT/ncu_m64.txt" 2>&1
for skip in 3 5; do
  timeout 240 "$NCU" --clock-control none --cache-control none -k regex:rmsnorm --launch-skip $skip --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
    --metrics lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,gpu__time_duration.sum \
    python3 benchmark/results/probe/s33-rms-ncu.py >"$OUT/ncu_skip$skip.txt" 2>&1
done
for f in "$OUT"/ncu_*.txt; do echo "== $f"; grep -E "rmsnorm_quant_kernel|Duration|Throughput|Hit Rate|Busy|lts__|dram__bytes|l1tex__t_sectors|Achieved Occupancy|Theoretical Occupancy|Registers|Stall|Warp Cycles|gpu__time" "$f" | head -45; done
echo "total $(( $(date +%s) - t0 ))s"
