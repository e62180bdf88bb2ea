"""Regenerates benchmark/results/<gpu model>/ on a GPU: every benchmark (the quick case set, with their
baselines) write their tables, JSON and plots there, replacing the previous run of that GPU model.

    python benchmark/results.py          # (make results: the same after building the extension)
"""
import sys
from pathlib import Path

import torch

import bench_per_token_group_quant
import bench_rmsnorm_quant
import bench_scaled_quant
from reference_points import gpu_model


def main():
    if not torch.cuda.is_available():
        sys.exit("benchmark/results.py: no CUDA device (benchmark/results/ holds GPU runs only)")
    name = torch.cuda.get_device_name()
    out = Path(__file__).resolve().parent / "results" / (gpu_model(name) or name.replace(" ", "_")).lower()
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.iterdir():
        stale.unlink()
    bench_per_token_group_quant.main(["--quick", "--out", str(out)])
    bench_rmsnorm_quant.main(["--quick", "--out", str(out)])
    bench_scaled_quant.main(["--quick", "--out", str(out)])
    print(f"results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
