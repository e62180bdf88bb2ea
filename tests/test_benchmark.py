"""The main job's CPU path (`make bench` / `python -m sgl_quant bench` without a GPU): every benchmark script
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
    import bench_scaled_quant

    assert bench_per_token_group_quant.main(["--quick", "--out", str(tmp_path)]) == 0
    assert bench_scaled_quant.main(["--quick", "--out", str(tmp_path)]) == 0
    assert bench_rmsnorm_quant.main(["--quick", "--hidden", "256,128", "--out", str(tmp_path)]) == 0
    for name in ("bench", "rmsnorm", "scaled"):
        table = (tmp_path / f"{name}.txt").read_text()
        assert table.splitlines()[0].split()[1] == "CPU", table
        # the CPU table's own columns: the rate per element, none of the GPU columns (PDL, roofline, anchors)
        assert "ns/elem" in table.splitlines()[1] and "PDL" not in table and "roof" not in table, table
    fused = json.loads((tmp_path / "rmsnorm.json").read_text())["rows"]
    assert [(r["h"], r["m"]) for r in fused] == [(h, m) for h in (256, 128) for m in (1, 64, 1024)]
    assert all(r["us"] > 0 and r["pair_us"] > 0 and r["ns_per_element"] > 0 for r in fused)
    scaled = json.loads((tmp_path / "scaled.json").read_text())["rows"]
    assert {r["granularity"] for r in scaled} == {"token", "tensor_static", "tensor_dynamic", "rmsnorm_token",
                                                 "rmsnorm_static"}
    assert all(r["us"] > 0 for r in scaled)
    v2 = json.loads((tmp_path / "bench.json").read_text())["rows"]
    assert v2 and all(r["us"] > 0 and r["ns_per_element"] > 0 and r["gbs"] > 0 for r in v2)
    assert bench_host_overhead.main(["--calls", "20", "--reps", "3", "--out", str(tmp_path)]) == 0
    host = json.loads((tmp_path / "host_overhead.json").read_text())
    assert host["h"] == 128 and host["device"].startswith("CPU"), host
    assert {r["kind"] for r in host["rows"]} == {"wrapper", "op", "torch"}
    assert all(0 < r["min_us_per_call"] <= r["us_per_call"] for r in host["rows"]), host["rows"]


def test_spec_verdicts():
    """docs/spec.md §5 and §6.5 as the benchmarks judge their rows: against the fixed points of the run's GPU
    model in each launch mode they hold, and against the roofline."""
    import bench_per_token_group_quant as v2
    import bench_rmsnorm_quant as fused
    from reference_points import gpu_model

    assert gpu_model("NVIDIA H100 80GB HBM3") == "H100" and gpu_model("NVIDIA H200") == "H200"
    assert gpu_model("NVIDIA A100-SXM4-80GB") is None
    small = dict(name="dense-M1-H4096-col_f32", kind="dense", m=1, us=1.30, us_pdl=0.80, ref_us=1.34, ref_pdl_us=0.85,
                 roofline_pct=1.0, roofline_pct_pdl=1.0)
    assert v2.spec_target(small) == ("<= reference", True)
    assert v2.spec_target({**small, "us_pdl": 0.86}) == ("<= reference", False)
    assert v2.spec_target({**small, "ref_us": None, "ref_pdl_us": None}) is None  # another GPU model: no verdict
    assert "ours/ref=0.97" in v2.format_row(small) and "target <= reference: MET" in v2.format_row(small)
    big = dict(name="dense-M16384-H7168-col_f32", kind="dense", m=16384, us=120.0, us_pdl=119.0, roofline_pct=96.5,
               roofline_pct_pdl=97.2)
    assert v2.spec_target(big) == (">= 97% roofline", True)
    masked = dict(name="masked-silu-E8x512-H2048-col_ue8m0", kind="masked", m=4096, us=4.5, us_pdl=3.8,
                  roofline_pct=79.0, roofline_pct_pdl=90.0)
    assert v2.spec_target(masked) == (">= 80% roofline", False)  # both launch modes
    dsv4 = dict(name="dsv4-T1-G8-D4096", kind="dsv4", m=8, us=1.40, us_pdl=0.8, plain_v2_us=1.35)
    assert v2.spec_target(dsv4) == ("<= 1.05x plain v2", True)
    chain = dict(name="chain10-pdl-M1-H4096", kind="chain", m=1, us=8.0, ref_us=None, ref_pdl_us=11.23)
    assert v2.spec_target(chain) == ("<= reference", True)

    normed = dict(m=64, h=7168, normed=True, us=2.91, us_pdl=2.30, flashinfer_us=2.97, flashinfer_pdl_us=2.41)
    assert fused.spec_targets(normed) == [("<= FlashInfer", True)]
    assert fused.spec_targets({**normed, "us_pdl": 2.42}) == [("<= FlashInfer", False)]
    plain = dict(m=4096, h=7168, normed=False, us=72.0, us_pdl=71.0, flashinfer_us=93.41, flashinfer_pdl_us=92.74,
                 roofline_pct_pdl=98.0)
    assert fused.spec_targets(plain) == [("<= 0.85x FlashInfer", True), (">= 92% roofline", True)]
    assert fused.spec_targets({**plain, "m": 64, "flashinfer_us": None, "flashinfer_pdl_us": None}) == []


def test_readme_tables_render_a_run(tmp_path):
    """benchmark/readme_tables.py renders each benchmark's JSON as a Markdown table: one row per case (the
    chain's two rows as one; per-token / per-tensor: per shape), the run's own numbers and the benchmarks'
    verdicts."""
    import bench_scaled_quant as scaled_bench
    import readme_tables

    head = dict(date="2026-12-07", device="NVIDIA H100 80GB HBM3", copy_tbs=3.02, empty_kernel_us=None,
                build_info=dict(torch="2.11.0"))
    v2_rows = [dict(name="dense-M1-H4096-col_f32", kind="dense", m=1, h=4096, us=1.31, us_pdl=0.77, ref_us=1.34,
                    ref_pdl_us=0.85, roofline_pct=1.0, roofline_pct_pdl=2.0),
               dict(name="chain10-nopdl-M1-H4096", kind="chain", m=1, h=4096, us=13.05, ref_us=13.53, ref_pdl_us=None),
               dict(name="chain10-pdl-M1-H4096", kind="chain", m=1, h=4096, us=7.79, ref_us=None, ref_pdl_us=11.23)]
    rms_rows = [dict(name="rmsnorm-M64-H7168-bf16-normed", m=64, h=7168, normed=True, us=2.87, us_pdl=2.27,
                     roofline_us=0.5, roofline_pct=20.0, roofline_pct_pdl=22.0, flashinfer_us=2.97,
                     flashinfer_pdl_us=2.41, vllm_us=None)]
    for name, rows in (("bench.json", v2_rows), ("rmsnorm.json", rms_rows)):
        (tmp_path / name).write_text(json.dumps(dict(head, rows=rows)))
    v2_lines = readme_tables.render(tmp_path / "bench.json")
    table = [line for line in v2_lines if line.startswith("| ") and not line.startswith("| ---")][1:]
    assert len(table) == 2, v2_lines
    assert table[0] == "| M=1, H=4096 | 1.31 | 1.34 | 0.77 | 0.85 | 2 | ≤ reference: met |", table
    assert table[1].startswith("| 10 chained launches") and "13.05 | 13.53 | 7.79 | 11.23" in table[1], table
    fused_lines = readme_tables.render(tmp_path / "rmsnorm.json")
    assert "| 64 | 7168 | yes | 2.87 | 2.27 | 0.50 | 22.0 | 2.97 (2.41) |  | ≤ FlashInfer: met |" in fused_lines
    row = dict(m=4096, h=4096, code="fp8", us=17.0, us_pdl=16.5, roofline_pct_pdl=96.0, v2_us=17.2, v2_pdl_us=16.7)
    scaled_rows = [dict(row, granularity="token"), dict(row, granularity="tensor_static", roofline_pct_pdl=94.0),
                   dict(row, granularity="tensor_dynamic", us=30.0, us_pdl=29.0, roofline_pct_pdl=91.0),
                   dict(row, code="int8", granularity="token")]
    (tmp_path / "scaled.json").write_text(json.dumps(dict(head, rows=scaled_rows)))
    assert ("| 4096 | 4096 | 17.00 / 16.50 | 17.00 / 16.50 | 30.00 / 29.00 | 17.00 / 16.50 | 17.20 / 16.70 | "
            "96 / 94 / 91 / 96 | **missed**: static fp8 ≥ 95% roofline |") in readme_tables.render(tmp_path / "scaled.json")
    small = dict(row, m=1, us=1.2, us_pdl=0.7, v2_us=1.3, v2_pdl_us=0.8, granularity="tensor_dynamic")
    assert scaled_bench.spec_targets(small) == [("<= 1.5x v2", True)]
    assert scaled_bench.spec_targets(dict(small, granularity="token", us_pdl=0.9)) == [("<= v2", False)]


def test_readme_tables_are_the_runs_they_name(monkeypatch):
    """Every table the README renders from a run (the line naming its JSON) is that run's rendering, line for line:
    the README's numbers cannot drift from the files they cite."""
    import readme_tables

    readme = (BENCHMARK.parent / "README.md").read_text()
    cited = re.findall(r"\(`(benchmark/results/[\w./-]+\.json)`\); µs per call", readme)
    assert len(cited) >= 2, "the README's v2/DSV4 and fused-op tables name their runs"
    monkeypatch.chdir(BENCHMARK.parent)  # the tables name their run's path as given: relative to the repository
    for path in cited:
        missing = [line for line in readme_tables.render(path) if line and line not in readme]
        assert not missing, (path, missing)
