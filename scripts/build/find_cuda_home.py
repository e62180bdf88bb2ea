"""Print the real CUDA toolkit root (used by setup.py, the Makefile and CMake users).

`nvcc` on PATH may be a wrapper script (`exec /usr/local/cuda-13.0/bin/nvcc "$@"`), which makes
torch guess `<wrapper dir>/..` as CUDA_HOME; follow links and wrapper scripts instead.
"""
import os
import re
import shutil
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


if __name__ == "__main__":
    print(find_cuda_home() or "")
