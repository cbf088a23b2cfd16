"""The image's SBOM (requirements/image.cdx.json) is the lock it was made from, and ships.

``tools/lock.py`` makes it from ``requirements/image.lock`` with ``cyclonedx-py
requirements``. These tests read the committed file (no generator needed): every locked
package is a component with the locked version and exactly the locked hashes, nothing else is,
the root component is this project, and the Dockerfile copies the file into the image.
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

import pytest
from packaging.utils import canonicalize_name

from tests.rendered import ROOT
from tests.test_image_lock import entries
from tools.lock import IMAGE_LOCK, IMAGE_SBOM

#: Where the image carries it (inside the venv the runtime stage copies).
IN_IMAGE = "/opt/stszone/sbom/python.cdx.json"
Component = dict[str, Any]


def _sbom() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(IMAGE_SBOM.read_text())
    return loaded


def locked() -> dict[str, tuple[str, set[str]]]:
    """Canonical name -> (version, sha256 hex digests), from image.lock."""
    found: dict[str, tuple[str, set[str]]] = {}
    for requirement, hashes in entries(IMAGE_LOCK.read_text()):
        (spec,) = requirement.specifier
        assert spec.operator == "==", requirement
        found[canonicalize_name(requirement.name)] = (
            spec.version,
            {digest.removeprefix("sha256:") for digest in hashes},
        )
    return found


def listed(sbom: dict[str, Any]) -> dict[str, tuple[str, set[str]]]:
    """Canonical name -> (version, sha256 digests of its distribution references)."""
    found: dict[str, tuple[str, set[str]]] = {}
    for component in sbom["components"]:
        digests = {
            entry["content"]
            for reference in component.get("externalReferences", [])
            if reference["type"] == "distribution"
            for entry in reference.get("hashes", [])
            if entry["alg"] == "SHA-256"
        }
        name = canonicalize_name(component["name"])
        assert name not in found, f"{name} is listed twice"
        found[name] = (component["version"], digests)
        assert component["purl"] == f"pkg:pypi/{name}@{component['version']}", component["purl"]
    return found


def differences(lock: dict[str, tuple[str, set[str]]], sbom: dict[str, Any]) -> list[str]:
    """What the SBOM gets wrong about the lock: missing, extra, other versions or hashes."""
    have = listed(sbom)
    problems = [f"{name} is not in the SBOM" for name in sorted(lock.keys() - have.keys())]
    problems += [f"{name} is not locked" for name in sorted(have.keys() - lock.keys())]
    for name in sorted(lock.keys() & have.keys()):
        (version, hashes), (listed_version, listed_hashes) = lock[name], have[name]
        if listed_version != version:
            problems.append(f"{name}: {listed_version} in the SBOM, {version} locked")
        if listed_hashes != hashes:
            problems.append(
                f"{name}: {len(listed_hashes - hashes)} hashes not locked, "
                f"{len(hashes - listed_hashes)} locked hashes missing"
            )
    return problems


def test_every_locked_package_is_listed_with_its_version_and_hashes() -> None:
    """The SBOM and image.lock name the same packages, versions and sha256 digests."""
    lock, sbom = locked(), _sbom()
    problems = differences(lock, sbom)
    assert not problems, "; ".join(problems) + ": run python tools/lock.py"
    hashes = sum(len(digests) for _, digests in lock.values())
    print(
        f"SBOM: {len(sbom['components'])} components; image.lock: {len(lock)} packages, {hashes} hashes"
    )


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda c: c["components"].pop(0), "aiohappyeyeballs is not in the SBOM"),
        (lambda c: c["components"][1].update(version="0.0.1"), "aiohttp: 0.0.1 in the SBOM"),
        (
            lambda c: c["components"][0]["externalReferences"][0]["hashes"].pop(),
            "aiohappyeyeballs: 0 hashes not locked, 1 locked hashes missing",
        ),
    ],
    ids=["a package missing", "another version", "a hash missing"],
)
def test_a_stale_sbom_is_found(change: Any, problem: str) -> None:
    """The comparison can fail: each kind of drift is named."""
    sbom = _sbom()
    change(sbom)
    for component in sbom["components"]:  # keep the purl in step with an edited version
        component["purl"] = (
            f"pkg:pypi/{canonicalize_name(component['name'])}@{component['version']}"
        )
    found = differences(locked(), sbom)
    assert any(line.startswith(problem) for line in found), found


def test_it_is_cyclonedx_for_this_project_made_by_its_generator() -> None:
    """CycloneDX JSON, root component stszone at the package's version, made by cyclonedx-py,
    reproducible (no timestamp, no random serial number)."""
    sbom = _sbom()
    assert sbom["bomFormat"] == "CycloneDX" and sbom["specVersion"] == "1.6"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    root = sbom["metadata"]["component"]
    assert (root["name"], root["version"], root["type"]) == (
        project["name"],
        project["version"],
        "application",
    )
    tools = [tool["name"] for tool in sbom["metadata"]["tools"]["components"]]
    assert "cyclonedx-py" in tools
    assert "serialNumber" not in sbom and "timestamp" not in sbom["metadata"]


def test_the_image_ships_it() -> None:
    """The build stage puts it into the venv, which the runtime stage copies whole; the build
    context admits it."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    build = dockerfile[: dockerfile.rindex("\nFROM ")]
    assert f"\nCOPY requirements/image.cdx.json {IN_IMAGE}\n" in build
    assert IN_IMAGE.startswith("/opt/stszone/")
    assert "\nCOPY --from=build /opt/stszone /opt/stszone\n" in dockerfile
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert "!requirements/image.cdx.json" in ignore
