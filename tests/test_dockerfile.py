"""The Dockerfile, checked without a container engine: what it runs, as whom, from which files.

No image is built here (tools/image-check.sh builds and runs one), so these tests check what
can be checked: the entrypoint is a console script of this package and works in a virtualenv;
every file it copies exists and survives .dockerignore; its user is the numeric non-root user
the Deployment's securityContext names; the locked dependencies are installed before the source
is copied; the build backend (build.lock) lives in a virtualenv of their own that the runtime
stage never sees, and the runtime virtualenv has no pip; the wheel is pure Python, built by that
backend, and no stage installs a compiler.
"""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.rendered import ROOT
from webhook.install import deploybase

Instruction = tuple[str, str]


def instructions() -> list[Instruction]:
    """(KEYWORD, arguments) per instruction, continuation lines joined, comments dropped."""
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    code = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    joined = re.sub(r"\\\n", " ", code)
    result = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


def final_stage() -> list[Instruction]:
    """The instructions of the last stage (what the image runs)."""
    steps = instructions()
    last_from = max(i for i, (keyword, _) in enumerate(steps) if keyword == "FROM")
    return steps[last_from:]


def test_multi_stage_on_a_slim_python_311_or_newer() -> None:
    """A build stage makes the wheel; the runtime stage is a slim CPython >= 3.11."""
    steps = instructions()
    froms = [rest for keyword, rest in steps if keyword == "FROM"]
    assert len(froms) >= 2
    assert froms[0].endswith(" AS build")
    base = next(
        rest for keyword, rest in steps if keyword == "ARG" and rest.startswith("PYTHON_IMAGE=")
    )
    match = re.fullmatch(r"PYTHON_IMAGE=python:3\.(\d+)-slim(-\w+)?", base)
    assert match, base
    assert int(match.group(1)) >= 11
    build = " ".join(rest for keyword, rest in steps[: steps.index(("FROM", froms[1]))])
    assert "pip wheel" in build and "pyproject.toml" in build


def test_runs_as_the_numeric_user_the_deployment_expects() -> None:
    """USER is numeric (runAsNonRoot needs that) and equals runAsUser/runAsGroup."""
    users = [rest for keyword, rest in final_stage() if keyword == "USER"]
    assert users == [f"{deploybase.RUN_AS}:{deploybase.RUN_AS}"]
    run_as: int = deploybase.RUN_AS  # the value, not its Literal type: is it root?
    assert run_as != 0


def test_entrypoint_is_this_packages_serve_command() -> None:
    """ENTRYPOINT ["stszone", "serve"], and `stszone` is our console script."""
    entrypoint = [json.loads(rest) for keyword, rest in final_stage() if keyword == "ENTRYPOINT"]
    assert entrypoint == [["stszone", "serve"]]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["stszone"] == "webhook.cli:main"


def test_runtime_environment_writes_nothing_and_finds_the_venv() -> None:
    """No bytecode writes at run time; PATH reaches the virtualenv copied from the build."""
    env = " ".join(rest for keyword, rest in final_stage() if keyword == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    copies = [rest for keyword, rest in final_stage() if keyword == "COPY"]
    assert copies == ["--from=build /opt/stszone /opt/stszone"]
    assert re.search(r"PATH=/opt/stszone/bin:\$PATH", env)


def build_stage() -> list[Instruction]:
    """The instructions of the first stage (what builds the virtualenv)."""
    steps = instructions()
    second_from = [i for i, (keyword, _) in enumerate(steps) if keyword == "FROM"][1]
    return steps[:second_from]


BUILD_VENV = "/opt/build"
RUNTIME_VENV = "/opt/stszone"


def build_commands() -> list[str]:
    """The build stage's RUN instructions split into commands at ``&&``, in order."""
    runs = [rest for keyword, rest in build_stage() if keyword == "RUN"]
    return [" ".join(command.split()) for rest in runs for command in rest.split("&&")]


def _lock_install(steps: list[Instruction], lock: str) -> int:
    installs = [
        i
        for i, (keyword, rest) in enumerate(steps)
        if keyword == "RUN" and f"-r requirements/{lock}" in rest
    ]
    assert len(installs) == 1, f"one RUN installs requirements/{lock}"
    return installs[0]


def test_locked_dependencies_are_installed_before_the_source_is_copied() -> None:
    """Hash-checked, no resolver, each lock in a layer that depends on that lock file alone."""
    steps = build_stage()
    source = next(
        i for i, (keyword, rest) in enumerate(steps) if keyword == "COPY" and "webhook" in rest
    )
    for lock, extra_flags in (("build.lock", ()), ("image.lock", ("--no-compile",))):
        at = _lock_install(steps, lock)
        install = steps[at][1]
        for flag in ("--require-hashes", "--no-deps", "--only-binary=:all:", *extra_flags):
            assert flag in install, (lock, flag)
        copy = max(i for i, (keyword, _) in enumerate(steps[:at]) if keyword == "COPY")
        assert steps[copy][1] == f"requirements/{lock} ./requirements/", lock
        assert at < source, lock


def test_build_tools_stay_in_their_own_virtualenv() -> None:
    """build.lock goes to /opt/build; /opt/stszone, made without pip, gets image.lock and the
    wheel from /opt/build's pip (--python), and is the only thing the runtime stage copies."""
    steps = build_stage()
    build_install = steps[_lock_install(steps, "build.lock")][1]
    assert f"{BUILD_VENV}/bin/pip install " in build_install
    assert "--python" not in build_install
    assert f"python -m venv {BUILD_VENV}" in build_install
    commands = build_commands()
    assert f"python -m venv --without-pip {RUNTIME_VENV}" in commands
    # Every pip the stage runs, whatever precedes it (an environment assignment, say).
    pips = [c for c in commands if re.search(r"(^|[\s/])pip3?\s|-m pip\b", c)]
    assert len(pips) == 4, pips  # build.lock, image.lock, the wheel, its install
    for command in pips:
        assert re.search(rf"(^|\s){BUILD_VENV}/bin/pip ", command), command
    into_runtime = [c for c in pips if f"--python {RUNTIME_VENV}/bin/python" in c]
    assert [("-r requirements/image.lock" in c, ".whl" in c) for c in into_runtime] == [
        (True, False),
        (False, True),
    ]
    for command in into_runtime:
        assert "--no-deps" in command and "--no-compile" in command, command
    assert not any(f"{RUNTIME_VENV}/bin/pip" in c for c in commands)
    copies = [rest for keyword, rest in final_stage() if keyword == "COPY"]
    assert copies == [f"--from=build {RUNTIME_VENV} {RUNTIME_VENV}"]
    runtime = " ".join(rest for keyword, rest in final_stage() if keyword == "RUN")
    for word in ("pip ", "apt-get", "gcc", BUILD_VENV):
        assert word not in runtime, word


def test_no_stage_installs_a_compiler() -> None:
    """The image runs the Python the tests run: no stage installs system packages (a compiler,
    Python headers), in the build stage or the runtime stage."""
    runs = " ".join(rest for keyword, rest in instructions() if keyword == "RUN")
    for word in ("apt-get", "apt ", "gcc", "python3-dev", "build-essential", "mypyc"):
        assert word not in runs, word


def test_the_pure_wheel_is_built_installed_and_started_in_one_step() -> None:
    """/opt/build's pip builds the wheel without isolation (the locked backend), installs it
    into /opt/stszone only under a pure-Python name, then precompile.py and `stszone serve
    --help` run, in that order and in the same RUN, so a broken wheel fails the build."""
    runs = [rest for keyword, rest in build_stage() if keyword == "RUN"]
    (build,) = [rest for rest in runs if " wheel " in rest]
    commands = [" ".join(command.split()) for command in build.split("&&")]
    assert commands[0] == (
        f"{BUILD_VENV}/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels ."
    )
    assert commands[1] == (
        f"{BUILD_VENV}/bin/pip --python {RUNTIME_VENV}/bin/python install"
        " --no-compile --no-deps /wheels/stszone-*-py3-none-any.whl"
    )
    assert commands[2:] == [
        f"{RUNTIME_VENV}/bin/python -B tools/precompile.py --site-packages",
        f"{RUNTIME_VENV}/bin/stszone serve --help > /dev/null",
    ]


def _ignored(path: str, patterns: list[str]) -> bool:
    # .dockerignore: the last matching pattern wins, "!" re-includes.
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
            ignored = not negate
    return ignored


def test_copied_files_exist_and_reach_the_build_context() -> None:
    """Every COPY source of the build stage exists and is not excluded by .dockerignore."""
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    sources = [
        source
        for keyword, rest in instructions()
        if keyword == "COPY" and not rest.startswith("--from")
        for source in rest.split()[:-1]
    ]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not _ignored(source, patterns), source
    assert _ignored("tests/test_dockerfile.py", patterns)
    assert _ignored("webhook/__pycache__/cli.cpython-311.pyc", patterns)


@pytest.mark.parametrize("args", [["--help"], ["serve", "--help"]])
def test_entrypoint_command_runs_in_a_virtualenv(args: list[str]) -> None:
    """The console script the image runs works from an installed virtualenv."""
    script = Path(sys.executable).parent / "stszone"
    assert script.exists(), "the package is not installed in this virtualenv"
    done = subprocess.run(
        [str(script), *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "usage: stszone" in done.stdout
