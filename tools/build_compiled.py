"""Build stszone's wheel with the engine compiled by mypyc, from a copy of this tree.

    python tools/build_compiled.py dist/                               # the wheel, into dist/
    python tools/build_compiled.py dist/ --unpack /tmp/stszone-compiled # and unpacked there

The image ships the same build (its Dockerfile runs the same hook, from the lock files, in its
build stage); ``.ci/run`` runs the tests against this one, and
``bench/run.py --stszone-root /tmp/stszone-compiled`` measures it. The mypyc build hook in
pyproject.toml writes its C extensions next to the sources of the tree it builds, where Python
would import them before the sources: so the build runs on a copy of ``webhook/``,
``pyproject.toml`` and ``README.md`` in a temporary directory, never on the working tree.

pip builds in an isolated environment (hatchling, hatch-mypyc and mypy from the package
index); a C compiler and the Python headers must be on the machine. The unpacked tree holds
the package and mypyc's shared library beside it, as site-packages would: run from it with
``python -m webhook`` (the current directory comes first on ``sys.path``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Modules the build must have compiled: one from each compiled package, and the hottest.
EXPECTED = ("webhook/rules/plan", "webhook/wire/review", "webhook/model/store")


def build(dest: Path) -> Path:
    """Build the compiled wheel into ``dest`` (an earlier stszone wheel there is replaced)."""
    dest.mkdir(parents=True, exist_ok=True)
    for earlier in dest.glob("stszone-*.whl"):
        earlier.unlink()
    with tempfile.TemporaryDirectory(prefix="stszone-build-") as tmp:
        tree = Path(tmp) / "stszone"
        shutil.copytree(
            ROOT / "webhook",
            tree / "webhook",
            ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"),
        )
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(ROOT / name, tree / name)
        env = {**os.environ, "HATCH_BUILD_HOOK_ENABLE_MYPYC": "1"}
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(dest)]
        subprocess.run([*command, str(tree)], env=env, check=True)
    built = list(dest.glob("stszone-*.whl"))
    if len(built) != 1:
        raise SystemExit(f"expected one stszone wheel in {dest}, found {len(built)}")
    wheel = built[0]
    names = zipfile.ZipFile(wheel).namelist()
    missing = [m for m in EXPECTED if not any(_compiled(n, m) for n in names)]
    if missing:
        raise SystemExit(f"{wheel.name} holds no compiled {', '.join(missing)}: was mypyc run?")
    return wheel


def _compiled(name: str, module: str) -> bool:
    return name.startswith(f"{module}.") and name.endswith(".so")


def unpack(wheel: Path, target: Path) -> None:
    """Unpack ``wheel`` into ``target`` (an earlier unpacked build there is replaced)."""
    if target.exists() and any(target.iterdir()) and not (target / "webhook").is_dir():
        raise SystemExit(f"{target} exists and is not an earlier build; give a new directory")
    shutil.rmtree(target, ignore_errors=True)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0] if __doc__ else None,
        epilog="example: python tools/build_compiled.py dist/ --unpack /tmp/stszone-compiled",
    )
    parser.add_argument("dest", type=Path, help="the directory the wheel is written to")
    parser.add_argument("--unpack", type=Path, help="also unpack the wheel into this directory")
    args = parser.parse_args(argv)
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        print("no C compiler on PATH: mypyc needs one (apt-get install gcc)", file=sys.stderr)
        return 2
    wheel = build(args.dest.resolve())
    print(f"built {wheel}")
    if args.unpack:
        unpack(wheel, args.unpack.resolve())
        print(f"unpacked into {args.unpack.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
