"""Counting work instead of timing it: a shared 2-core machine makes seconds meaningless.

:func:`line_budget` counts the lines of ``webhook`` code a block executes (``sys.settrace``) and
stops the block as soon as it exceeds its budget, so a walk over two billion ordinals fails at
once instead of hanging. :class:`CountingStore` is the cluster view counting the lookups made
about one ordinal at a time: the pure rules reach the cluster only through the Store, so those
counts say how many ordinals a rule located.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import webhook
from webhook.model.store import Store

_PACKAGE = str(Path(webhook.__file__).parent)


class TooMuchWork(BaseException):
    """Raised inside the code under test when it exceeds its budget.

    A BaseException, so that no ``except Exception`` of the code under test can swallow it.
    """


class Lines:
    """How many lines of ``webhook`` code have run under a :func:`line_budget`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0

    def _call(self, frame: FrameType, event: str, arg: Any) -> Any:
        return self._line if frame.f_code.co_filename.startswith(_PACKAGE) else None

    def _line(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self.count += 1
            if self.count > self.limit:
                raise TooMuchWork(
                    f"over {self.limit} lines of webhook code, at {frame.f_code.co_filename}:"
                    f"{frame.f_lineno} ({frame.f_code.co_name})"
                )
        return self._line


@contextmanager
def line_budget(limit: int) -> Iterator[Lines]:
    """Count the lines of ``webhook`` code run in this thread by the block; fail past ``limit``."""
    lines = Lines(limit)
    previous = sys.gettrace()
    sys.settrace(lines._call)
    try:
        yield lines
    finally:
        sys.settrace(previous)
    assert lines.count <= limit, f"over {limit} lines of webhook code"


class CountingStore(Store):
    """A copy of a view that counts the lookups about one ordinal: the volumes of its claims
    (``claim_zones``) and the nodes pinned to it (``nodes_with_label``)."""

    def __init__(self, source: Store) -> None:
        super().__init__(zones=source.zones_override, live=source.live)
        for table in source.loaded:
            self.replace(table, source.table(table).values())
        self.lookups = 0

    def claim_zones(
        self, namespace: str, claim: str, topology_key: str, *, uid: str | None = None
    ) -> tuple[str, frozenset[str] | None]:
        self.lookups += 1
        return super().claim_zones(namespace, claim, topology_key, uid=uid)

    def nodes_with_label(self, key: str, value: str) -> tuple[str, ...]:
        self.lookups += 1
        return super().nodes_with_label(key, value)

    def objects(self) -> int:
        """Records that can make an ordinal known: pods, claims, volumes and nodes."""
        return len(self.pods) + len(self.claims) + len(self.volumes) + len(self.nodes)
