"""The CI's helper scripts/ci/torch_pins.py: the exact versions a torch wheel pins for some of its
dependencies (the lean wheel check's `pin:` extras), read from fake wheels that carry torch's metadata
lines. Needs the source tree: skipped in a copy of the tests run against an installed wheel."""
import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "ci" / "torch_pins.py"
if not SCRIPT.is_file():
    pytest.skip("no scripts/ci beside tests/ (a copy of the tests run against an installed wheel)",
                allow_module_level=True)

spec = importlib.util.spec_from_file_location("torch_pins", SCRIPT)
torch_pins = importlib.util.module_from_spec(spec)
spec.loader.exec_module(torch_pins)

# torch 2.15.0's own lines (PyPI, CUDA 13.2 build), and an invented set of the form a +cu128 build's take
# (versions made up: PyTorch's index is not reachable from the build machine), with a name to canonicalize
CU13 = ['cuda-toolkit[cublas,cudart,cufft,cufile,cupti,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.2.2; platform_system == "Linux"',
        'cuda-bindings<14,>=13.0.3; platform_system == "Linux" and python_version < "3.15"',
        'nvidia-cudnn-cu13==9.26.0.51; platform_system == "Linux"',
        'nvidia-nvshmem-cu13==3.7.2; platform_system == "Linux"',
        'filelock', 'sympy>=1.13.3', 'optree>=0.13.0; extra == "optree"']
CU128 = ['nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux"',
         'Nvidia_NVSHMEM.cu12==3.4.5; platform_system == "Linux" and python_version >= "3.11"',
         'nvidia-nvshmem-cu12==3.3.20; platform_system == "Linux" and python_version < "3.11"',
         'filelock']


def fake_wheel(tmp_path: Path, requires: list, name="torch-2.15.0-cp313-cp313-manylinux_2_28_x86_64.whl") -> str:
    path = tmp_path / name
    meta = "Metadata-Version: 2.4\nName: torch\nVersion: 2.15.0\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("torch/__init__.py", "")
        z.writestr("torch-2.15.0.dist-info/METADATA", meta + "\nlong description\nRequires-Dist: not a header\n")
    return str(path)


def test_pins_of_a_cuda13_torch(tmp_path):
    whl = fake_wheel(tmp_path, CU13)
    assert torch_pins.pins(whl, ["nvidia-nvshmem-"], "3.13") == ["nvidia-nvshmem-cu13==3.7.2"]
    assert torch_pins.pins(whl, ["nvidia-nvshmem-", "nvidia-cudnn"], "3.10") == [
        "nvidia-cudnn-cu13==9.26.0.51", "nvidia-nvshmem-cu13==3.7.2"]
    assert torch_pins.pins(whl, ["cuda-toolkit"], "3.13") == ["cuda-toolkit==13.2.2"]  # extras dropped
    assert torch_pins.pins(whl, ["optree"], "3.13") == []  # only with torch's extra "optree"
    assert torch_pins.pins(whl, ["cuda-bindings"], "3.15") == []  # its marker excludes CPython 3.15
    with pytest.raises(SystemExit, match="not pinned to one version"):
        torch_pins.pins(whl, ["cuda-bindings"], "3.13")


def test_pins_of_a_cuda12_torch_by_marker_and_canonical_name(tmp_path):
    whl = fake_wheel(tmp_path, CU128, "torch-2.15.0+cu128-cp313-cp313-manylinux_2_28_x86_64.whl")
    assert torch_pins.pins(whl, ["nvidia-nvshmem-"], "3.13") == ["nvidia-nvshmem-cu12==3.4.5"]
    assert torch_pins.pins(whl, ["NVIDIA_nvshmem_"], "3.10") == ["nvidia-nvshmem-cu12==3.3.20"]


def test_command_line(tmp_path):
    whl = fake_wheel(tmp_path, CU13)
    def run(*args):
        return subprocess.run([sys.executable, str(SCRIPT), whl, *args], capture_output=True, text=True)

    ok = run("nvidia-nvshmem-", "--python", "3.13")
    assert ok.returncode == 0 and ok.stdout == "nvidia-nvshmem-cu13==3.7.2\n", ok
    none = run("nvidia-nccl")
    assert none.returncode == 1 and "requires nothing named nvidia-nccl" in none.stderr, none
    not_a_wheel = tmp_path / "empty.whl"
    with zipfile.ZipFile(not_a_wheel, "w") as z:
        z.writestr("x.txt", "")
    bad = subprocess.run([sys.executable, str(SCRIPT), str(not_a_wheel), "nvidia"], capture_output=True, text=True)
    assert bad.returncode == 1 and "expected one .dist-info/METADATA, found 0" in bad.stderr, bad
