#!/usr/bin/env bash
# Device-side driver for scripts/latency_probe.cu (nvcc only, builds in seconds): build it, run the
# requested modes, and optionally profile problems by index with Nsight Compute with a warm L2
# (--cache-control none, like the benchmark's replays). Logs under $OUT.
#   MODES="all grid" NCU_PROBLEMS="4 6 7" OUT=$OUT scripts/probe_run.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
NVCC=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc | head -1)
$NVCC -O3 -std=c++17 --use_fast_math -gencode arch=compute_90a,code=sm_90a -I csrc ${PROBE_FLAGS:-} \
  scripts/latency_probe.cu -o /tmp/latency_probe || exit 1
for m in ${MODES:-all}; do
  echo "== $m"; /tmp/latency_probe "$m" | tee "$OUT/probe_$m.txt"
done
if [[ -n "${NCU_PROBLEMS:-}" ]]; then
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  args=(--clock-control none --cache-control none -k regex:per_token_group_quant_kernel
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis
        --section WarpStateStats --section SchedulerStats --section Occupancy)
  metrics=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__inst_executed.sum
  metrics+=,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active
  "$NCU" "${args[@]}" --metrics "$metrics" /tmp/latency_probe ncu $NCU_PROBLEMS >"$OUT/ncu.txt" 2>&1 ||
    { echo "ncu with metrics failed, retrying without"; "$NCU" "${args[@]}" /tmp/latency_probe ncu $NCU_PROBLEMS >"$OUT/ncu.txt" 2>&1; }
  grep -E "^  void|Duration|DRAM Throughput|dram__bytes|lts__t_sector_hit|pipe_xu|pipe_fma|SM Active Cycles|Elapsed Cycles|Issue Slots|Achieved Occupancy|inst_executed.sum" "$OUT/ncu.txt" | head -150
fi
