"""One line per test file from a pytest JUnit XML report (gpu_check.sh's single test run).

    python scripts/gpu/junit_files.py tests.xml test_gpu test_golden ...

prints, for each named file, what its own pytest run would have said: "rc=0   test_gpu   636 passed"
(rc 1 when a test failed or errored, 5 when the report holds none of the file's tests).
"""

import collections
import sys
import xml.etree.ElementTree as ET


def outcomes_by_file(report):
    """{file stem: Counter of passed/failed/error/skipped} from the report's testcases."""
    counts = collections.defaultdict(collections.Counter)
    for case in ET.parse(report).getroot().iter("testcase"):
        # classname is "tests.test_gpu" or "tests.test_gpu.TestClass"
        parts = case.get("classname", "").split(".")
        stem = parts[1] if len(parts) > 1 and parts[0] == "tests" else parts[0]
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        # a test that fails and then errors in teardown has both: it counts as failed (pytest says the same)
        kind = "failed" if "failure" in kinds else "error" if "error" in kinds else kinds[0] if kinds else "passed"
        counts[stem][kind] += 1
    return counts


def line_for(stem, counts):
    c = counts.get(stem, collections.Counter())
    if not c:
        return f"rc={5:<3} {stem:<26} no tests ran"
    rc = 1 if c["failed"] or c["error"] else 0
    words = ", ".join(f"{c[k]} {k}" for k in ("passed", "failed", "error", "skipped") if c[k])
    return f"rc={rc:<3} {stem:<26} {words}"


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    counts = outcomes_by_file(argv[1])
    for stem in argv[2:]:
        print(line_for(stem, counts))


if __name__ == "__main__":
    main(sys.argv)
