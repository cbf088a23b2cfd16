"""Warnings are short: under 120 characters where they can be, never over 256.

The API server's advice for admission warnings: "Limit warnings to 120 characters if possible.
Warnings over 256 characters and large numbers of warnings may be truncated." Every warning
stszone gives is produced here twice, once with the names a cluster usually has and once with
the longest names Kubernetes allows (63-character zones and label names, 253-character volume
and scheduler names); long ordinal lists are summarised with a count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests import builders as b
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.rules.admission import Endpoint
from webhook.rules.decision import (
    CUT,
    WARNING_MAX,
    WARNING_TARGET,
    Decision,
    ZoneAnnotation,
    allow,
    edit,
    refuse,
)
from webhook.wire import review
from webhook.wire.review import Answer


@dataclass(frozen=True)
class Names:
    """The names one run of the scenarios uses."""

    sts: str
    zones: tuple[str, str, str]
    #: A zone outside the set's list.
    other: str
    volume: str
    node: str
    label: str
    scheduler: str


USUAL = Names(
    "db", ("zone-a", "zone-b", "zone-c"), "zone-x", "pv-7f3a", "node-1", "example.io/node", "zoned"
)
LONGEST = Names(
    sts="s" * 52,  # pods are named <set>-<ordinal>, and their hash label must fit 63 characters
    zones=("a" * 63, "b" * 63, "c" * 63),
    other="x" * 63,
    volume="v" * 253,
    node="n" * 253,
    label=f"{'p' * 200}.example.io/{'l' * 63}",
    scheduler="c" * 253,
)


def ask(endpoint: str, obj: dict[str, Any], store: Any, **kw: Any) -> Answer:
    request = review.from_dict(b.review(obj, **kw))
    which: Endpoint = "mutate" if endpoint == "mutate" else "validate"
    return review.answer(which, request, store=store, defaults=Defaults())


def scenarios(n: Names) -> dict[str, Answer]:
    """One outcome per kind of warning stszone gives, with names ``n``."""
    a, bz, c = n.zones
    listed = {"stszone.io/zones": f"{a},{bz},{c}"}
    sts = b.statefulset(n.sts, annotations=listed, replicas=4)
    nodes = [b.node(f"{z[:40]}-node", z) for z in n.zones] + [b.node(n.node, a)]
    pods = [b.sts_pod(n.sts, o, node=f"{z[:40]}-node") for o, z in enumerate([a, bz, c, bz])]
    volume = [b.pvc(f"data-{n.sts}-0", volume=n.volume), b.pv(n.volume, c)]
    store = store_from_objects([*nodes, sts, *pods, *volume])
    out: dict[str, Answer] = {}
    out["data gravity"] = ask("mutate", b.sts_pod(n.sts, 0), store)
    out["too few replicas"] = ask(
        "validate", b.statefulset(n.sts, annotations=listed, replicas=1), store
    )
    empty = store_from_objects([b.node(n.node, a)])
    out["zone without nodes"] = ask("validate", sts, empty)

    def update(replicas: int, annotations: dict[str, str], store: Any, *, old: Any = sts) -> Answer:
        new = b.statefulset(n.sts, annotations=annotations, replicas=replicas)
        return ask("validate", new, store, operation="UPDATE", old=old)

    many = {**sts, "spec": {**sts["spec"], "replicas": 2000}}
    out["zone list change"] = update(2000, {"stszone.io/zones": f"{c},{bz},{a}"}, store, old=many)
    out["allow-zone-loss"] = update(1, {**listed, "stszone.io/allow-zone-loss": "true"}, store)
    out["scale to zero"] = update(0, listed, store)
    unlisted = store_from_objects(
        [*nodes, b.node("x-node", n.other), sts, *pods, b.sts_pod(n.sts, 4, node="x-node")]
    )
    five = {**sts, "spec": {**sts["spec"], "replicas": 5}}
    out["unlisted zone"] = update(4, listed, unlisted, old=five)
    bare = b.node(n.node + "x", None)  # no zone label: the pod on it is of unknown zone
    ghost = store_from_objects([*nodes, bare, sts, *pods, b.sts_pod(n.sts, 4, node=n.node + "x")])
    out["unknown, not needed"] = update(4, listed, ghost, old=five)
    broken = b.statefulset(n.sts, annotations={**listed, "stszone.io/mode": "Affinity"}, replicas=4)
    out["malformed, unchanged"] = ask("validate", broken, store, operation="UPDATE", old=broken)
    template = {**listed, "stszone.io/storage-class-template": "ssd-{zone}"}
    claims = store_from_objects([b.statefulset(n.sts, annotations=template), b.pv(n.volume, c)])
    claim = b.pvc(f"data-{n.sts}-1")
    claim["spec"]["storageClassName"] = "standard"
    out["class replaced"] = ask("mutate", claim, claims)
    claim["spec"]["storageClassName"] = ""
    out["class kept"] = ask("mutate", claim, claims)
    named = b.pvc(f"data-{n.sts}-1", volume=n.volume)
    out["named volume"] = ask("mutate", named, claims)
    out["named volume unseen"] = ask(
        "mutate", b.pvc(f"data-{n.sts}-1", volume=n.volume + "x"), claims
    )
    mode = {**listed, "stszone.io/mode": "scheduler", "stszone.io/scheduler-name": n.scheduler}
    sched = store_from_objects([b.statefulset(n.sts, annotations=mode)])
    out["other scheduler"] = ask(
        "mutate", b.sts_pod(n.sts, 0, scheduler="x" + n.scheduler[1:]), sched
    )
    ordinal = {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": n.label, **listed}
    brokers = [b.node(f"{n.node[:200]}{i}", a, labels={n.label: "1"}) for i in range(3)]
    by_node = store_from_objects([b.statefulset(n.sts, annotations=ordinal), *brokers])
    out["node label missing"] = ask("mutate", b.sts_pod(n.sts, 0), by_node)
    out["node label on several"] = ask("mutate", b.sts_pod(n.sts, 1), by_node)
    pinned = b.node(n.node, c, labels={n.label: "2"})
    excluding = b.zone_affinity([("topology.kubernetes.io/zone", "NotIn", [c])])
    by_zone = store_from_objects([b.statefulset(n.sts, annotations=ordinal), pinned, *volume])
    out["node in an excluded zone"] = ask(
        "mutate", b.sts_pod(n.sts, 2, affinity=excluding), by_zone
    )
    far = store_from_objects(
        [
            b.statefulset(n.sts, annotations=ordinal),
            b.node(n.node, a, labels={n.label: "0"}),
            *volume,
        ]
    )
    out["volume far from its node"] = ask("mutate", b.sts_pod(n.sts, 0), far)
    bound = b.statefulset(n.sts, annotations=listed, replicas=4)
    bound["spec"]["template"]["spec"]["nodeName"] = n.node[:-1] + "9"  # no such node
    out["template bound to a missing node"] = ask(
        "validate",
        b.scale(n.sts, replicas=3),
        store_from_objects([*nodes, bound]),
        operation="UPDATE",
        old=b.scale(n.sts, replicas=4),
    )
    racks = store_from_objects([b.node(n.node, a, labels={n.label: "r1"})], zones=n.zones)
    out["key from nodes"] = ask(
        "mutate", b.statefulset(n.sts, annotations={"stszone.io/topology-key": n.label}), racks
    )
    return out  # fmt: skip


def warnings_of(names: Names) -> list[tuple[str, str]]:
    found = [(what, w) for what, outcome in scenarios(names).items() for w in outcome.warnings]
    silent = sorted({*scenarios(names)} - {what for what, _ in found})
    assert not silent, f"scenarios that gave no warning: {silent}"
    return found


def test_usual_names_give_warnings_under_120_characters() -> None:
    """With the names clusters usually have, every warning fits in 120 characters."""
    long = [(what, len(w), w) for what, w in warnings_of(USUAL) if len(w) >= WARNING_TARGET]
    assert not long


def _answered(answer: Answer) -> tuple[bool, int, tuple[str, ...], int]:
    """What an answer decides, apart from the words: allowed, code, kinds of edits, warnings."""
    kinds = tuple(type(edit).__name__ for edit in answer.decision.edits)
    return answer.allowed, answer.code, kinds, len(answer.warnings)


def test_the_longest_names_change_no_answer_only_the_warnings_length() -> None:
    """With the longest names Kubernetes allows, every scenario is answered as with the usual
    names: allowed, with the same kinds of edits and as many warnings, so a long but valid name
    is never refused, nor a warning lost for it. Only their length differs, and the outcomes
    cut each at 256 characters (:func:`test_every_outcome_cuts_a_warning_at_256_characters`)."""
    usual, longest = scenarios(USUAL), scenarios(LONGEST)
    assert {what: _answered(a) for what, a in longest.items()} == {
        what: _answered(a) for what, a in usual.items()
    }


def test_long_ordinal_lists_are_summarised_with_a_count() -> None:
    """2000 ordinals change zone: a few are named, the rest counted."""
    (moved,) = scenarios(USUAL)["zone list change"].warnings
    # Of ordinals 0-999, those at 0 and 2 mod 3 swap zone-a and zone-c: 667, less ordinal 0,
    # whose volume is in zone-c, where the new list puts it anyway.
    assert moved == (
        "db: new stszone.io/zones moves 666 ordinal(s) of the first 1000 when re-created: "
        "2 (zone-c->zone-a) and 665 more"
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda w: allow(warnings=(w,)),
        lambda w: refuse("no", warnings=(w,)),
        lambda w: edit(ZoneAnnotation("a"), warnings=(w,)),
        lambda w: allow().with_warnings((w,)),
    ],
)
def test_every_outcome_cuts_a_warning_at_256_characters(make: Callable[[str], Decision]) -> None:
    """The backstop: whatever builds an outcome, a warning over 256 characters is cut, visibly."""
    (cut,) = make("x" * 300).warnings
    assert len(cut) == WARNING_MAX and cut.endswith(" [...]")
    assert make("y" * WARNING_MAX).warnings == ("y" * WARNING_MAX,)


def test_a_missing_node_warning_keeps_its_fix_with_63_character_names() -> None:
    """A scale-down of a set whose template binds its pods to a node that does not exist
    warns so; with a 63-character set name and node name the warning still fits the API
    server's 256 characters whole, so the fix it gives is never what a cut removes."""
    sts = b.statefulset("s" * 63, annotations={"stszone.io/zones": "a,b,c"}, replicas=3)
    sts["spec"]["template"]["spec"]["nodeName"] = "n" * 63
    store = store_from_objects([b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c"), sts])
    body = b.scale("s" * 63, replicas=2)
    answer = ask("validate", body, store, operation="UPDATE", old=b.scale("s" * 63, replicas=3))
    (warned,) = [w for w in answer.warnings if "spec.nodeName" in w]
    assert len(warned) <= WARNING_MAX and not warned.endswith(CUT), warned
    assert f"correct or remove spec.nodeName {'n' * 63}" in warned, warned
