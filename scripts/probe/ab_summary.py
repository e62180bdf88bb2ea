"""The table of an A/B of the fused kernel: medians over the rounds of `rmsnorm_probe cases` lines, each
line prefixed with its build's name (`/tmp/rp_$v cases ... | sed "s/^/$v /"`), one column per build.

    python3 scripts/probe/ab_summary.py AB_LOG BUILD...     # e.g. benchmark/results/probe/s50-call.sh
"""
import collections
import statistics
import sys

builds = sys.argv[2:]
times = collections.defaultdict(list)  # ((M, H, normed), build) -> [(us, us PDL)]
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) < 10 or p[1] != "rms":
        continue
    times[((p[2], p[3], "normed" if p[5] == "1" else ""), p[0])].append((float(p[-2]), float(p[-1])))
cases = sorted({case for case, _ in times}, key=lambda c: (c[1], int(c[0][2:]), c[2]))


def median(case, build, i):
    return statistics.median(t[i] for t in times[(case, build)])


print(f"{'case':26s} " + " ".join(f"{b:>17s}" for b in builds) + "   (µs no PDL / PDL, medians of the rounds)")
for case in cases:
    print(f"{' '.join(case):26s} " + " ".join(f"{median(case, b, 0):8.3f} {median(case, b, 1):8.3f}" for b in builds))
