"""The end-to-end tests' own cleanup, checked without a cluster: what they start or create is
stopped or deleted however a step fails (``tests/e2e/``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import replicas
from tests.hang import HANG_GUARD
from tests.process import free_port
from tests.rendered import ROOT

#: Stays up, never Ready (nothing answers its metrics URL), and says who it is.
NEVER_READY = (
    "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(300)"
)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_restart_that_never_becomes_ready_leaves_no_process_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica started again by ``Process.restart`` that fails to become Ready is stopped
    before the failure is raised: the caller only knows the old process, which has exited."""
    monkeypatch.setattr(replicas, "READY_TIMEOUT", 1.0)
    pidfile = tmp_path / "pid"
    cmd = [sys.executable, "-c", NEVER_READY, str(pidfile)]
    log = tmp_path / "replica.log"
    with log.open("wb") as out:
        first = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{free_port()}/metrics"
    process = replicas.Process("replica-a", first, url, log, cmd, dict(os.environ))
    try:
        with pytest.raises(AssertionError, match="to be Ready"):
            process.restart(signal.SIGKILL)
        again = int(pidfile.read_text())
        assert again != first.pid
        assert _gone(again), "the restarted process was left running"
    finally:
        first.kill()
        first.wait()
        if pidfile.exists() and not _gone(pid := int(pidfile.read_text())):
            os.kill(pid, signal.SIGKILL)


SIGNALLED = """
import os
import signal
import time
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def made() -> object:
    yield None
    Path(os.environ["CLEANED"]).write_text("cleaned")


def test_terminated(made: object) -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
"""


def test_a_sigterm_during_any_e2e_test_runs_its_fixtures_teardown(tmp_path: Path) -> None:
    """``timeout`` in .ci/run stops the end-to-end pass with SIGTERM: the fixtures of a test
    that does not use ``cluster`` (a namespace, webhook configurations, ClusterRoles) are torn
    down too, as the conftest's autouse fixture turns the signal into KeyboardInterrupt."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text("from tests.e2e.conftest import *  # noqa: F403\n")
    (suite / "test_signalled.py").write_text(SIGNALLED)
    cleaned = tmp_path / "cleaned"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)],
        cwd=suite,
        env={**os.environ, "PYTHONPATH": str(ROOT), "CLEANED": str(cleaned)},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert cleaned.is_file(), f"exit {done.returncode}:\n{done.stdout}{done.stderr}"
    assert done.returncode != 0, done.stdout
