"""A skipped test is a failure under ``STSZONE_NO_SKIP=1`` (a pytest plugin; conftest loads it).

``.ci/run`` installs every tool the suite needs and runs the end-to-end tests against a real
control plane, and sets the variable: there, a test that skips (a tool missing after all, a
cluster that lacks what a test needs) fails with the skip's own reason, so a check that never
ran cannot pass CI. Without it a skip stays a skip, listed with its reason by ``pytest -ra``.
Expected failures (``xfail``) are left as they are: they are not skips.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

VARIABLE = "STSZONE_NO_SKIP"


def failed_if_skipped(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Turn a skipped ``report`` into a failure that gives the skip's reason, when asked to."""
    if os.environ.get(VARIABLE) != "1" or not report.skipped or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    report.outcome = "failed"
    report.longrepr = f"skipped, and {VARIABLE}=1 (set by .ci/run) makes a skip a failure: {reason}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport() -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    failed_if_skipped(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report() -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    failed_if_skipped(report)
    return report
