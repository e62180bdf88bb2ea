#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Session 37, call 4 (branch wip/s37-chain): the fused op's chain after the row's sum, two experiment
# switches in csrc/cuda/rmsnorm_quant.cuh: SGLQ_EXP_MARK (ss / H by Markstein's correction of ss * RN(1/H),
# RN(1/H) computed while the loads fly; exact: exhaustive check, NOTES session 37) and SGLQ_EXP_BFLY (the
# warp sums of whole-block rows added over the next power of two of the row's warps, not 32 lanes).
# Builds four probes, compares their bytes with the base build's (dump + cmp), runs each one's cluster
# check, then times the cases in ABBA order (each `cases` run is two rounds).
set -uo pipefail
mkdir -p "$OUT"
V=("" "-DSGLQ_EXP_MARK" "-DSGLQ_EXP_BFLY" "-DSGLQ_EXP_MARK -DSGLQ_EXP_BFLY")
N=("base" "mark" "bfly" "mark+bfly")
for i in 0 1 2 3; do PROBE=scripts/probe/rmsnorm_probe.cu scripts/probe/build_probe.sh /tmp/p$i ${V[$i]} & done; wait
for i in 0 1 2 3; do [[ -x /tmp/p$i ]] || { echo "build $i failed"; exit 1; }; done
{
  for i in 0 1 2 3; do
    rm -rf /tmp/d$i && mkdir -p /tmp/d$i && /tmp/p$i dump /tmp/d$i
    (( i == 0 )) && continue
    nd=0; for f in /tmp/d0/*.bin; do cmp -s "$f" /tmp/d$i/$(basename "$f") || { echo "DIFFERENT ${N[$i]} $(basename "$f")"; nd=$((nd+1)); }; done
    echo "dump ${N[$i]}: $(ls /tmp/d0/*.bin | wc -l) shapes, $nd differ from base"
    echo "${N[$i]} $(timeout 60 /tmp/p$i check | tail -1)"
  done
} 2>&1 | tee "$OUT/bytes.txt"
for i in 0 1 2 3 3 2 1 0; do
  timeout 60 stdbuf -oL /tmp/p$i cases 1:7168,64:7168,256:7168,4096:7168,16384:7168,64:4096,256:4096 0 0 0 | sed "s|^|${N[$i]} |"
  timeout 30 stdbuf -oL /tmp/p$i cases 64:7168,256:7168,1024:7168 0 0 1 | sed "s|^|${N[$i]} |"
done > "$OUT/cases.txt" 2>&1
python3 - "$OUT/cases.txt" <<'PY' | tee "$OUT/summary.txt"
import collections, statistics, sys
t = collections.defaultdict(list); order = []
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) < 11 or p[1] != "rms": continue
    key = (p[2], p[3], p[5])  # M, H, normed
    order += [key] if key not in order else []
    t[(p[0], key)].append((float(p[-2]), float(p[-1])))
names = ["base", "mark", "bfly", "mark+bfly"]
print(f"{'case':28s}" + "".join(f"{n:>22s}" for n in names) + "   (median of 4 rounds, us no PDL / PDL)")
for k in order:
    cells = []
    for n in names:
        v = t.get((n, k), [])
        cells.append(f"{statistics.median(a for a, _ in v):9.3f} /{statistics.median(b for _, b in v):8.3f}" if v else " " * 19)
    print(f"{' '.join(k):28s}" + "".join(f"{c:>22s}" for c in cells))
PY
