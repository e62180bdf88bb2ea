"""Audit a built sgl_quant wheel (the equivalent of `auditwheel show`, plus our own rules).

    python scripts/check_wheel.py dist/sgl_quant-*.whl

Checks: the package files are there (extension, Python modules, selftest data); the metadata pins
the torch it was built against; every shared library the extension needs (ELF DT_NEEDED) is one the
C/C++ runtime, torch, or torch's CUDA runtime dependency provides — nothing else may be assumed on
the user's machine. Prints the wheel size. A torch extension cannot be a manylinux wheel (it links
libtorch, which only the torch wheel provides), so the tag stays linux_x86_64; if `auditwheel` is
installed its report is printed as well, for information.
"""
import fnmatch
import os
import re
import shutil
import struct
import subprocess
import sys
import zipfile

from ci_report import finish

REQUIRED = ["sgl_quant/__init__.py", "sgl_quant/quant.py", "sgl_quant/compat.py", "sgl_quant/_fake.py",
            "sgl_quant/__main__.py", "sgl_quant/testing.py", "sgl_quant/selftest_golden.json"]
ALLOWED_NEEDED = [
    "libc.so.*", "libm.so.*", "libpthread.so.*", "libdl.so.*", "librt.so.*", "ld-linux-x86-64.so.*",
    "libgcc_s.so.*", "libstdc++.so.*",                                   # C/C++ runtime
    "libc10.so", "libc10_cuda.so", "libtorch.so", "libtorch_cpu.so", "libtorch_cuda.so", "libtorch_python.so",
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
        pins = re.findall(r"^Requires-Dist: torch\s*==\s*([\w.]+)", meta, re.M)
        if len(pins) != 1:
            errors.append(f"METADATA must pin torch==<build version>, found {pins}")
        for ext in exts:
            needed = elf_needed(whl.read(ext))
            unexpected = [n for n in needed if not any(fnmatch.fnmatch(n, p) for p in ALLOWED_NEEDED)]
            print(f"{ext}: needs {', '.join(needed)}")
            if unexpected:
                errors.append(f"{ext} needs libraries a user may not have: {unexpected}")
        wheel_file = next((n for n in names if n.endswith(".dist-info/WHEEL")), None)
        tags = re.findall(r"^Tag: (.+)$", whl.read(wheel_file).decode(), re.M) if wheel_file else []
    size = os.path.getsize(path)
    print(f"wheel: {path}\n  size: {size / 2**20:.1f} MiB; tags: {', '.join(tags)}; torch pin: {pins}; files: {len(names)}")
    if shutil.which("auditwheel"):
        report = subprocess.run(["auditwheel", "show", path], capture_output=True, text=True)
        print("auditwheel show (for information):\n  " + (report.stdout + report.stderr).strip().replace("\n", "\n  "))
    return finish("wheel check", errors)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
