"""Audit a built sgl_quant wheel (the equivalent of `auditwheel show`, plus our own rules).

    python scripts/ci/check_wheel.py dist/sgl_quant-*.whl

Checks: the package files are there (extension, Python modules, selftest data, the Apache-2.0 LICENSE
text in the .dist-info that the metadata's License-File names); the wheel is one
for every torch and CPython: metadata `torch>=X` (no pin), an abi3 tag, and the extension uses no
libtorch C++ symbol — only libtorch's stable C shim (`nm -D --undefined-only | c++filt`: nothing in
at::, c10::, torch::); every shared library the extension needs (ELF DT_NEEDED) is one the C/C++
runtime, torch, or torch's CUDA runtime dependency provides — nothing else may be assumed on the
user's machine, and not libtorch_python (Python-version specific). Prints the wheel size. A torch
extension cannot be a manylinux wheel (it links libtorch, which only the torch wheel provides), so
the platform tag stays linux_x86_64; if `auditwheel` is installed its report is printed as well.
"""
import fnmatch
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

from ci_report import finish

REQUIRED = ["sgl_quant/__init__.py", "sgl_quant/quant.py", "sgl_quant/compat.py", "sgl_quant/_fake.py",
            "sgl_quant/__main__.py", "sgl_quant/testing.py", "sgl_quant/selftest_golden.json",
            "sgl_quant/py.typed", "sgl_quant/_C.pyi"]
ALLOWED_NEEDED = [
    "libc.so.*", "libm.so.*", "libpthread.so.*", "libdl.so.*", "librt.so.*", "ld-linux-x86-64.so.*",
    "libgcc_s.so.*", "libstdc++.so.*",                                   # C/C++ runtime
    "libc10.so", "libc10_cuda.so", "libtorch.so", "libtorch_cpu.so", "libtorch_cuda.so",
    "libcudart.so.*",                                                    # torch's nvidia-cuda-runtime wheel
]


def elf_needed(data: bytes) -> list:
    """DT_NEEDED entries of a little-endian ELF64 shared object."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian ELF64 file")
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    needed = []
    for _name, sh_type, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if sh_type != 6:  # SHT_DYNAMIC
            continue
        str_off = sections[link][4]
        for pos in range(offset, offset + size, entsize or 16):
            tag, val = struct.unpack_from("<qQ", data, pos)
            if tag == 0:
                break
            if tag == 1:  # DT_NEEDED
                end = data.index(b"\0", str_off + val)
                needed.append(data[str_off + val:end].decode())
    return needed


def libtorch_cxx_symbols(data: bytes) -> list:
    """Undefined dynamic symbols of the extension that are libtorch C++ API (demangled)."""
    with tempfile.NamedTemporaryFile(suffix=".so") as f:
        f.write(data)
        f.flush()
        names = subprocess.run(["nm", "-D", "--undefined-only", f.name], capture_output=True, text=True,
                               check=True).stdout
    demangled = subprocess.run(["c++filt"], input=names, capture_output=True, text=True, check=True).stdout
    return [line.split(maxsplit=1)[1] for line in demangled.splitlines()
            if re.search(r"\b(at|c10|torch|caffe2)::", line)]


def main(path):
    errors = []
    with zipfile.ZipFile(path) as whl:
        names = whl.namelist()
        for f in REQUIRED:
            if f not in names:
                errors.append(f"missing {f}")
        exts = [n for n in names if re.fullmatch(r"sgl_quant/_C\..*\.so", n)]
        if len(exts) != 1:
            errors.append(f"expected one sgl_quant/_C*.so, found {exts}")
        meta_name = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
        meta = whl.read(meta_name).decode() if meta_name else ""
        # setuptools >= 77 puts license files under .dist-info/licenses/, older ones in .dist-info/
        licenses = [n for n in names if re.fullmatch(r"[^/]+\.dist-info/(licenses/)?LICENSE", n)]
        if not licenses or "Apache License" not in whl.read(licenses[0]).decode():
            errors.append(f"the wheel must carry the Apache-2.0 LICENSE text in its .dist-info, found {licenses}")
        if not re.search(r"^License-File: LICENSE$", meta, re.M):
            errors.append("METADATA must name the LICENSE (License-File: LICENSE)")
        pins = re.findall(r"^Requires-Dist: torch\b\s*(.*)$", meta, re.M)
        if len(pins) != 1 or not re.fullmatch(r">=\s*[\d.]+", pins[0].strip()):
            errors.append(f"METADATA must require torch>=X (stable ABI: no pin), found {pins}")
        for ext in exts:
            needed = elf_needed(whl.read(ext))
            unexpected = [n for n in needed if not any(fnmatch.fnmatch(n, p) for p in ALLOWED_NEEDED)]
            print(f"{ext}: needs {', '.join(needed)}")
            if unexpected:
                errors.append(f"{ext} needs libraries a user may not have: {unexpected}")
            cxx = libtorch_cxx_symbols(whl.read(ext))
            print(f"{ext}: {len(cxx)} libtorch C++ symbols used")
            if cxx:
                errors.append(f"{ext} uses libtorch C++ symbols (not the stable ABI): {cxx[:10]}")
        wheel_file = next((n for n in names if n.endswith(".dist-info/WHEEL")), None)
        tags = re.findall(r"^Tag: (.+)$", whl.read(wheel_file).decode(), re.M) if wheel_file else []
        if not tags or not all(re.fullmatch(r"cp3\d+-abi3-linux_x86_64", t) for t in tags):
            errors.append(f"the wheel must be tagged cp3X-abi3-linux_x86_64 (one wheel for every CPython), got {tags}")
    size = os.path.getsize(path)
    print(f"wheel: {path}\n  size: {size / 2**20:.1f} MiB; tags: {', '.join(tags)}; torch: {pins}; files: {len(names)}")
    if shutil.which("auditwheel"):
        report = subprocess.run(["auditwheel", "show", path], capture_output=True, text=True)
        print("auditwheel show (for information):\n  " + (report.stdout + report.stderr).strip().replace("\n", "\n  "))
    return finish("wheel check", errors)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
