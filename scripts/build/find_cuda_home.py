"""Print the real CUDA toolkit root (used by setup.py, the Makefile and CMake users).

`nvcc` on PATH may be a wrapper script (`exec /usr/local/cuda-13.0/bin/nvcc "$@"`), which makes
torch guess `<wrapper dir>/..` as CUDA_HOME; follow links and wrapper scripts instead.
`toolkit_version` reads that toolkit's CUDA version (setup.py compares it with torch's).
"""
import os
import re
import shutil
import subprocess
from pathlib import Path


def find_cuda_home():
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            return os.environ[var]
    nvcc = shutil.which("nvcc")
    candidates = []
    if nvcc:
        real = os.path.realpath(nvcc)
        candidates.append(Path(real).parent.parent)
        try:
            head = Path(real).read_bytes()[:4096]
            if head.startswith(b"#!"):
                for m in re.finditer(rb"(/[^\s\"']+)/bin/nvcc", head):
                    candidates.insert(0, Path(m.group(1).decode()))
        except OSError:
            pass
    candidates += [Path("/usr/local/cuda")] + sorted(Path("/usr/local").glob("cuda-*"), reverse=True)
    for c in candidates:
        if (c / "bin" / "nvcc").is_file() and (c / "include" / "cuda_runtime.h").is_file():
            return str(c)
    return None


def toolkit_version(cuda_home):
    """(major, minor) of the toolkit's nvcc ("release 13.0" in `nvcc --version`), or None when it cannot be
    run or read."""
    try:
        out = subprocess.run([str(Path(cuda_home) / "bin" / "nvcc"), "--version"], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    m = re.search(r"release (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


if __name__ == "__main__":
    print(find_cuda_home() or "")
