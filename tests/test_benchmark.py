"""The main job's CPU path (`make bench` / `python -m sgl_quant bench` without a GPU): both benchmark scripts
time the C++ CPU implementation and write their tables. Needs the source tree (benchmark/)."""
import json
import re
from pathlib import Path

import pytest
import torch

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmark"
if not (BENCHMARK / "bench_per_token_group_quant.py").is_file():
    pytest.skip("no benchmark/ beside tests/ (a copy of the tests run against an installed wheel)",
                allow_module_level=True)


@pytest.fixture(autouse=True)
def _benchmark_modules_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARK))


def test_benchmarks_run_on_cpu(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the CPU path, also on a GPU machine
    import bench_host_overhead
    import bench_per_token_group_quant
    import bench_rmsnorm_quant

    assert bench_per_token_group_quant.main(["--quick", "--out", str(tmp_path)]) == 0
    assert bench_rmsnorm_quant.main(["--quick", "--hidden", "256,128", "--out", str(tmp_path)]) == 0
    for name in ("bench", "rmsnorm"):
        table = (tmp_path / f"{name}.txt").read_text()
        assert table.splitlines()[0].split()[1] == "CPU", table
        # the CPU table's own columns: the rate per element, none of the GPU columns (PDL, roofline, anchors)
        assert "ns/elem" in table.splitlines()[1] and "PDL" not in table and "roof" not in table, table
    fused = json.loads((tmp_path / "rmsnorm.json").read_text())["rows"]
    assert [(r["h"], r["m"]) for r in fused] == [(h, m) for h in (256, 128) for m in (1, 64, 1024)]
    assert all(r["us"] > 0 and r["pair_us"] > 0 and r["ns_per_element"] > 0 for r in fused)
    v2 = json.loads((tmp_path / "bench.json").read_text())["rows"]
    assert v2 and all(r["us"] > 0 and r["ns_per_element"] > 0 and r["gbs"] > 0 for r in v2)
    assert bench_host_overhead.main(["--calls", "20", "--reps", "3", "--out", str(tmp_path)]) == 0
    host = json.loads((tmp_path / "host_overhead.json").read_text())
    assert host["h"] == 128 and host["device"].startswith("CPU"), host
    assert {r["kind"] for r in host["rows"]} == {"wrapper", "op", "torch"}
    assert all(0 < r["min_us_per_call"] <= r["us_per_call"] for r in host["rows"]), host["rows"]


def test_verdicts_only_on_the_anchors_gpu():
    """The SPEC's anchors and targets are an H200's: on another GPU the rows keep them as columns, but draw no
    ratio or verdict against them (an H100 "missed" every bandwidth-bound target in session 46)."""
    import bench_per_token_group_quant as v2
    import bench_rmsnorm_quant as fused

    assert v2.anchors_apply("NVIDIA H200") and not v2.anchors_apply("NVIDIA H100 80GB HBM3")
    row = dict(name="dense-M1-H4096-col_f32", us=1.2, us_pdl=1.0, spec_target_us=1.15, spec_reference_us=1.28,
               nopdl_reference_us=1.29, unfused_us=2.4)
    on_h200, elsewhere = v2.format_row(row), v2.format_row(row, anchored=False)
    assert "target MET" in on_h200 and "ref*/ours=1.07x" in on_h200 and "noPDL ours/ref=0.930" in on_h200, on_h200
    assert "unfused/ours=2.00x" in elsewhere and "1.15" in elsewhere and "1.28" in elsewhere, elsewhere
    assert not any(word in elsewhere for word in ("MET", "missed", "ref*/", "noPDL")), elsewhere

    plain = dict(name="rmsnorm-M64-H7168-bf16", m=64, h=7168, us=2.69, us_pdl=2.16, target_us=2.3, target_pdl_us=1.8,
                 pair_us=2.8)
    normed = dict(name="rmsnorm-M64-H7168-bf16-normed", m=64, h=7168, normed=True, us=2.91, us_pdl=2.42,
                  flashinfer_us=2.82, flashinfer_pdl_us=2.30)
    assert "target missed" in fused.format_row(plain) and "vs FlashInfer SLOWER" in fused.format_row(normed)
    assert "pair/ours=1.04x" in fused.format_row(plain, anchored=False)
    for r in (plain, normed):
        elsewhere = fused.format_row(r, anchored=False)
        assert not any(word in elsewhere for word in ("target", "FlashInfer", "MET", "missed")), elsewhere


def test_readme_tables_from_archived_runs():
    """benchmark/readme_tables.py renders the archived JSON of each benchmark as the README's Markdown tables: one
    row per case (the chain's two rows as one), the run's own numbers, the benchmarks' verdict rules, and no
    verdict on a GPU other than the anchors'."""
    import readme_tables

    results = BENCHMARK / "results"
    for name, anchored in (("h200-2026-12-05-s46.json", True), ("h200-2026-12-05-s46-rmsnorm.json", True),
                           ("h100-2026-12-05-s46-rmsnorm.json", False)):
        path = results / name
        rows = json.loads(path.read_text())["rows"]
        lines = readme_tables.render(path)
        table = [line for line in lines if line.startswith("| ") and not line.startswith("| ---")][1:]
        chain = sum(r["name"].startswith("chain10-") for r in rows)
        assert len(table) == len(rows) - max(chain - 1, 0), lines
        text = "\n".join(lines)
        for r in rows:  # every measured time appears as the run wrote it
            assert f"{r['us']:.2f}" in text and (r.get("us_pdl") is None or f"{r['us_pdl']:.2f}" in text), r
        verdicts = [line for line in table if " met" in line or "missed" in line or "FlashInfer:" in line]
        assert bool(verdicts) == anchored, table
        assert (readme_tables.v2_bench.OTHER_GPU_NOTE in lines) != anchored
    fused = readme_tables.render(results / "h200-2026-12-05-s46-rmsnorm.json")
    # session 46's H200 run: M=1 met, M=64 missed, output_normed M=64 slower (2.302 against FlashInfer's 2.30)
    assert any(line.startswith("| 1 | 7168 |  | 1.94 | 1.40 |") and line.endswith("met |") for line in fused), fused
    assert any(line.startswith("| 64 | 7168 |  | 2.69 |") and "**missed**" in line for line in fused), fused
    assert any(line.startswith("| 64 | 7168 | yes |") and "**slower**" in line for line in fused), fused


def test_readme_tables_are_the_runs_they_name(monkeypatch):
    """Every table the README renders from a run (the line naming its JSON) is that run's rendering, line for line:
    the README's numbers cannot drift from the files they cite."""
    import readme_tables

    readme = (BENCHMARK.parent / "README.md").read_text()
    cited = re.findall(r"\(`(benchmark/results/[\w.-]+\.json)`\); µs per call", readme)
    assert len(cited) >= 2, "the README's v2/DSV4 and fused-op tables name their runs"
    monkeypatch.chdir(BENCHMARK.parent)  # the tables name their run's path as given: relative to the repository
    for path in cited:
        missing = [line for line in readme_tables.render(path) if line and line not in readme]
        assert not missing, (path, missing)
