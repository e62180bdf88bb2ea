"""scripts/probe/ab_summary.py, the table of every probe A/B (scripts/probe/probe_run.sh): which lines it
reads and the medians it prints, from logs in the probes' two formats; and scripts/gpu/gpu_check.sh's
REQUIRE_GPU gate. Needs the source tree: skipped in a copy of the tests run against an installed wheel."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "probe" / "ab_summary.py"
if not SCRIPT.is_file():
    pytest.skip("no scripts/probe beside tests/ (a copy of the tests run against an installed wheel)",
                allow_module_level=True)


def run_summary(tmp_path, lines, *builds):
    """ab_summary.py's output lines for a log of these lines."""
    log = tmp_path / "ab.txt"
    log.write_text("\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, str(SCRIPT), str(log), *builds], check=True, capture_output=True, text=True)
    return out.stdout.splitlines()


def summary(tmp_path, lines, *builds):
    """The header and, per problem, the printed numbers of a log of two builds' `rms` lines."""
    header, *rows = run_summary(tmp_path, lines, *builds)
    return header, {" ".join(row.split()[:-4]): row.split()[-4:] for row in rows}


# rmsnorm_probe `cases` lines as probe_run.sh writes them: build, round, then the probe's line (with its own round)
RMS = [
    "base r0 problem                   normed  cluster  chunks  stages        us    us PDL",
    "base r0 rms M=64    H=7168  r0         0        0       0       0     2.500     2.100",
    "base r0 rms M=64    H=7168  r1         0        0       0       0     2.700     2.300",
    "base r0 rms M=256   H=7168  r0         1        4       0       0     4.000     3.000",
    "new r0 rms M=64    H=7168  r0         0        0       0       0     2.400     2.000",
    "new r0 rms M=256   H=7168  r0         1        4       0       0     3.900     2.900",
    "new r1 rms M=64    H=7168  r0         0        0       0       0     2.600     2.200",
    "new r1 rms M=64    H=7168  r1         0        0       0       0     9.000     9.000",
    "base r1 rms M=64    H=7168  r0         0        0       0       0     2.600     2.200",
    "base r1 rms M=256   H=7168  r0         1        4       0       0     4.200     3.200",
    "check: 280 launches, 0 differ from cluster 1",
]


def test_rms_lines_medians_per_build_in_the_logs_order(tmp_path):
    header, rows = summary(tmp_path, RMS)
    assert header.split()[1:3] == ["base", "new"]
    assert list(rows) == ["M=64 H=7168", "M=256 H=7168 normed cluster=4"]
    # base M=64: 2.5, 2.7, 2.6 -> 2.6; PDL 2.1, 2.3, 2.2 -> 2.2. new: 2.4, 2.6, 9.0 -> 2.6; 2.0, 2.2, 9.0 -> 2.2
    assert rows["M=64 H=7168"] == ["2.600", "2.200", "2.600", "2.200"]
    assert rows["M=256 H=7168 normed cluster=4"] == ["4.100", "3.100", "3.900", "2.900"]


def test_named_builds_set_the_columns(tmp_path):
    header, rows = summary(tmp_path, RMS, "new", "base")
    assert header.split()[1:3] == ["new", "base"]
    assert rows["M=64 H=7168"] == ["2.600", "2.200", "2.600", "2.200"]
    assert rows["M=256 H=7168 normed cluster=4"] == ["3.900", "2.900", "4.100", "3.100"]


def test_latency_probe_pass_lines_median_and_half_spread(tmp_path):
    lines = ["-I.ab/main r0 pass 0 M1 H4096                    1.200",
             "-I.ab/main r0 pass 1 M1 H4096                    1.300",
             "base r0 pass 0 M1 H4096                    1.000",
             "base r1 pass 0 M1 H4096                    1.100",
             "base r1 pass 1 M1 H4096                    1.500",
             "-I.ab/main r1 pass 0 M1 H4096                    1.250",
             "== medians: not a probe line"]
    header, row = run_summary(tmp_path, lines)
    assert header.split()[1:3] == ["-I.ab/main", "base"]
    # -I.ab/main: 1.2, 1.3, 1.25 -> 1.25 ± 0.05; base: 1.0, 1.1, 1.5 -> 1.1 ± 0.25
    assert row.split() == ["M1", "H4096", "1.250", "±0.050", "1.100", "±0.250"]


def test_gpu_check_runs_nothing_on_another_gpu(tmp_path):
    """REQUIRE_GPU names a GPU this machine has not (none here; an H100 or H200 on the device): the check
    exits 3 before its first step, and says why in its summary."""
    out = tmp_path / "gc"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OUT": str(out), "REQUIRE_GPU": "no-such-gpu", "STEPS": "build"}
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gpu" / "gpu_check.sh")], env=env, capture_output=True, text=True)
    assert run.returncode == 3, run
    assert "not no-such-gpu (REQUIRE_GPU): nothing run" in (out / "summary.txt").read_text()
    assert not (out / "build.log").exists()
