"""The image's lock files keep up with pyproject.toml (offline, no resolver run).

``requirements/image.lock`` and ``requirements/build.lock`` are what the Dockerfile installs
with ``pip install --require-hashes --no-deps``: the runtime dependencies, and the build
backend that makes the stszone wheel (``[build-system] requires``). They fall behind when
either, or requires-python, changes and nobody reruns ``python tools/lock.py``; these tests
catch that from the inputs each lock records, and check that every pin is exact, hashed, and
inside the bounds pyproject.toml sets.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.rendered import ROOT
from tools.lock import BUILD_LOCK, IMAGE_LOCK, inputs, recorded_inputs

LOCKS = [IMAGE_LOCK, BUILD_LOCK]
HASH = re.compile(r"sha256:[0-9a-f]{64}")
REGENERATE = "run `python tools/lock.py` (pip install uv first) and commit the locks"


def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def entries(lock_text: str) -> list[tuple[Requirement, list[str]]]:
    """(requirement, hashes) per entry: continuation lines joined, comments dropped."""
    code = "\n".join(line for line in lock_text.splitlines() if not line.lstrip().startswith("#"))
    result = []
    for line in re.sub(r"\\\n", " ", code).splitlines():
        if line.strip():
            requirement, *hashes = line.split(" --hash=")
            result.append((Requirement(requirement), [h.strip() for h in hashes]))
    return result


def problems(project: dict[str, Any], lock_text: str, *, lock: Path) -> list[str]:
    """Why ``lock_text`` is not a faithful lock of ``project`` for ``lock`` (empty: it is)."""
    found = []
    wanted = inputs(project, lock=lock)
    recorded = recorded_inputs(lock_text)
    if recorded != wanted:
        gone = [item for item in recorded if item not in wanted]
        new = [item for item in wanted if item not in recorded]
        if gone or new:  # one of them may be empty: an input added, or one dropped
            found.append(f"{lock.name} was resolved from {gone}; pyproject.toml now has {new}")
        else:
            found.append(f"{lock.name} was resolved from the same inputs, in another order")
    pins: dict[str, Requirement] = {}
    for requirement, hashes in entries(lock_text):
        name = canonicalize_name(requirement.name)
        specs = list(requirement.specifier)
        if len(specs) != 1 or specs[0].operator != "==":
            found.append(f"{requirement} is not pinned to one version")
        if not hashes or not all(HASH.fullmatch(h) for h in hashes):
            found.append(f"{requirement} has no sha256 hash for --require-hashes")
        if name in pins:
            found.append(f"{name} is pinned twice")
        pins[name] = requirement
    for wanted_requirement in map(Requirement, wanted[1:]):
        pin = pins.get(canonicalize_name(wanted_requirement.name))
        if pin is None:
            found.append(f"{wanted_requirement.name} is missing from {lock.name}")
            continue
        version = next(iter(pin.specifier)).version
        if not wanted_requirement.specifier.contains(version, prereleases=True):
            found.append(f"{pin} does not satisfy {wanted_requirement}")
        if str(wanted_requirement.marker) != str(pin.marker):
            found.append(
                f"{pin} is installed where {wanted_requirement} is not, or not where it is"
            )
    return found


@pytest.mark.parametrize("lock", LOCKS, ids=lambda lock: lock.name)
def test_lock_matches_pyproject(lock: Path) -> None:
    """The checked-in lock was made from today's pyproject.toml and pins every input in bounds."""
    found = problems(pyproject(), lock.read_text(), lock=lock)
    assert not found, "\n".join([*found, REGENERATE])


def _add_dependency(project: dict[str, Any], text: str) -> tuple[dict[str, Any], str]:
    project["project"]["dependencies"].append("rich>=13")
    return project, text


def _raise_a_bound(project: dict[str, Any], text: str) -> tuple[dict[str, Any], str]:
    deps = project["project"]["dependencies"]
    (i, bound), *_ = ((i, d) for i, d in enumerate(deps) if d.startswith("aiohttp>="))
    deps[i] = "aiohttp>=99"
    return project, text.replace(f"#   input: {bound}", "#   input: aiohttp>=99")


def _drop_hashes(project: dict[str, Any], text: str) -> tuple[dict[str, Any], str]:
    return project, re.sub(r"(yarl==\S+) \\\n(\s+--hash=\S+ \\\n)*\s+--hash=\S+", r"\1", text)


def _loosen_a_pin(project: dict[str, Any], text: str) -> tuple[dict[str, Any], str]:
    return project, re.sub(r"^jsonpatch==", "jsonpatch>=", text, flags=re.M)


def _drop_a_marker(project: dict[str, Any], text: str) -> tuple[dict[str, Any], str]:
    return project, re.sub(r"^(uvloop==\S+) ; sys_platform != 'win32'", r"\1", text, flags=re.M)


def test_build_lock_holds_the_backend_and_nothing_the_image_runs() -> None:
    """The Dockerfile builds the wheel without isolation: the backend must be locked, and none
    of it (nor a compiler's tools) reaches the runtime lock."""
    project = pyproject()
    assert inputs(project, lock=BUILD_LOCK)[1:] == project["build-system"]["requires"]
    pinned = {canonicalize_name(r.name) for r, _ in entries(BUILD_LOCK.read_text())}
    assert "hatchling" in pinned
    assert not {"hatch-mypyc", "mypy", "setuptools", "cython"} & pinned
    image = {canonicalize_name(r.name) for r, _ in entries(IMAGE_LOCK.read_text())}
    assert not {"hatchling", "mypy-extensions", "mypy"} & image


def _add_build_requirement(project: dict[str, Any], text: str) -> tuple[dict[str, Any], str]:
    project["build-system"]["requires"].append("hatch-vcs>=0.4")
    return project, text


def _raise_the_backend_bound(project: dict[str, Any], text: str) -> tuple[dict[str, Any], str]:
    requires = project["build-system"]["requires"]
    (i, bound), *_ = ((i, d) for i, d in enumerate(requires) if d.startswith("hatchling>="))
    requires[i] = "hatchling>=99"
    return project, text.replace(f"#   input: {bound}", "#   input: hatchling>=99")


@pytest.mark.parametrize(
    ("lock", "tamper", "expected"),
    [
        (
            BUILD_LOCK,
            _add_build_requirement,
            ["was resolved from", "hatch-vcs is missing from build.lock"],
        ),
        (BUILD_LOCK, _raise_the_backend_bound, ["does not satisfy hatchling>=99"]),
        (IMAGE_LOCK, _add_dependency, ["was resolved from", "rich is missing from image.lock"]),
        (IMAGE_LOCK, _raise_a_bound, ["does not satisfy aiohttp>=99"]),
        (IMAGE_LOCK, _drop_hashes, ["yarl==", "has no sha256 hash"]),
        (IMAGE_LOCK, _loosen_a_pin, ["jsonpatch>=", "is not pinned to one version"]),
        (IMAGE_LOCK, _drop_a_marker, ["uvloop==", "is installed where"]),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else getattr(v, "__name__", None),
)
def test_a_stale_or_loose_lock_is_reported(lock: Path, tamper: Any, expected: list[str]) -> None:
    """Each way a lock can fall behind or loosen is named, so the test above can fail."""
    assert problems(pyproject(), lock.read_text(), lock=lock) == []
    project, text = tamper(pyproject(), lock.read_text())
    report = "\n".join(problems(project, text, lock=lock))
    for words in expected:
        assert words in report, report
