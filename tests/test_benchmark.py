"""The main job's CPU path (`make bench` / `python -m sgl_quant bench` without a GPU): both benchmark scripts
time the C++ CPU implementation and write their tables. Needs the source tree (benchmark/)."""
import json
from pathlib import Path

import pytest
import torch

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmark"
if not (BENCHMARK / "bench_per_token_group_quant.py").is_file():
    pytest.skip("no benchmark/ beside tests/ (a copy of the tests run against an installed wheel)",
                allow_module_level=True)


def test_benchmarks_run_on_cpu(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the CPU path, also on a GPU machine
    monkeypatch.syspath_prepend(str(BENCHMARK))
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
    assert bench_host_overhead.main(["--calls", "20", "--reps", "1", "--out", str(tmp_path)]) == 0
    host = json.loads((tmp_path / "host_overhead.json").read_text())
    assert host["h"] == 128 and host["device"].startswith("CPU"), host
    assert {r["kind"] for r in host["rows"]} == {"wrapper", "op", "torch"} and all(r["us_per_call"] > 0 for r in host["rows"])
