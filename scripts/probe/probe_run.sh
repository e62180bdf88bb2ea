#!/usr/bin/env bash
# Device-side A/B driver for the probes (nvcc only, builds in seconds): scripts/probe/latency_probe.cu
# (v2, DSV4) by default, PROBE=scripts/probe/rmsnorm_probe.cu for the fused op. Logs under $OUT.
#   MODES="all; grid" NCU_PROBLEMS="4 6 7" OUT=$OUT scripts/probe/probe_run.sh
#   VARIANTS="base -DSGLQ_EXP_X -DSGLQ_EXP_X,-DSGLQ_EXP_Y" MODES="quick; redo" OUT=$OUT scripts/probe/probe_run.sh
#   PROBE_PROBLEMS=0,13 SKIP_BUILD=1 VARIANTS=... MODES=nopdl ...   (same builds again, two problems only)
#   PROBE=scripts/probe/rmsnorm_probe.cu VARIANTS="-I.ab/main base" \
#     MODES="check; cases 1:7168,64:7168,256:7168 0 0 0,1" OUT=$OUT scripts/probe/probe_run.sh
# MODES: probe command lines separated by ";" (a mode and its arguments), each run for every build.
# VARIANTS (default "base"): one build per set of experiment macros (SGLQ_EXP_* switches placed in the
# kernel header for an A/B; comma-separated within a variant). With more than one, every build must
# write the same codes and scales as the first (dump + cmp), and each mode runs ROUNDS times (default 2)
# over the builds, every other round in the opposite order; scripts/probe/ab_summary.py prints the
# medians per build and problem last. A variant "-I<dir>" builds against another version's headers
# (scripts/probe/headers_of.sh REF <dir>, here, before the call; carry the folder): VARIANTS="-I.ab/main
# base" is the working tree against main.
# NCU_PROBLEMS: Nsight Compute on the problems of those indices (latency_probe's "ncu" mode; NCU_RUN, the
# probe's command line, e.g. NCU_RUN="once 256 7168" NCU_KERNEL=regex:rmsnorm_quant_kernel for the fused
# op), for the first two builds, warm L2 (--cache-control none, like the benchmark's replays).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
read -r -a variants <<<"${VARIANTS:-base}"
# SKIP_BUILD=1: the builds of the previous run in this machine, same VARIANTS (other MODES or PROBE_PROBLEMS)
if [[ -z ${SKIP_BUILD:-} ]]; then
  for i in "${!variants[@]}"; do
    flags=${variants[$i]}; [[ $flags == base ]] && flags=""
    scripts/probe/build_probe.sh "/tmp/probe_$i" ${flags//,/ } &
  done
  wait
fi
for i in "${!variants[@]}"; do [[ -x /tmp/probe_$i ]] || { echo "build of ${variants[$i]} failed"; exit 1; }; done

if (( ${#variants[@]} > 1 )) && [[ -z ${SKIP_BUILD:-} ]]; then
  for i in "${!variants[@]}"; do
    rm -rf "/tmp/dump_$i" && mkdir -p "/tmp/dump_$i" && "/tmp/probe_$i" dump "/tmp/dump_$i"  # no files of an earlier probe
    (( i == 0 )) && continue
    for f in /tmp/dump_0/*.bin; do
      cmp -s "$f" "/tmp/dump_$i/$(basename "$f")" || echo "DIFFERENT bytes: ${variants[$i]} $(basename "$f")"
    done
  done | tee "$OUT/variants_cmp.txt"
fi
rounds=${ROUNDS:-$(( ${#variants[@]} > 1 ? 2 : 1 ))}
order=("${!variants[@]}")
IFS=';' read -r -a modes <<<"${MODES:-all}"
for k in "${!modes[@]}"; do
  read -r -a cmd <<<"${modes[$k]}"
  (( ${#cmd[@]} )) || continue
  echo "== ${cmd[*]}"
  for ((round = 0; round < rounds; round++)); do
    for i in "${order[@]}"; do
      "/tmp/probe_$i" "${cmd[@]}" | sed "s|^|${variants[$i]} r$round |"
    done
    order=($(printf '%s\n' "${order[@]}" | tac))  # ABBA: no build always runs first
  done | tee "$OUT/probe_${k}_${cmd[0]}.txt"
done

if [[ -n "${NCU_PROBLEMS:-}${NCU_RUN:-}" ]]; then
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  args=(--clock-control none --cache-control none -k "${NCU_KERNEL:-regex:per_token_group_quant_kernel}"
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis
        --section WarpStateStats --section SchedulerStats --section Occupancy)
  metrics=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__inst_executed.sum
  metrics+=,smsp__issue_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum
  for pipe in xu alu fma lsu; do metrics+=,sm__inst_executed_pipe_$pipe.avg.pct_of_peak_sustained_active; done
  read -r -a run <<<"${NCU_RUN:-ncu $NCU_PROBLEMS}"  # the probe's command line under ncu
  for i in 0 1; do
    [[ -x /tmp/probe_$i ]] || continue
    "$NCU" "${args[@]}" --metrics "$metrics" "/tmp/probe_$i" "${run[@]}" >"$OUT/ncu_$i.txt" 2>&1 ||
      { echo "ncu with metrics failed, retrying without"; "$NCU" "${args[@]}" "/tmp/probe_$i" "${run[@]}" >"$OUT/ncu_$i.txt" 2>&1; }
    grep -E "^  void|Duration|DRAM Throughput|dram__bytes|lts__t_sector_hit|pipe_|Issue Slots|Achieved Occupancy|inst_executed.sum" \
      "$OUT/ncu_$i.txt" | head -150
  done
fi

for f in "$OUT"/probe_*.txt; do  # medians per build and problem, for the modes that time
  grep -qE "^[^ ]+ r[0-9]+ (pass|rms M=)" "$f" || continue
  echo "== medians: $(basename "$f")"
  python3 scripts/probe/ab_summary.py "$f" "${variants[@]}"
done
[[ -f "$OUT/variants_cmp.txt" ]] && cat "$OUT/variants_cmp.txt"
exit 0
