"""From notices to Event writes: series, aggregation and spam filtering, as client-go does them.
Pure: no I/O; every method takes the time, so tests drive it with their own clock: ``now``, an
elapsed clock's reading, for every interval below, and ``wall``, the wall clock's, for what an
Event says (its ``eventTime``, its name, a series' ``lastObservedTime``). A step of the wall
clock (NTP) then neither cuts a series short nor holds it open, nor refills a spam bucket.

The model is client-go's two recorders, read in ``tools/events/event_broadcaster.go``
(``events.k8s.io/v1``) and ``tools/record/events_cache.go`` (``EventCorrelator``):

- **Series.** Notices alike in everything but their time (the same regarding and related
  objects, type, reason, action and note) are one Event. The first is created; the first repeat
  sets ``series: {count: 2, lastObservedTime}`` at once, by a patch; later repeats only count,
  and the count reaches the API server when the series has been quiet for ``finish_after``
  (6 minutes: the final count, and the series is forgotten) or every ``refresh_every`` (30
  minutes, within the API server's default one-hour Event TTL, which a write renews). So a
  decision repeated a thousand times a minute costs two writes, then one per half hour. The
  API server keeps ``note`` immutable on update, which is why a note is part of the key.
- **Aggregation.** When one object collects ``aggregate_after`` (10) different notes of one
  reason and type within ``aggregate_window`` (10 minutes) -- a hundred pods of one set each
  placed with its data -- the next ones are folded into one Event whose note says
  ``(combined from similar events): <the note>``, counted in its series.
- **Spam filter.** A token bucket per regarding object and type: ``spam_burst`` (25) Events
  at once, then one per ``1 / spam_rate`` seconds (5 minutes). It gates the writes a notice
  causes at once (a new Event, a series' first patch); the timed series writes are bounded by
  their intervals.

Every table is an LRU bounded by ``cache_size`` (4096, client-go's), so memory stays bounded
whatever the cluster does. What a correlator decides is counted (:class:`Counts`).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from webhook.model.names import is_dns_subdomain
from webhook.model.notices import Notice, ObjectRef, cap_note

JSON = dict[str, Any]

API_VERSION: Final = "events.k8s.io/v1"
#: What every Event stszone writes names as its reporter.
CONTROLLER: Final = "stszone.io/webhook"
#: The API server's limit on ``reportingInstance``.
INSTANCE_MAX: Final = 128
#: What an aggregated Event's note starts with (client-go's wording).
COMBINED: Final = "(combined from similar events): "


@dataclass(frozen=True, slots=True)
class Tuning:
    """The correlator's limits; the defaults are client-go's."""

    spam_burst: int = 25
    #: Tokens per second refilled into each object's bucket.
    spam_rate: float = 1 / 300
    aggregate_after: int = 10
    aggregate_window: float = 600.0
    finish_after: float = 360.0
    refresh_every: float = 1800.0
    cache_size: int = 4096


class Create(NamedTuple):
    """POST the Event ``body`` in ``namespace``."""

    namespace: str
    body: JSON


class Patch(NamedTuple):
    """PATCH the series of Event ``name``; ``event`` is the whole Event with its series, to
    create it again when it is gone (its TTL passed)."""

    namespace: str
    name: str
    series: JSON
    event: JSON


Write = Create | Patch


@dataclass(slots=True)
class Counts:
    """What became of the notices observed."""

    #: Repeats counted in an existing Event's series.
    series: int = 0
    #: Notices folded into a combined Event.
    aggregated: int = 0
    #: Writes the spam filter held back.
    filtered: int = 0


def micro_time(now: float) -> str:
    """``MicroTime`` as the API server writes it: RFC 3339, microseconds, UTC."""
    return dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def reference(ref: ObjectRef) -> JSON:
    """A ``core/v1`` ObjectReference."""
    out: JSON = {"apiVersion": ref.api_version, "kind": ref.kind, "name": ref.name}
    if ref.namespace:
        out["namespace"] = ref.namespace
    if ref.uid:
        out["uid"] = ref.uid
    return out


#: (regarding, related, type, reason, action, note): what makes two notices one Event.
Key = tuple[ObjectRef, ObjectRef | None, str, str, str, str]


@dataclass(slots=True)
class _Series:
    event: JSON
    count: int
    #: When the last repeat came: on the elapsed clock, and on the wall clock for the API.
    last_observed: float
    last_observed_wall: float
    #: The count the API server has, and when it was last written.
    written: int
    written_at: float

    def patch(self, now: float) -> Patch:
        self.written, self.written_at = self.count, now
        series = {"count": self.count, "lastObservedTime": micro_time(self.last_observed_wall)}
        meta = self.event["metadata"]
        return Patch(
            meta["namespace"], meta["name"], {"series": series}, {**self.event, "series": series}
        )


@dataclass(slots=True)
class _Similar:
    notes: set[str] = field(default_factory=set)
    last: float = 0.0


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class Correlator:
    """Turns notices into the writes the API server gets (see the module docstring)."""

    def __init__(self, *, instance: str, tuning: Tuning | None = None) -> None:
        self.instance = instance[:INSTANCE_MAX]
        self.tuning = tuning if tuning is not None else Tuning()
        self.counts = Counts()
        self._series: OrderedDict[Key, _Series] = OrderedDict()
        self._similar: OrderedDict[tuple[ObjectRef, str, str], _Similar] = OrderedDict()
        self._buckets: OrderedDict[tuple[ObjectRef, str], _Bucket] = OrderedDict()
        self._last_name = 0

    def observe(self, notice: Notice, *, now: float, wall: float | None = None) -> Write | None:
        """The write ``notice`` causes now, if any; ``wall`` is ``now`` when not given (one
        clock for both)."""
        wall = now if wall is None else wall
        notice, combined = self._aggregate(notice, now=now)
        # One combined Event per object and reason: its note (the first it combined) is the
        # API server's to keep, later ones only count.
        note = COMBINED if combined else notice.note
        key: Key = (
            notice.regarding,
            notice.related,
            notice.type,
            notice.reason,
            notice.action,
            note,
        )
        entry = self._series.get(key)
        if entry is not None:
            self._series.move_to_end(key)
            entry.count += 1
            entry.last_observed, entry.last_observed_wall = now, wall
            self.counts.series += 1
            if entry.written > 1 or not self._allow(notice, now=now):
                return None  # the timed writes of tick() carry the count
            return entry.patch(now)
        if not self._allow(notice, now=now):
            return None
        event = self._event(notice, wall=wall)
        self._series[key] = _Series(event, 1, now, wall, written=1, written_at=now)
        _bound(self._series, self.tuning.cache_size)
        return Create(event["metadata"]["namespace"], event)

    def tick(self, *, now: float) -> list[Write]:
        """The timed writes: final counts of series quiet for ``finish_after`` (then forgotten,
        as are single Events as old), and counts of live series not written for
        ``refresh_every``. Call it every few seconds."""
        tuning = self.tuning
        writes: list[Write] = []
        for key, entry in list(self._series.items()):
            quiet = now - entry.last_observed >= tuning.finish_after
            if quiet:
                del self._series[key]
                if entry.count > entry.written:
                    writes.append(entry.patch(now))
            elif entry.count > 1 and now - entry.written_at >= tuning.refresh_every:
                writes.append(entry.patch(now))
        return writes

    def _aggregate(self, notice: Notice, *, now: float) -> tuple[Notice, bool]:
        """``notice``, or the combined notice it is folded into (see the module docstring);
        and whether it is combined."""
        tuning = self.tuning
        key = (notice.regarding, notice.type, notice.reason)
        similar = self._similar.get(key)
        if similar is None or now - similar.last > tuning.aggregate_window:
            similar = _Similar()
        similar.notes.add(notice.note)
        similar.last = now
        self._similar[key] = similar
        self._similar.move_to_end(key)
        _bound(self._similar, tuning.cache_size)
        if len(similar.notes) < tuning.aggregate_after:
            return notice, False
        while len(similar.notes) >= tuning.aggregate_after:  # never grows past the threshold
            similar.notes.pop()
        self.counts.aggregated += 1
        return notice._replace(note=cap_note(COMBINED + notice.note), related=None), True

    def _allow(self, notice: Notice, *, now: float) -> bool:
        """Take a token from the bucket of the notice's object and type, if there is one."""
        tuning = self.tuning
        key = (notice.regarding, notice.type)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(tuning.spam_burst), now)
        else:
            self._buckets.move_to_end(key)
            elapsed = max(now - bucket.at, 0.0)
            bucket.tokens = min(
                float(tuning.spam_burst), bucket.tokens + elapsed * tuning.spam_rate
            )
            bucket.at = now
        _bound(self._buckets, tuning.cache_size)
        if bucket.tokens < 1:
            self.counts.filtered += 1
            return False
        bucket.tokens -= 1
        return True

    def _name(self, regarding: ObjectRef, wall: float) -> str:
        """``<regarding name>.<nanoseconds, hex>`` as client-go names Events (unique here: the
        nanoseconds only grow), or a UUID where that would not be a valid name."""
        self._last_name = max(int(wall * 1e9), self._last_name + 1)
        name = f"{regarding.name}.{self._last_name:x}"
        return name if is_dns_subdomain(name) else str(uuid.uuid4())

    def _event(self, notice: Notice, *, wall: float) -> JSON:
        regarding = notice.regarding
        # The API server requires the Event's namespace to be its regarding object's.
        namespace = regarding.namespace or "default"
        event: JSON = {
            "apiVersion": API_VERSION,
            "kind": "Event",
            "metadata": {"name": self._name(regarding, wall), "namespace": namespace},
            "eventTime": micro_time(wall),
            "reportingController": CONTROLLER,
            "reportingInstance": self.instance,
            "action": notice.action,
            "reason": notice.reason,
            "type": notice.type,
            "note": cap_note(notice.note),
            "regarding": reference(regarding),
        }
        if notice.related is not None:
            event["related"] = reference(notice.related)
        return event


def _bound(table: OrderedDict[Any, Any], size: int) -> None:
    """Forget the least recently used entries beyond ``size``."""
    while len(table) > size:
        table.popitem(last=False)
