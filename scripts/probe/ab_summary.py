"""The table of a probe A/B: medians over the rounds, one column per build. Reads the lines that
`scripts/probe/probe_run.sh` writes (each probe line prefixed with its build and round) and the archived
call scripts' (build only):

    <build> [r<round>] pass <n> <problem words...> <us>                          latency_probe
    <build> [r<round>] rms M=<m> H=<h> [r<k>] <columns...> <us> <us PDL>         rmsnorm_probe

`pass` lines print median ± half the spread; `rms` lines the medians without and with PDL (the probe's
own round `r<k>` counts as one more round). In `cases` lines the four columns (normed, cluster, chunks,
stages) are named when not 0, the dispatcher's choice.

    python3 scripts/probe/ab_summary.py LOG [BUILD...]     # builds in the log's order when none are named
"""
import collections
import re
import statistics
import sys

ROUND = re.compile(r"r\d+$")
CASES_COLUMNS = ("normed", "cluster", "chunks", "stages")


def parse(line):
    """(build, kind, problem, times) of a probe line, or None."""
    p = line.split()
    if len(p) > 1 and ROUND.match(p[1]):
        p = [p[0]] + p[2:]
    if len(p) >= 5 and p[1] == "pass":
        return p[0], "pass", " ".join(p[3:-1]), (float(p[-1]),)
    if len(p) >= 6 and p[1] == "rms" and p[2].startswith("M=") and p[3].startswith("H="):
        middle = p[4:-2]
        if middle and ROUND.match(middle[0]):
            middle = middle[1:]
        words = [p[2], p[3]]
        if len(middle) == len(CASES_COLUMNS) and all(w.isdigit() for w in middle):
            words += [name if name == "normed" else f"{name}={w}" for name, w in zip(CASES_COLUMNS, middle) if w != "0"]
        else:
            words += middle
        try:
            return p[0], "rms", " ".join(words), (float(p[-2]), float(p[-1]))
        except ValueError:  # a mode whose last two columns are not times (e.g. `table`'s roofline)
            return None
    return None


def main(argv):
    times = collections.defaultdict(list)  # (problem, build) -> [times]
    problems, seen_builds = {}, {}  # in the log's order (dicts as ordered sets); problem -> kind
    for line in open(argv[1]):
        parsed = parse(line)
        if parsed is None:
            continue
        build, kind, problem, t = parsed
        problems.setdefault(problem, kind)
        seen_builds.setdefault(build)
        times[(problem, build)].append(t)
    builds = argv[2:] or list(seen_builds)

    def cell(problem, build):
        runs = times.get((problem, build))
        if not runs:
            return f"{'-':>17s}"
        if problems[problem] == "pass":
            us = [t[0] for t in runs]
            return f"{statistics.median(us):10.3f} ±{(max(us) - min(us)) / 2:5.3f}"
        return f"{statistics.median(t[0] for t in runs):8.3f} {statistics.median(t[1] for t in runs):8.3f}"

    width = max([26] + [len(p) + 1 for p in problems])
    units = "µs, median ± half the spread; rms: µs no PDL / PDL, medians of the rounds"
    print(f"{'problem':{width}s} " + " ".join(f"{b[-17:]:>17s}" for b in builds) + f"   ({units})")
    for problem in problems:
        print(f"{problem:{width}s} " + " ".join(cell(problem, b) for b in builds))


if __name__ == "__main__":
    main(sys.argv)
