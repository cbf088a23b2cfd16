"""tools/mutants.py's mutants: ids that stay put, and a list of equivalent ones that still
names the code it was judged on (CI fails when an edit leaves a judgement behind)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def make() -> ModuleType:
    """tools/mutants_make.py (tools/ is scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(
        "mutants_make", ROOT / "tools" / "mutants_make.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mutants_make", module)
    spec.loader.exec_module(module)
    return module


def test_every_listed_equivalent_mutant_is_still_the_one_judged() -> None:
    """Each entry of tools/mutants-equivalent.txt names a mutant that exists and still makes
    the change it was judged on; ids are unique."""
    tool = make()
    mutants = [m for module in tool.MODULES for m in tool.mutants_of(module)]
    assert len({m.id for m in mutants}) == len(mutants)
    assert tool.stale_entries(tool.read_equivalent(), mutants) == []


def test_ids_stay_put_when_the_module_changes_elsewhere(tmp_path: Path) -> None:
    """A function added at the top of a module, and lines shifted, leave every other mutant's
    id and change as they were."""
    tool = make()
    path = tmp_path / tool.MODULES["text"]
    path.parent.mkdir(parents=True)
    shutil.copy(ROOT / tool.MODULES["text"], path)
    source = path.read_text()
    at = source.index("def joined")
    path.write_text(
        f"{source[:at]}def added(n: int) -> bool:\n    return n > 2 and n < 9\n\n\n{source[at:]}"
    )
    before = {m.id: m.change for m in tool.mutants_of("text")}
    after = {m.id: m.change for m in tool.mutants_of("text", root=tmp_path)}
    assert {i: c for i, c in after.items() if ":added:" not in i} == before
    assert len(after) > len(before)
