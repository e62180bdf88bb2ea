"""The requirements a torch wheel pins for some of its dependencies, read from the wheel's own metadata.

    python scripts/ci/torch_pins.py TORCH_WHEEL PREFIX [PREFIX...] [--python X.Y]

Prints, one per line, every `Requires-Dist` of the wheel whose distribution name starts with one of the
prefixes and whose environment marker holds (for CPython X.Y where given, else for the running one), as
`name==version` (the name canonical, extras dropped). Exits 1 if the wheel has no such requirement.

wheel_torch_check.sh's lean venvs install a torch without its dependencies, next to the build venv's CUDA
libraries. Where that torch needs a newer library than the build venv has (torch 2.15.0: NVSHMEM 3.7.2),
an extra of the form `pin:PREFIX` takes the version from the torch wheel itself, so the same make target
is right for a CUDA 13 torch (nvidia-nvshmem-cu13) and a CUDA 12.8 one (nvidia-nvshmem-cu12) alike.
"""
import argparse
import email.parser
import platform
import re
import sys
import zipfile

try:
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
except ImportError:  # pip's own copy (pip is in every venv)
    from pip._vendor.packaging.markers import default_environment
    from pip._vendor.packaging.requirements import Requirement


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requires_dist(wheel: str) -> list:
    """The wheel's Requires-Dist lines (its .dist-info/METADATA)."""
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
        if len(names) != 1:
            raise SystemExit(f"torch_pins: {wheel}: expected one .dist-info/METADATA, found {len(names)}")
        text = z.read(names[0]).decode("utf-8")
    # the headers only: the description after them is free text
    return [str(v).strip() for v in email.parser.Parser().parsestr(text, headersonly=True).get_all("Requires-Dist", [])]


def pins(wheel: str, prefixes: list, python: str = None) -> list:
    """`name==version` for each requirement of `wheel` named with one of `prefixes` (canonical names) whose
    marker holds for CPython `python` ("X.Y"; default: the running one). A match that is not pinned to one
    version (==) is an error: the lean venv needs the exact library the wheel was built with."""
    env = default_environment()
    if python is not None:
        env.update(python_version=python, python_full_version=f"{python}.0")
    wanted = [canonical(p) for p in prefixes]
    out = []
    for line in requires_dist(wheel):
        req = Requirement(line)
        name = canonical(req.name)
        if not any(name.startswith(p) for p in wanted):
            continue
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        exact = [s.version for s in req.specifier if s.operator == "=="]
        if len(exact) != 1:
            raise SystemExit(f"torch_pins: {wheel}: {line!r} is not pinned to one version")
        out.append(f"{name}=={exact[0]}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheel")
    ap.add_argument("prefixes", nargs="+")
    ap.add_argument("--python", default=None, help="X.Y of the CPython the requirements are for "
                    f"(default: this one, {'.'.join(platform.python_version_tuple()[:2])})")
    args = ap.parse_args(argv)
    found = pins(args.wheel, args.prefixes, args.python)
    if not found:
        print(f"torch_pins: {args.wheel} requires nothing named {' or '.join(args.prefixes)}*", file=sys.stderr)
        return 1
    print("\n".join(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
