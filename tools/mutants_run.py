"""Running tests against mutants for tools/mutants.py: which tests reach which line, and
workers that import once and fork a run per mutant.

Each worker has its own copy of the repository. It imports pytest, its plugins and the heavy
libraries once (never the project: a child must import the mutated module afresh), then, per
mutant, writes the mutated module into its copy and forks a child that runs the mutant's tests
with ``-x``, fastest first; the first failing test's id comes back down a pipe. A child that
outlives its time limit is killed with its process group (servers a test started included).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import coverage
import pytest

# Run by tools/mutants.py, tools/ is on sys.path; mypy checks tools/ as the package it also is.
if TYPE_CHECKING:
    from tools.mutants_make import IMPORT, MODULES, ROOT, Mutant
else:
    from mutants_make import IMPORT, MODULES, ROOT, Mutant

#: Imported by a worker before it forks: what every run would import anyway.
WARM = ("pytest", "hypothesis", "aiohttp", "aiohttp.test_utils", "kubernetes", "cryptography.x509")
#: The tests every run uses (e2e tests need a cluster).
SUITE = ["-q", "-p", "no:cacheprovider"]
Lines = dict[tuple[str, int], set[str]]


def env(work: Path) -> dict[str, str]:
    """The environment of every run: the work copy first, hypothesis's ``mutation`` profile."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("STSZONE_E2E")}
    return {**kept, "PYTHONPATH": str(work), "HYPOTHESIS_PROFILE": "mutation"}


def copy_repository(dest: Path) -> Path:
    """A copy of the files git tracks or would (tests read deploy/, README.md, fixtures...)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


# -- which tests reach which line ---------------------------------------------------------------


def coverage_map(work: Path) -> tuple[Lines, dict[str, float]]:
    """((module, line) -> the tests that execute it, test -> seconds), from one suite run.

    Tests are pytest node ids of functions: every parameter case of a test runs together.
    """
    done = subprocess.run(
        [sys.executable, ROOT / "tools" / "mutants.py", "--map", str(work)],
        cwd=work, env=env(work), capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"the unmutated tests fail; fix them first:\n{done.stdout[-3000:]}")
    found = json.loads((work / ".mutants-map.json").read_text())
    lines = {
        (module, int(line)): set(tests)
        for module, by_line in found["lines"].items()
        for line, tests in by_line.items()
    }
    return lines, found["seconds"]


def map_tests(work: Path) -> int:
    """``--map WORK``: the suite under ``coverage``, each line recorded with the test running it.

    The test is named around each test's setup, call and teardown rather than found on the
    stack, so what an async test runs in the event loop between its awaits counts as its own.
    """
    os.chdir(work)
    sys.path.insert(0, str(work))
    files = {str(work / path): module for module, path in MODULES.items()}
    cov = coverage.Coverage(data_file=None, include=list(files))
    seconds: dict[str, float] = defaultdict(float)

    class PerTest:
        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
            cov.switch_context(item.nodeid.split("[")[0])
            try:
                return (yield)
            finally:
                cov.switch_context("")

        def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
            seconds[report.nodeid.split("[")[0]] += report.duration

    cov.start()
    code = pytest.main([*SUITE, "tests", "--ignore=tests/e2e"], plugins=[PerTest()])
    cov.stop()
    data = cov.get_data()
    lines = {
        files[name]: {
            line: sorted(c for c in contexts if c)
            for line, contexts in data.contexts_by_lineno(name).items()
            if any(contexts)
        }
        for name in data.measured_files()
    }
    (work / ".mutants-map.json").write_text(json.dumps({"lines": lines, "seconds": seconds}))
    return int(code)


def tests_of(mutant: Mutant, lines: Lines) -> set[str]:
    """The tests that execute a mutant's code; for code that runs at import (a constant, a
    default argument), every test that executes any line of its module."""
    if mutant.scope == IMPORT:
        return {t for (module, _), tests in lines.items() if module == mutant.module for t in tests}
    first, last = mutant.lines
    return {t for line in range(first, last + 1) for t in lines.get((mutant.module, line), ())}


# -- workers ------------------------------------------------------------------------------------


def serve(work: Path) -> None:
    """A worker (``--serve WORK``): one JSON job per stdin line, one JSON answer per stdout line.

    Job: ``{"module": m or null, "source": s, "tests": [...], "timeout": t}``. Answer:
    ``{"passed": bool, "failed": the first failing test, or why it counts as failed,
    "seconds": t}``.
    """
    os.chdir(work)
    sys.path.insert(0, str(work))
    os.environ.update(env(work))
    for name in WARM:
        importlib.import_module(name)
    for plugin in importlib.metadata.entry_points(group="pytest11"):
        importlib.import_module(plugin.module)
    assert not any(m == "webhook" or m.startswith("webhook.") for m in sys.modules)
    spec = importlib.util.find_spec("webhook")
    assert spec and spec.origin and spec.origin.startswith(str(work)), "not the work copy"
    for line in sys.stdin:
        print(json.dumps(_forked(work, **json.loads(line))), flush=True)


def _forget_bytecode(path: Path) -> None:
    # A cached .pyc is trusted when the source's mtime (in seconds) and size match: a mutant
    # written in the same second as another of the same size would run the other's code.
    Path(importlib.util.cache_from_source(str(path))).unlink(missing_ok=True)


def _forked(
    work: Path, *, module: str | None, source: str, tests: list[str], timeout: float
) -> dict[str, Any]:
    """Run ``tests`` in a forked child with ``module`` mutated to ``source`` (None: unmutated)."""
    path = work / MODULES[module] if module else None
    if path is not None:
        original, stat = path.read_bytes(), path.stat()
        _forget_bytecode(path)
        path.write_text(source)
    read, write = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child, in a process group of its own
        os.close(read)
        os.setpgid(0, 0)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # stdout is the worker's answer channel
            os.dup2(null, fd)
        os._exit(_child(tests, write))
    os.close(write)
    status = None
    while status is None and time.monotonic() - started < timeout:
        done, code = os.waitpid(pid, os.WNOHANG)
        if done:
            status = code
        else:
            time.sleep(0.02)
    if status is None:
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        failed = pipe.read()
    if path is not None:
        path.write_bytes(original)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        _forget_bytecode(path)
    seconds = time.monotonic() - started
    if status is None:
        return {"passed": False, "failed": f"(hung past {timeout:.0f} s)", "seconds": seconds}
    code = os.waitstatus_to_exitcode(status)
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:  # the tool's fault, not the mutant's
        raise RuntimeError(f"no test collected of {tests}")
    # A conftest.py that fails to import (the mutant broke an import) exits with USAGE_ERROR.
    return {"passed": code == 0, "failed": failed or f"(pytest exit {code})", "seconds": seconds}


def _child(tests: list[str], write: int) -> int:
    """Run ``tests`` (in the forked child); the first failing one's id goes down ``write``."""

    class FirstFailure:
        told = False

        def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
            if report.failed and not self.told:
                os.write(write, report.nodeid.encode())
                self.told = True

    return int(pytest.main([*SUITE, "-x", *tests], plugins=[FirstFailure()]))


class Worker:
    """The main process's end of one worker."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.proc = subprocess.Popen(
            [sys.executable, ROOT / "tools" / "mutants.py", "--serve", str(work)],
            cwd=work, env=env(work), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip

    def run(self, module: str | None, source: str, tests: list[str], timeout: float) -> Any:
        """The answer of a run of ``tests`` with ``module`` mutated to ``source``."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        job = {"module": module, "source": source, "tests": tests, "timeout": timeout}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"the worker in {self.work} died")
        return json.loads(answer)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()
