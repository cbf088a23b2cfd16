"""The correlator, on an injected clock: which notices become which writes, series, aggregation
and the spam filter, as client-go's recorders do them."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from tests.fakeevents import create_problems, merged, update_problems
from webhook.cluster.correlator import COMBINED, Correlator, Create, Patch, Tuning, Write
from webhook.model import notices
from webhook.model.notices import NOTE_MAX, Notice

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
DB = notices.statefulset("shop", "db", uid="63c2ba1b-f5ae-4329-907c-ceabb96215c7")
CACHE = notices.statefulset("shop", "cache")
REFUSED = notices.scale_down_refused(DB, note="scale-down of db from 6 to 3 would drop zone-c")


def _placed(ordinal: int, *, workload: notices.ObjectRef = DB) -> Notice:
    pod = notices.pod(workload.namespace, f"{workload.name}-{ordinal}")
    note = f"{pod.name} follows volume pv-{ordinal} (claim data-{pod.name}) to zone-c"
    return notices.placed_with_data(workload, pod=pod, note=note)


def _create(write: Write | None) -> Create:
    assert isinstance(write, Create), write
    return write


def _patch(write: Write | None) -> Patch:
    assert isinstance(write, Patch), write
    return write


def test_a_first_notice_is_created_as_the_api_server_wants_it() -> None:
    correlator = Correlator(instance="stszone-5d4f8-x2x9q")
    pod = notices.pod("shop", "db-3")
    note = "db-3 follows volume pv-3 (claim data-db-3) to zone-c; the rule says zone-a"
    write = _create(correlator.observe(notices.placed_with_data(DB, pod=pod, note=note), now=T0))
    event = write.body
    assert write.namespace == "shop"
    assert create_problems(event, namespace="shop") == []
    assert event["metadata"]["name"].startswith("db.")
    assert {k: v for k, v in event.items() if k != "metadata"} == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "eventTime": "2027-01-15T08:00:00.000000Z",
        "reportingController": "stszone.io/webhook",
        "reportingInstance": "stszone-5d4f8-x2x9q",
        "action": "Place",
        "reason": "PlacedWithData",
        "type": "Normal",
        "note": note,
        "regarding": {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "namespace": "shop",
            "name": "db",
            "uid": "63c2ba1b-f5ae-4329-907c-ceabb96215c7",
        },
        "related": {"apiVersion": "v1", "kind": "Pod", "namespace": "shop", "name": "db-3"},
    }


def test_event_time_has_microseconds() -> None:
    event = _create(Correlator(instance="i").observe(REFUSED, now=T0 + 0.123456)).body
    assert event["eventTime"] == "2027-01-15T08:00:00.123456Z"


def test_repeats_become_one_series_two_writes_then_the_final_count() -> None:
    """client-go's events.k8s.io recorder: the first repeat patches count 2 at once, later
    ones only count, and the count is written when the series has been quiet 6 minutes."""
    correlator = Correlator(instance="i")
    created = _create(correlator.observe(REFUSED, now=T0))
    first = _patch(correlator.observe(REFUSED, now=T0 + 1))
    assert first.name == created.body["metadata"]["name"]
    assert first.series == {
        "series": {"count": 2, "lastObservedTime": "2027-01-15T08:00:01.000000Z"}
    }
    assert update_problems(merged(created.body, first.series), created.body) == []
    assert [correlator.observe(REFUSED, now=T0 + 2 + i) for i in range(8)] == [None] * 8
    assert correlator.counts.series == 9
    assert correlator.tick(now=T0 + 9 + 359) == []  # quiet for less than 6 minutes
    (write,) = correlator.tick(now=T0 + 9 + 360)
    final = _patch(write)
    assert final.series["series"] == {
        "count": 10,
        "lastObservedTime": "2027-01-15T08:00:09.000000Z",
    }
    assert final.event == {**created.body, **final.series}  # to create it again
    assert correlator.tick(now=T0 + 9 + 720) == []  # forgotten: nothing more to write
    again = _create(correlator.observe(REFUSED, now=T0 + 800))  # a new Event
    assert again.body["metadata"]["name"] != created.body["metadata"]["name"]


def test_a_live_series_is_written_every_half_hour() -> None:
    """A decision repeated every minute for an hour: its count reaches the API server every
    30 minutes (within the Event TTL of an hour), not at every repeat."""
    correlator = Correlator(instance="i")
    writes: list[Write] = []
    for minute in range(62):
        now = T0 + 60 * minute
        if (write := correlator.observe(REFUSED, now=now)) is not None:
            writes.append(write)
        writes += correlator.tick(now=now)
    assert [type(w).__name__ for w in writes] == ["Create", "Patch", "Patch", "Patch"]
    # Minute 1 patches count 2; 30 minutes after that write, minute 31 writes 32, then 62.
    assert [_patch(w).series["series"]["count"] for w in writes[1:]] == [2, 32, 62]


def test_a_single_event_is_forgotten_after_six_quiet_minutes() -> None:
    correlator = Correlator(instance="i")
    _create(correlator.observe(REFUSED, now=T0))
    assert correlator.tick(now=T0 + 360) == []
    _create(correlator.observe(REFUSED, now=T0 + 361))


def test_different_notes_or_objects_are_different_events() -> None:
    correlator = Correlator(instance="i")
    first = _create(correlator.observe(_placed(1), now=T0))
    second = _create(correlator.observe(_placed(2), now=T0))
    other = _create(correlator.observe(_placed(1, workload=CACHE), now=T0))
    names = {w.body["metadata"]["name"] for w in (first, second, other)}
    assert len(names) == 3  # same nanosecond, still unique


def test_ten_different_notes_of_one_reason_are_combined() -> None:
    """client-go's EventAggregator: from the 10th different note of one object and reason in
    10 minutes, notices fold into one combined Event counted in its series."""
    correlator = Correlator(instance="i")
    writes = [correlator.observe(_placed(i), now=T0 + i) for i in range(14)]
    assert all(isinstance(w, Create) and "combined" not in w.body["note"] for w in writes[:9])
    combined = _create(writes[9])
    assert combined.body["note"] == COMBINED + _placed(9).note
    assert "related" not in combined.body  # it stands for many pods
    assert _patch(writes[10]).name == combined.body["metadata"]["name"]
    assert writes[11:] == [None, None, None]
    assert correlator.counts.aggregated == 5
    # Another reason, or 10 minutes later, starts afresh.
    assert "combined" not in _create(correlator.observe(REFUSED, now=T0 + 15)).body["note"]
    later = _create(correlator.observe(_placed(99), now=T0 + 13 + 601))
    assert "combined" not in later.body["note"]


def test_a_combined_note_still_fits() -> None:
    correlator = Correlator(instance="i", tuning=Tuning(aggregate_after=1))
    made = notices.scale_down_refused(DB, note="x" * 2000)
    event = _create(correlator.observe(made, now=T0)).body
    assert len(event["note"].encode()) <= NOTE_MAX and event["note"].startswith(COMBINED)


def test_the_spam_filter_allows_a_burst_then_one_per_five_minutes_per_object_and_type() -> None:
    correlator = Correlator(instance="i", tuning=Tuning(aggregate_after=10_000))
    allowed = [correlator.observe(_placed(i), now=T0) for i in range(30)]
    assert sum(w is not None for w in allowed) == 25
    assert correlator.counts.filtered == 5
    # Other objects and other types have buckets of their own.
    assert correlator.observe(_placed(0, workload=CACHE), now=T0) is not None
    assert correlator.observe(REFUSED, now=T0) is not None  # a Warning about db
    assert correlator.observe(_placed(100), now=T0 + 299) is None
    assert correlator.observe(_placed(101), now=T0 + 300) is not None
    assert correlator.observe(_placed(102), now=T0 + 301) is None


def test_a_filtered_first_repeat_is_written_by_the_next_tick() -> None:
    correlator = Correlator(instance="i", tuning=Tuning(spam_burst=1))
    _create(correlator.observe(REFUSED, now=T0))
    assert correlator.observe(REFUSED, now=T0 + 1) is None  # no token for its first patch
    assert correlator.counts.filtered == 1
    (final,) = correlator.tick(now=T0 + 1 + 360)
    assert _patch(final).series["series"]["count"] == 2


def test_memory_is_bounded() -> None:
    """Each table is an LRU: past its size the least recently seen object is forgotten, so
    its next repeat starts a new Event instead of patching a series."""
    correlator = Correlator(instance="i", tuning=Tuning(cache_size=3))
    _create(correlator.observe(REFUSED, now=T0))
    _patch(correlator.observe(REFUSED, now=T0 + 1))
    for i in range(3):
        other = notices.statefulset("shop", f"s{i}")
        _create(correlator.observe(notices.scale_down_refused(other, note="n"), now=T0 + 2))
    _create(correlator.observe(REFUSED, now=T0 + 3))


def test_a_name_too_long_for_a_suffix_becomes_a_uuid() -> None:
    long = notices.statefulset("shop", "d" * 250)
    event = _create(
        Correlator(instance="i").observe(notices.scale_down_refused(long, note="n"), now=T0)
    ).body
    assert create_problems(event, namespace="shop") == []
    assert len(event["metadata"]["name"]) == 36


@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 2), st.floats(0, 900)), min_size=1, max_size=60
    )
)
def test_every_write_is_one_the_api_server_accepts(steps: list[tuple[int, int, float]]) -> None:
    """Whatever arrives when: every create is valid, every patch names an Event created
    before, keeps what the API server keeps immutable and raises the count."""
    correlator = Correlator(instance="i", tuning=Tuning(aggregate_after=3, spam_burst=4))
    made = [REFUSED, _placed(1), _placed(2), notices.members_moved(CACHE, note="moves 2")]
    events: dict[str, dict[str, object]] = {}
    counts: dict[str, int] = {}
    now = T0
    for which, ticks, gap in steps:
        now += gap
        writes = [w for w in [correlator.observe(made[which], now=now)] if w is not None]
        for _ in range(ticks):
            writes += correlator.tick(now=now)
        for write in writes:
            if isinstance(write, Create):
                name = write.body["metadata"]["name"]
                assert create_problems(write.body, namespace=write.namespace) == []
                assert name not in events
                events[name], counts[name] = write.body, 1
            else:
                old = events[write.name]
                assert update_problems(merged(old, write.series), old) == []
                assert write.series["series"]["count"] > counts[write.name]
                counts[write.name] = write.series["series"]["count"]
                last = dt.datetime.strptime(
                    write.series["series"]["lastObservedTime"], "%Y-%m-%dT%H:%M:%S.%fZ"
                ).replace(tzinfo=dt.UTC)
                assert last.timestamp() <= now + 1e-3
