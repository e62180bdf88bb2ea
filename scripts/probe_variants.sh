#!/usr/bin/env bash
# Device-side A/B of kernel variants selected by macros (SGLQ_EXP_*) in the probe: builds one probe
# binary per variant, checks that each variant writes the same codes as the first (dump + cmp), then
# times every problem with PDL ("quick" mode), variants interleaved, and optionally runs ncu on the
# first two. Logs under $OUT.
#   VARIANTS="base -DSGLQ_EXP_X -DSGLQ_EXP_X,-DSGLQ_EXP_Y" NCU_PROBLEMS="6 7" OUT=$OUT scripts/probe_variants.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
NVCC=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc | head -1)
read -r -a variants <<<"${VARIANTS:-base}"
build() {
  local i=$1 flag=${variants[$1]}
  [[ $flag == base ]] && flag=""
  flag=${flag//,/ }  # several macros: -DA,-DB
  $NVCC -O3 -std=c++17 --use_fast_math -gencode arch=compute_90a,code=sm_90a -I csrc $flag \
    scripts/latency_probe.cu -o /tmp/probe_$i
}
for i in "${!variants[@]}"; do build "$i" & done
wait
for i in "${!variants[@]}"; do
  [[ -x /tmp/probe_$i ]] || { echo "build of ${variants[$i]} failed"; exit 1; }
  mkdir -p /tmp/dump_$i && /tmp/probe_$i dump /tmp/dump_$i
  if (( i > 0 )); then
    for f in /tmp/dump_0/*.bin; do
      cmp -s "$f" "/tmp/dump_$i/$(basename "$f")" || echo "DIFFERENT codes: ${variants[$i]} $(basename "$f")"
    done
  fi
done | tee "$OUT/variants_cmp.txt"
for round in 0 1; do
  for i in "${!variants[@]}"; do
    /tmp/probe_$i quick | sed "s|^|${variants[$i]} r$round |" >>"$OUT/variants_quick.txt"
  done
done
if [[ -n "${NCU_PROBLEMS:-}" ]]; then
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  metrics=sm__inst_executed.sum,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active
  metrics+=,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active
  metrics+=,sm__inst_executed_pipe_fp16.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active
  metrics+=,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active
  metrics+=,sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed
  metrics+=,gpu__time_duration.sum,sm__cycles_active.avg,smsp__issue_active.avg.pct_of_peak_sustained_active
  metrics+=,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_write.sum
  for i in 0 1; do  # the first two variants
    [[ -x /tmp/probe_$i ]] || continue
    "$NCU" --clock-control none --cache-control none -k regex:per_token_group_quant_kernel -c $((3 * $(wc -w <<<"$NCU_PROBLEMS"))) \
      --metrics "$metrics" /tmp/probe_$i ncu $NCU_PROBLEMS >"$OUT/ncu_$i.txt" 2>&1
  done
fi
# summary: median over the six measurements (2 rounds x 3 passes) per variant and problem
python3 - "$OUT/variants_quick.txt" <<'PY'
import collections, statistics, sys
t = collections.defaultdict(list)
order = []
for line in open(sys.argv[1]):
    parts = line.split()
    v, prob, us = parts[0], " ".join(parts[4:-1]), float(parts[-1])
    if prob not in order: order.append(prob)
    t[(v, prob)].append(us)
vs = list(dict.fromkeys(k[0] for k in t))
print(f"{'problem':24s}" + "".join(f"{v[-16:]:>18s}" for v in vs))
for prob in order:
    print(f"{prob:24s}" + "".join(f"{statistics.median(t[(v, prob)]):11.3f} ±{(max(t[(v, prob)]) - min(t[(v, prob)])) / 2:5.3f}" for v in vs))
PY
cat "$OUT/variants_cmp.txt"
if [[ -n "${REDO:-}" ]]; then  # the masked re-read check on every variant (the NO_VALIDATE one must fail)
  for i in "${!variants[@]}"; do echo "${variants[$i]}: $(/tmp/probe_$i redo | tr '\n' ' ')"; done | tee "$OUT/redo.txt"
fi
