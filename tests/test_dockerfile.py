"""The Dockerfile, checked without a container engine: what it runs, as whom, from which files.

No image is built here (tools/image-check.sh builds and runs one), so these tests check what
can be checked: the entrypoint is a console script of this package and works in a virtualenv;
every file it copies exists and survives .dockerignore; its user is the numeric non-root user
the Deployment's securityContext names; the locked dependencies are installed before the source
is copied, and pip and setuptools do not reach the runtime stage.
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


def test_locked_dependencies_are_installed_before_the_source_is_copied() -> None:
    """Hash-checked, no resolver, in a layer that depends on the lock files alone."""
    steps = build_stage()
    installs = [
        i
        for i, (keyword, rest) in enumerate(steps)
        if keyword == "RUN" and "-r requirements/image.lock" in rest
    ]
    assert len(installs) == 1, "one RUN installs requirements/image.lock"
    install = steps[installs[0]][1]
    for flag in ("--require-hashes", "--no-deps", "--no-compile", "-r requirements/build.lock"):
        assert flag in install, flag
    copies_before = [rest for keyword, rest in steps[: installs[0]] if keyword == "COPY"]
    assert copies_before == ["requirements/image.lock requirements/build.lock ./requirements/"]
    source = next(
        i for i, (keyword, rest) in enumerate(steps) if keyword == "COPY" and "webhook" in rest
    )
    assert installs[0] < source


def test_pip_and_setuptools_stay_in_the_build_stage() -> None:
    """The venv the runtime copies has had pip and setuptools removed, after their last use."""
    runs = [rest for keyword, rest in build_stage() if keyword == "RUN"]
    commands = [command.strip() for rest in runs for command in rest.split("&&")]
    uninstall = next(i for i, c in enumerate(commands) if " uninstall " in c)
    assert re.search(r"pip uninstall .*\bpip setuptools$", commands[uninstall])
    assert not any("pip" in c.split()[0] for c in commands[uninstall + 1 :])
    assert not any("pip " in rest for keyword, rest in final_stage() if keyword == "RUN")


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
