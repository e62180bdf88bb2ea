"""Build the source distribution and check that a build and the test suite work from it alone.

    python scripts/ci/check_sdist.py [--out DIR]

`pip install sgl_quant` falls back to the sdist wherever no wheel fits (another CUDA version, another
platform), and packagers build and test from it. Checks: it holds every tracked file that the build and
the tests need (MANIFEST.in: csrc/, sgl_quant/, tests/ with the golden data, the build scripts) and no
build output; unpacked elsewhere, the CPU implementation builds from it (SGL_QUANT_CPU_ONLY=1: the
CUDA objects are the same sources, compiled by `make test`) and the tests pass there, against that build
(the files named in SGL_QUANT_CI_TESTS, space-separated paths such as tests/test_golden.py, or the whole
suite). Uses the running Python's torch, setuptools and ninja (the build venv's). --out DIR keeps
the sdist there (`make sdist-check` then builds it again at the oldest torch and CPython supported).
"""
import argparse
import fnmatch
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from ci_report import finish

ROOT = Path(__file__).resolve().parents[2]
NEEDED = ["csrc/*", "sgl_quant/*", "tests/*", "setup.py", "pyproject.toml", "MANIFEST.in", "LICENSE", "README.md",
          "CMakeLists.txt", "Makefile", "scripts/build/*"]
BUILD_OUTPUT = ["*/__pycache__/*", "*.pyc", "*.so", "/build/*", "/dist/*"]  # matched against "/" + path


def tracked_files():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return [p for p in out.splitlines() if any(fnmatch.fnmatch(p, pat) for pat in NEEDED)]


def run(cmd, cwd, env=None):
    """cmd's exit status and the last line it printed (its whole output tail when it fails)."""
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if r.returncode:
        print(r.stdout[-4000:], r.stderr[-4000:], sep="\n")
    return r.returncode, (r.stdout.strip().splitlines() or [""])[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="keep a copy of the sdist in this directory")
    args = parser.parse_args()
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # egg_base: the egg-info that sdist writes goes to tmp, not into the checkout
        if run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp), "sdist", "-d", str(tmp)], ROOT)[0]:
            return finish("sdist check", ["python setup.py sdist failed"])
        (sdist,) = tmp.glob("sgl_quant-*.tar.gz")
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            for old in args.out.glob("sgl_quant-*.tar.gz"):
                old.unlink()
            shutil.copy2(sdist, args.out)
        with tarfile.open(sdist) as tar:
            top = tar.getnames()[0].split("/")[0]
            members = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
            # the "data" filter (refuse links and paths out of tmp) exists from Python 3.10.12 / 3.11.4
            tar.extractall(tmp, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        errors += [f"{p} is tracked but not in the sdist (MANIFEST.in)" for p in tracked_files() if p not in members]
        errors += [f"{p} is build output" for p in sorted(members)
                   if any(fnmatch.fnmatch("/" + p, pat) for pat in BUILD_OUTPUT)]
        src = tmp / top
        env = dict(os.environ, SGL_QUANT_CPU_ONLY="1", PYTHONPATH=str(src))
        tests = ""
        if run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], src, env)[0]:
            errors.append("the CPU implementation does not build from the unpacked sdist")
        else:
            where = run([sys.executable, "-c", "import sgl_quant; print(sgl_quant.__file__)"], src, env)[1]
            if not where.startswith(str(src)):
                errors.append(f"the tests would import sgl_quant from {where!r}, not from the sdist's build")
            else:
                selected = os.environ.get("SGL_QUANT_CI_TESTS", "tests").split()
                rc, tests = run([sys.executable, "-m", "pytest", *selected, "-q", "-x", "-p", "no:cacheprovider"], src, env)
                if rc:
                    errors.append("the test suite fails in the unpacked sdist")
        return finish("sdist check", errors, f": {sdist.name}, {len(members)} files; the CPU build from it: {tests}")


if __name__ == "__main__":
    sys.exit(main())
