"""The CPU implementation's fp8 encoder (csrc/quant_params.h `fp8_e4m3_bits`, a branch-free conversion that
vectorizes) against torch's Float8_e4m3fn conversion: every finite float with |c| <= 448, the only values
the clamp of docs/spec.md §1 lets through (a C++ program compiled against torch's headers; needs the source tree
and a C++ compiler); and, through the op on the CPU and the GPU, every bf16 and fp16 value in that range."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import sgl_quant
from helpers import DEVICES
from reference import FP8

ROOT = Path(__file__).resolve().parents[1]
HEADER = ROOT / "csrc" / "quant_params.h"

# Every float with |c| <= 448 (2 * (0x43E00000 + 1) values, both signs), through both conversions.
CHECK_PROGRAM = r"""
#include <torch/headeronly/util/Float8_e4m3fn.h>
#include <cstdio>
#include "quant_params.h"
int main() {
  const uint32_t last = sgl_quant::float_bits(448.0f);
  uint64_t checked = 0, differ = 0;
  for (uint32_t sign = 0; sign < 2; ++sign) {
    for (uint32_t mag = 0; mag <= last; ++mag) {
      const float c = sgl_quant::bits_to_float(mag | (sign << 31));
      const uint8_t want = torch::headeronly::Float8_e4m3fn(c).x, got = sgl_quant::fp8_e4m3_bits(c);
      if (want != got && differ++ < 5) std::printf("c=%a: torch 0x%02x, fp8_e4m3_bits 0x%02x\n", c, want, got);
      ++checked;
    }
  }
  std::printf("checked %llu differ %llu\n", (unsigned long long)checked, (unsigned long long)differ);
  return differ != 0;
}
"""


def compiler():
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return name
    return None


@pytest.mark.skipif(not HEADER.is_file(), reason="no csrc/ beside tests/ (a copy of the tests run against a wheel)")
@pytest.mark.skipif(compiler() is None, reason="no C++ compiler")
def test_fp8_bits_of_every_float_in_range(tmp_path):
    source = tmp_path / "check.cpp"
    source.write_text(CHECK_PROGRAM)
    torch_include = Path(torch.__file__).parent / "include"
    exe = tmp_path / "check"
    # The flags of the extension's CPU sources that matter for the arithmetic (setup.py).
    subprocess.run([compiler(), "-std=c++17", "-O2", "-ffp-contract=off", "-fno-trapping-math",
                    f"-I{torch_include}", f"-I{HEADER.parent}", str(source), "-o", str(exe)], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
    assert f"checked {2 * (0x43E00000 + 1)} differ 0" in run.stdout, run.stdout


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_fp8_codes_of_every_value(dtype, device):
    """Every finite bf16/fp16 value v with |v| <= 448 (subnormals, ties of the fp8 rounding, +-0), each in
    a group led by 448: the UE8M0 scale is then 1, so the code must be torch's fp8 conversion of v."""
    bits = torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16).view(dtype)
    values = bits[bits.isfinite() & (bits.float().abs() <= 448)]
    group = 16
    n = values.numel()
    per_group = group - 1
    pad = (-n) % per_group
    body = torch.cat([values, torch.zeros(pad, dtype=dtype)]).reshape(-1, per_group)
    x = torch.cat([torch.full((body.shape[0], 1), 448.0, dtype=dtype), body], dim=1).reshape(1, -1)
    x_q, x_s = sgl_quant.per_token_group_quant_fp8(x.to(device), group, scale_ue8m0=True)
    assert bool((x_s.cpu() == 1).all())
    want = x.float().to(FP8)
    assert torch.equal(x_q.cpu().view(torch.uint8), want.view(torch.uint8))
