"""What the rules worked out from one StatefulSet's part of the view, kept while it holds. Pure.

Two answers are asked for again and again with nothing they read changed in between: the plan
``/mutate`` made for a pod, which the ``/validate`` call that follows it needs (the API server
sends the pod there milliseconds later), and where a set's pods run, which every scale-down of
the set reads. Each is filed under its set with the set's revision when it was worked out
(:meth:`webhook.model.store.Store.revision_of`: the set's record and pods, its namespace's
claims, any node or volume); once the revision moves on the entry is stale and never given out,
so a kept answer is the one the view gives now. That check is the only invalidation there is.

Only sets the view holds are kept: the revision of a set it lacks does not follow its pods.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Final, Protocol

#: Entries kept in all; the oldest go first.
LIMIT: Final = 1024


class Revisions(Protocol):
    """What keeping needs of the view (:class:`webhook.model.store.Store`)."""

    @property
    def statefulsets(self) -> Mapping[tuple[str, str], Any]: ...

    def revision_of(self, namespace: str, statefulset: str) -> int: ...


class Kept:
    """Answers filed by (namespace, StatefulSet, what), each valid at the revision it was made."""

    def __init__(self, view: Revisions, *, limit: int = LIMIT) -> None:
        self._view = view
        self._limit = limit
        self._entries: dict[tuple[str, str, Hashable], tuple[int, Any]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, namespace: str, statefulset: str, what: Hashable, answer: Any) -> None:
        """Keep ``answer``, worked out from the view as it is now."""
        view = self._view
        if (namespace, statefulset) not in view.statefulsets:
            return
        entries = self._entries
        if len(entries) >= self._limit:
            del entries[next(iter(entries))]
        revision = view.revision_of(namespace, statefulset)
        entries[(namespace, statefulset, what)] = (revision, answer)

    def get(self, namespace: str, statefulset: str, what: Hashable) -> Any | None:
        """The answer kept, if the view has not changed since (else None)."""
        entry = self._entries.get((namespace, statefulset, what))
        if entry is None or entry[0] != self._view.revision_of(namespace, statefulset):
            return None
        return entry[1]

    def take(self, namespace: str, statefulset: str, what: Hashable) -> Any | None:
        """:meth:`get`, and forget it: an answer kept for one later request."""
        entry = self._entries.pop((namespace, statefulset, what), None)
        if entry is None or entry[0] != self._view.revision_of(namespace, statefulset):
            return None
        return entry[1]
