"""Compile to bytecode the modules ``stszone serve`` imports, and nothing else (image build).

The image runs on a read-only root filesystem with ``PYTHONDONTWRITEBYTECODE``: a module
imported without a ``.pyc`` beside it is compiled in memory at every start, and a ``.pyc``
of a module never imported is dead weight. The ``kubernetes`` package is the case in point:
about 125 MB of generated source (its asyncio client alone is 68 MB), of which the server
imports some 40 modules (the configuration loaders). So this imports what the server imports,
then compiles exactly those files under one root:

- ``--site-packages`` (build stage): the virtualenv, stszone included, with hash-based
  bytecode that is never checked against the source (``UNCHECKED_HASH``): the files cannot
  change on a read-only root, and the ``.pyc`` does not depend on when pip unpacked the wheel,
  so equal inputs give equal bytes.
- ``--stdlib`` (runtime stage): the standard library of the base image, timestamp-based like
  the ``.pyc`` Debian's ``python3`` already ships, which are kept as they are.

Run with ``python -B`` so that importing writes nothing of its own.
"""

from __future__ import annotations

import argparse
import compileall
import importlib
import py_compile
import sys
import sysconfig
from pathlib import Path

#: What ``stszone serve`` imports: the command line (every command), the event loop it
#: installs, and what the live view imports on first use (webhook.cluster.credsource).
SERVING_IMPORTS = (
    "webhook.cli",
    "uvloop",
    "kubernetes.client",
    "kubernetes.config",
)


def imported_sources() -> list[Path]:
    """Source files of every module loaded by importing :data:`SERVING_IMPORTS`."""
    for name in SERVING_IMPORTS:
        importlib.import_module(name)
    files = {getattr(module, "__file__", None) for module in list(sys.modules.values())}
    return sorted(Path(f) for f in files if f and f.endswith(".py"))


def main() -> None:
    """Compile the imported modules under the chosen root; print how many."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--site-packages", action="store_true", help="the virtualenv")
    where.add_argument("--stdlib", action="store_true", help="the base image's stdlib")
    args = parser.parse_args()
    if args.stdlib:
        root = Path(sysconfig.get_path("stdlib"))
        mode = py_compile.PycInvalidationMode.TIMESTAMP
    else:
        root = Path(sysconfig.get_path("purelib"))
        mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
    sources = [path for path in imported_sources() if path.is_relative_to(root)]
    failed = [
        path
        for path in sources
        if not compileall.compile_file(path, quiet=1, invalidation_mode=mode)
    ]
    if failed:
        sys.exit(f"could not compile: {', '.join(map(str, failed))}")
    print(f"precompile: {len(sources)} imported modules under {root} have bytecode ({mode.name})")


if __name__ == "__main__":
    main()
