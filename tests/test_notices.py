"""Notices and the outbox: the catalogue of reasons, the note's cap, the bound, and dry runs."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from webhook.model import notices
from webhook.model.notices import CATALOGUE, NOTE_MAX, Notice, cap_note
from webhook.model.outbox import Outbox

DB = notices.statefulset("shop", "db", uid="63c2ba1b-f5ae-4329-907c-ceabb96215c7")


def _notice(i: int = 0) -> Notice:
    return notices.scale_down_refused(DB, note=f"scale-down of db from 6 to {i} would drop zone c")


def test_every_reason_is_camel_case_and_fits_the_api_servers_limit() -> None:
    for reason, kind in CATALOGUE.items():
        assert re.fullmatch(r"(?:[A-Z][a-z]+)+", reason), reason
        assert len(reason) <= 128 and len(kind.action) <= 128
        assert kind.type in ("Normal", "Warning")


def test_the_issues_decisions_each_have_their_reason() -> None:
    """Each decision users must be able to find later is a kind of its own, and those an
    operator should act on are Warnings."""
    pod = notices.pod("shop", "db-3")
    made = {
        "placed away, data": notices.placed_with_data(DB, pod=pod, note="n"),
        "runs nowhere": notices.nowhere_to_run(DB, pod=pod, note="n"),
        "refused scale-down": notices.scale_down_refused(DB, note="n"),
        "forced zone loss": notices.zone_loss_allowed(DB, note="n"),
        "zone on NotReady node": notices.zone_on_not_ready_node(DB, note="n", pod=pod),
        "claims deleted": notices.claims_deleted(
            DB, note="n", claim=notices.claim("shop", "data-db-3")
        ),
        "members moved": notices.members_moved(DB, note="n"),
    }
    assert len({n.reason for n in made.values()}) == len(made)
    warnings = {what for what, n in made.items() if n.type == "Warning"}
    assert warnings == {
        "runs nowhere",
        "refused scale-down",
        "forced zone loss",
        "zone on NotReady node",
    }
    assert {n.regarding for n in made.values()} == {DB}
    assert made["placed away, data"].related == pod
    assert made["refused scale-down"].related is None
    assert made["claims deleted"].related == notices.claim("shop", "data-db-3")
    assert {made["refused scale-down"].action, made["placed away, data"].action} == {
        "Refuse",
        "Place",
    }


def test_every_reason_of_the_catalogue_is_made_outside_it() -> None:
    """docs/events.md prints the catalogue as the Events users can alert on: a reason no
    module outside the catalogue makes (by its constant or its constructor) never fires."""
    root = Path(notices.__file__).parents[1]
    sources = [
        path.read_text()
        for path in root.rglob("*.py")
        if path != Path(notices.__file__) and "__pycache__" not in path.parts
    ]
    constants = {
        value: name
        for name, value in vars(notices).items()
        if name.isupper() and isinstance(value, str) and value in CATALOGUE
    }
    unmade = []
    for reason in CATALOGUE:
        constructor = re.sub(r"(?<!^)(?=[A-Z])", "_", reason).lower()
        used = re.compile(rf"\b(?:{constants[reason]}|{constructor})\b")
        if not any(used.search(text) for text in sources):
            unmade.append(reason)
    assert unmade == []


@given(st.text(max_size=1500))
def test_a_note_is_cut_to_1_kib_of_utf8_never_inside_a_character(text: str) -> None:
    capped = cap_note(text)
    assert len(capped.encode()) <= NOTE_MAX
    if len(text.encode()) <= NOTE_MAX:
        assert capped == text
    else:
        assert capped.endswith(notices.CUT)
        assert text.startswith(capped.removesuffix(notices.CUT))
        assert len(capped.encode()) > NOTE_MAX - len(notices.CUT) - 4


def test_constructors_cap_the_note() -> None:
    made = notices.scale_down_refused(DB, note="é" * 1000)
    assert len(made.note.encode()) <= NOTE_MAX and made.note.endswith(notices.CUT)


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 4)), max_size=40), st.integers(1, 12))
def test_a_dry_run_never_queues_and_the_bound_holds(
    posts: list[tuple[bool, int]], capacity: int
) -> None:
    """Whatever the mix of requests: dry runs add nothing, the outbox holds at most its
    capacity, and every notice of a real request is either queued or counted as dropped."""
    outbox = Outbox(capacity=capacity)
    real: list[Notice] = []
    for dry_run, count in posts:
        batch = [_notice(len(real) + i) for i in range(count)]
        outbox.post(batch, dry_run=dry_run)
        if not dry_run:
            real += batch
    assert len(outbox) <= capacity
    assert outbox.dry_runs == sum(dry for dry, _ in posts)
    queued = outbox.drain()
    assert queued == real[:capacity]  # oldest first; new ones are dropped when full
    assert outbox.dropped == len(real) - len(queued)
    assert outbox.posted == len(queued)
    assert len(outbox) == 0


def test_a_post_wakes_the_writer_and_a_dry_run_does_not() -> None:
    outbox = Outbox(capacity=2)
    woken: list[int] = []
    outbox.listen(lambda: woken.append(len(outbox)))
    outbox.post([_notice()], dry_run=True)
    outbox.post([], dry_run=False)
    assert woken == []
    outbox.post([_notice(1), _notice(2), _notice(3)], dry_run=False)
    assert woken == [2] and outbox.dropped == 1
    outbox.post([_notice(4)], dry_run=False)  # full: nothing queued, nobody woken
    assert woken == [2] and outbox.dropped == 2
