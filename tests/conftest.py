import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))  # tests/reference.py, tests/helpers.py


def pytest_configure(config):
    # declared here as well as in pyproject.toml: the wheel checks run a copy of tests/ outside the tree
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped when torch.cuda.is_available() is false)")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


_SUMMARY_LINES = []


def add_summary_line(line: str):
    """Lines printed at the end of the pytest run (golden results, bounds seen)."""
    _SUMMARY_LINES.append(line)


def pytest_terminal_summary(terminalreporter):
    if _SUMMARY_LINES:
        terminalreporter.section("sgl_quant summary")
        for line in _SUMMARY_LINES:
            terminalreporter.write_line(line)
