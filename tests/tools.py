"""External programs some tests need (kubectl, promtool): found, or the test fails saying how.

A missing tool fails the test instead of skipping it: a skipped check would pass CI on a
machine that never ran it. ``.ci/run`` installs what it can (see there).
"""

from __future__ import annotations

import shutil

import pytest

#: How to get each tool, for the failure message.
HOW: dict[str, str] = {
    "kubectl": "install kubectl (any 1.27+), or `. ../shared/lab/env.sh` to use the lab's",
    "promtool": "apt-get install -y prometheus (Debian ships promtool in it)",
}


def require(tool: str, *, why: str) -> str:
    """The path of ``tool`` on PATH; fails the calling test with what to do when absent."""
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not on PATH; {why} needs it: {HOW.get(tool, 'install it')}")
    return path
