"""The long fuzzing campaign: ``tests/test_fuzz.py`` with many examples per test, once.

    python bench/fuzz_long.py                  # 40,000 examples for each of the 3 fuzz tests
    python bench/fuzz_long.py --examples 100000

Runs pytest on the fuzz module with ``STSZONE_FUZZ_EXAMPLES`` set and hypothesis statistics on,
and prints the examples run, the requests the app answered and the time taken.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=40_000, help="per fuzz test")
    args = parser.parse_args(argv)
    env = {**os.environ, "STSZONE_FUZZ_EXAMPLES": str(args.examples)}
    started = time.monotonic()
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_fuzz.py"),
            *("--hypothesis-show-statistics", "-k", "random or damaged"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.monotonic() - started
    print(done.stdout[-6000:])
    passing = sum(int(n) for n in re.findall(r"(\d+) passing", done.stdout))
    failing = sum(int(n) for n in re.findall(r"(\d+) failing", done.stdout))
    print(
        f"fuzz campaign: {passing} passing examples, {failing} failing, "
        f"pytest exit {done.returncode}, {elapsed / 60:.1f} min"
    )
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
