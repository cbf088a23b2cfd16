"""Build a copy of ``webhook/`` with the engine compiled by mypyc, to measure what that buys.

    python bench/compiled.py /tmp/stszone-mypyc
    python bench/run.py --baseline-root /tmp/stszone-mypyc        # as server 'baseline'
    taskset -c 0 python bench/cold_request.py --root /tmp/stszone-mypyc

An experiment, not how stszone ships: the package installs as plain Python. The copy holds
``webhook/`` and ``pyproject.toml`` (mypyc type-checks with the project's mypy settings); the
modules of ``webhook/model``, ``webhook/rules`` and ``webhook/wire`` are compiled to C
extensions next to their sources, which Python imports first. ``bench/run.py`` starts its
baseline as ``python -m webhook serve`` from the root it is given, and checks that every corpus
answer is the same as stszone's. Needs mypy (the test extra) and a C compiler.

Left as Python:

* ``webhook/wire/review.py``: msgspec reads the review's lean shape from its TypedDict classes,
  which a compiled module does not keep as TypedDicts; the lean decode would refuse every
  review and fall back to the full one.
* ``webhook/model/index.py``: mypyc's type check refuses the union of its generic tables.
* every ``__init__.py``.

Tests that subclass a compiled class (the counting stores of tests/test_guard.py) cannot run
against the copy: mypyc refuses interpreted subclasses unless a class allows them.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("webhook/model", "webhook/rules", "webhook/wire")
LEFT_AS_PYTHON = frozenset({"webhook/wire/review.py", "webhook/model/index.py"})


def modules(root: Path) -> list[str]:
    """The modules to compile, relative to ``root``."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).glob("*.py")):
            relative = path.relative_to(root).as_posix()
            if path.name != "__init__.py" and relative not in LEFT_AS_PYTHON:
                found.append(relative)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument(
        "dest", type=Path, help="where the copy goes (an earlier copy there is replaced)"
    )
    args = parser.parse_args(argv)
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        print("no C compiler on PATH (apt-get install gcc); mypyc needs one", file=sys.stderr)
        return 2
    dest = args.dest.resolve()
    if dest == ROOT or ROOT in dest.parents:
        print(f"{dest} is inside the repository; give a directory outside it", file=sys.stderr)
        return 2
    if dest.exists() and any(dest.iterdir()) and not (dest / "webhook" / "__init__.py").exists():
        print(f"{dest} exists and is not an earlier copy; give a new directory", file=sys.stderr)
        return 2
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(ROOT / "webhook", dest / "webhook", ignore=shutil.ignore_patterns("*.so"))
    shutil.copy2(ROOT / "pyproject.toml", dest / "pyproject.toml")
    compiled = modules(dest)
    print(f"compiling {len(compiled)} modules into {dest} (about a minute)")
    done = subprocess.run(
        [sys.executable, "-m", "mypyc", *compiled],
        cwd=dest,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        print(done.stdout[-4000:], done.stderr[-4000:], sep="\n", file=sys.stderr)
        print(f"mypyc failed (exit {done.returncode})", file=sys.stderr)
        return 1
    check = subprocess.run(
        [sys.executable, "-c", "import webhook.rules.plan as m; print(m.__file__)"],
        cwd=dest,
        capture_output=True,
        text=True,
        check=True,
    )
    print(f"webhook.rules.plan imports from {check.stdout.strip()}")
    return 0 if check.stdout.strip().endswith(".so") else 1


if __name__ == "__main__":
    sys.exit(main())
