#!/usr/bin/env bash
# Device-side driver for scripts/probe/latency_probe.cu (nvcc only, builds in seconds). Logs under $OUT.
#   MODES="all grid" NCU_PROBLEMS="4 6 7" OUT=$OUT scripts/probe/probe_run.sh
#   VARIANTS="base -DSGLQ_EXP_X -DSGLQ_EXP_X,-DSGLQ_EXP_Y" MODES="quick redo" OUT=$OUT scripts/probe/probe_run.sh
#   PROBE_PROBLEMS=0,13 SKIP_BUILD=1 VARIANTS=... MODES=nopdl ...   (same builds again, two problems only)
# VARIANTS (default "base"): one build per set of experiment macros (SGLQ_EXP_* switches placed in the
# kernel header for an A/B; comma-separated within a variant). With more than one, every build must
# write the same codes and scales as the first (dump + cmp), and the modes run for each build in turn,
# twice over ("quick", "nopdl", "masked": a median per build and problem is printed last). A variant "-I<dir>"
# builds against another version's headers (scripts/probe/headers_of.sh REF <dir>, here, before the call;
# carry the folder): VARIANTS="-I.ab/main base" is the working tree against main.
# NCU_PROBLEMS: Nsight Compute on the problems of those indices, for the first two builds, warm L2
# (--cache-control none, like the benchmark's replays).
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
rounds=$(( ${#variants[@]} > 1 ? 2 : 1 ))
for m in ${MODES:-all}; do
  echo "== $m"
  for ((round = 0; round < rounds; round++)); do
    for i in "${!variants[@]}"; do
      "/tmp/probe_$i" "$m" | sed "s|^|${variants[$i]} r$round |"
    done
  done | tee "$OUT/probe_$m.txt"
done

if [[ -n "${NCU_PROBLEMS:-}" ]]; then
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  args=(--clock-control none --cache-control none -k regex:per_token_group_quant_kernel
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis
        --section WarpStateStats --section SchedulerStats --section Occupancy)
  metrics=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__inst_executed.sum
  metrics+=,smsp__issue_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum
  for pipe in xu alu fma lsu; do metrics+=,sm__inst_executed_pipe_$pipe.avg.pct_of_peak_sustained_active; done
  for i in 0 1; do
    [[ -x /tmp/probe_$i ]] || continue
    "$NCU" "${args[@]}" --metrics "$metrics" "/tmp/probe_$i" ncu $NCU_PROBLEMS >"$OUT/ncu_$i.txt" 2>&1 ||
      { echo "ncu with metrics failed, retrying without"; "$NCU" "${args[@]}" "/tmp/probe_$i" ncu $NCU_PROBLEMS >"$OUT/ncu_$i.txt" 2>&1; }
    grep -E "^  void|Duration|DRAM Throughput|dram__bytes|lts__t_sector_hit|pipe_|Issue Slots|Achieved Occupancy|inst_executed.sum" \
      "$OUT/ncu_$i.txt" | head -150
  done
fi

for f in "$OUT"/probe_*.txt; do  # median (and half the spread) per build and problem, for the modes of passes
  grep -q " pass " "$f" || continue
  echo "== medians: $(basename "$f")"
  python3 - "$f" <<'PY'
import collections, statistics, sys
t, order = collections.defaultdict(list), []
for line in open(sys.argv[1]):
    parts = line.split()  # <variant> r<round> pass <n> <problem words...> <us>
    if len(parts) < 6 or parts[2] != "pass":
        continue
    variant, problem, us = parts[0], " ".join(parts[4:-1]), float(parts[-1])
    order += [problem] if problem not in order else []
    t[(variant, problem)].append(us)
vs = list(dict.fromkeys(v for v, _ in t))
print(f"{'problem':24s}" + "".join(f"{v[-16:]:>18s}" for v in vs))
for p in order:
    print(f"{p:24s}" + "".join(f"{statistics.median(t[v, p]):11.3f} ±{(max(t[v, p]) - min(t[v, p])) / 2:5.3f}" for v in vs))
PY
done
[[ -f "$OUT/variants_cmp.txt" ]] && cat "$OUT/variants_cmp.txt"
exit 0
