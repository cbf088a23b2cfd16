"""External programs some tests need (kubectl, promtool): found, or the test skips saying how.

The skip names the tool and how to install it, so ``pytest -ra`` (the default here) lists what
did not run and why. ``.ci/run`` installs the tools and sets ``STSZONE_NO_SKIP=1``, under which
``tests/conftest.py`` turns every skip into a failure: a check that never ran cannot pass CI.
"""

from __future__ import annotations

import shutil

import pytest

#: How to get each tool, for the skip's reason.
HOW: dict[str, str] = {
    "kubectl": "install kubectl (any 1.27+), or `. ../shared/lab/env.sh` to use the lab's",
    "promtool": "apt-get install -y prometheus (Debian ships promtool in it)",
}


def require(tool: str, *, why: str) -> str:
    """The path of ``tool`` on PATH; skips the calling test, saying what to do, when absent."""
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not on PATH; {why} needs it: {HOW.get(tool, 'install it')}")
    return path
