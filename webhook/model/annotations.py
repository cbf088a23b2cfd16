"""The ``stszone.io/*`` contract: annotation and label names, and their parsing.

A StatefulSet (or, as a fallback, its pod) carries its placement policy in annotations. This
module turns them into a frozen :class:`Declared`, and lists every problem in a malformed set
with an example of the right form, so that the validating webhook and the mutating webhook
report the same words. Every value is checked the way the API server will check what stszone
writes from it (:mod:`webhook.model.names`), whole-string: no value is trimmed, so a trailing
newline from a YAML block scalar is refused here rather than by the API server on every pod.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from webhook.model.names import is_dns_subdomain, is_label_value, is_qualified_name

PREFIX: Final = "stszone.io/"
ZONES: Final = "stszone.io/zones"
TOPOLOGY_KEY: Final = "stszone.io/topology-key"
MODE: Final = "stszone.io/mode"
SCHEDULER_NAME: Final = "stszone.io/scheduler-name"
NODE_LABEL: Final = "stszone.io/node-label"
STORAGE_CLASS_TEMPLATE: Final = "stszone.io/storage-class-template"
ALLOW_ZONE_LOSS: Final = "stszone.io/allow-zone-loss"
#: Recorded on pods and claims: the zone stszone chose.
ZONE: Final = "stszone.io/zone"
#: Pod label that makes stszone leave the pod alone.
SKIP: Final = "stszone.io/skip"
#: Namespace label that opts a namespace in.
ENABLED: Final = "stszone.io/enabled"

DEFAULT_TOPOLOGY_KEY: Final = "topology.kubernetes.io/zone"
DEFAULT_SCHEDULER: Final = "default-scheduler"
POD_INDEX_LABEL: Final = "apps.kubernetes.io/pod-index"

Mode = Literal["affinity", "scheduler", "node-ordinal"]
MODES: Final[tuple[Mode, ...]] = ("affinity", "scheduler", "node-ordinal")

#: The annotations a StatefulSet may carry, in the order messages list them.
POLICY_KEYS: Final = (
    ZONES,
    TOPOLOGY_KEY,
    MODE,
    SCHEDULER_NAME,
    NODE_LABEL,
    STORAGE_CLASS_TEMPLATE,
    ALLOW_ZONE_LOSS,
)
#: :data:`POLICY_KEYS` as a set; any other ``stszone.io/`` key is a typo.
STATEFULSET_KEYS: Final = frozenset(POLICY_KEYS)


@dataclass(frozen=True, slots=True)
class Declared:
    """The placement policy of one StatefulSet, parsed from its annotations."""

    zones: tuple[str, ...] | None = None
    topology_key: str = DEFAULT_TOPOLOGY_KEY
    mode: Mode = "affinity"
    scheduler_name: str | None = None
    node_label: str | None = None
    storage_class_template: str | None = None
    allow_zone_loss: bool = False


class InvalidAnnotations(ValueError):
    """The annotations are malformed; ``problems`` lists each one with an example of right."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def split_zones(text: str) -> tuple[str, ...]:
    """``"a, b,c"`` -> ``("a", "b", "c")``; empty entries are kept as ``""`` for checking.

    Only spaces around entries are dropped: a newline or tab stays in the entry, which then
    fails the label-value check (``"a,b,c\\n"`` from a YAML ``|`` block is refused, not fixed).
    """
    return tuple(part.strip(" ") for part in text.split(","))


def zone_list_problems(zones: tuple[str, ...], *, source: str) -> list[str]:
    """Problems with a zone list (empty, empty entries, invalid values, duplicates)."""
    example = f'{source}: "zone-a,zone-b,zone-c"'
    if zones == ("",):
        return [f"{source} is empty; list the zones in order, e.g. {example}"]
    problems: list[str] = []
    if "" in zones:
        problems.append(f"{source} has an empty entry; e.g. {example}")
    bad = [z for z in zones if z and not is_label_value(z)]
    if bad:
        problems.append(f"{source} has invalid zone name(s) {', '.join(map(repr, bad))}")
    dups = sorted(z for z, n in Counter(zones).items() if z and n > 1)
    if dups:
        problems.append(f"{source} lists {', '.join(dups)} more than once; each zone once")
    return problems


def parse_annotations(
    annotations: Mapping[str, str], *, keys: Collection[str] = STATEFULSET_KEYS
) -> Declared:
    """Parse the ``stszone.io/*`` annotations; :class:`InvalidAnnotations` lists every problem.

    ``keys``: the keys the object's kind reads; any other ``stszone.io/`` key is refused as
    unknown, and the refusal lists these (a KafkaNodePool reads fewer than a StatefulSet)."""
    problems: list[str] = []
    zones: tuple[str, ...] | None = None
    if ZONES in annotations:
        zones = split_zones(annotations[ZONES])
        problems += zone_list_problems(zones, source=ZONES)

    topology_key = annotations.get(TOPOLOGY_KEY, DEFAULT_TOPOLOGY_KEY)
    if not is_qualified_name(topology_key):
        problems.append(
            f"{TOPOLOGY_KEY} {topology_key!r} is not a node label key; "
            f'e.g. {TOPOLOGY_KEY}: "{DEFAULT_TOPOLOGY_KEY}"'
        )

    mode_text = annotations.get(MODE, "affinity")
    mode: Mode = "affinity"
    if mode_text in MODES:
        mode = mode_text
    else:
        problems.append(
            f"{MODE} {mode_text!r} is not a mode; use one of {', '.join(MODES)} "
            f'(e.g. {MODE}: "affinity")'
        )

    scheduler_name = annotations.get(SCHEDULER_NAME)
    if scheduler_name is not None and not is_dns_subdomain(scheduler_name):
        problems.append(
            f"{SCHEDULER_NAME} {scheduler_name!r} is not a valid scheduler name (a lower-case "
            f'DNS-1123 subdomain); e.g. {SCHEDULER_NAME}: "stszone-scheduler"'
        )

    node_label = annotations.get(NODE_LABEL)
    if node_label is not None and not is_qualified_name(node_label):
        problems.append(
            f"{NODE_LABEL} {node_label!r} is not a node label key; "
            f'e.g. {NODE_LABEL}: "example.io/node"'
        )
    if mode == "node-ordinal" and node_label is None:
        problems.append(
            f'{MODE}: "node-ordinal" needs {NODE_LABEL}, the node label whose value is the '
            f'ordinal; e.g. {NODE_LABEL}: "example.io/node"'
        )

    template = annotations.get(STORAGE_CLASS_TEMPLATE)
    if template is not None:
        problems += template_problems(template, zones=zones or ())

    allow_text = annotations.get(ALLOW_ZONE_LOSS, "false")
    if allow_text not in ("true", "false"):
        problems.append(
            f'{ALLOW_ZONE_LOSS} must be "true" or "false", got {allow_text!r}; '
            f'e.g. {ALLOW_ZONE_LOSS}: "true"'
        )

    unknown = sorted(k for k in annotations if k.startswith(PREFIX) and k not in keys)
    if unknown:
        known = ", ".join(sorted(keys))
        problems.append(f"unknown annotation(s) {', '.join(unknown)}; known: {known}")
    if problems:
        raise InvalidAnnotations(problems)
    return Declared(
        zones=zones,
        topology_key=topology_key,
        mode=mode,
        scheduler_name=scheduler_name,
        node_label=node_label,
        storage_class_template=template,
        allow_zone_loss=allow_text == "true",
    )


#: Annotations only one mode reads, and that mode.
READ_IN: Final[Mapping[str, Mode]] = {NODE_LABEL: "node-ordinal", SCHEDULER_NAME: "scheduler"}


def unread_warnings(name: str, annotations: Mapping[str, str]) -> tuple[str, ...]:
    """A warning for each annotation of set ``name`` its mode does not read: without one, a
    set given ``stszone.io/node-label`` and not the mode that reads it is placed by zone,
    silently. Allowed (a set switched out of a mode may keep its key for the way back). The
    mode is the one written, also beside other malformed annotations; a mode that is not one
    reads nothing, and the malformed annotations' warning or refusal names it. The admission
    warning, ``stszone audit`` and ``stszone explain`` all say these words."""
    written = annotations.get(MODE, "affinity")
    if written not in MODES:
        return ()
    return tuple(
        f"{name}: {key} {annotations[key]!r} does nothing in {written} mode, it is read "
        f'only with {MODE}: "{mode}"; set that mode, or remove {key}'
        for key, mode in READ_IN.items()
        if key in annotations and written != mode
    )


def read_annotations(annotations: Mapping[str, str]) -> tuple[Declared, tuple[str, ...]]:
    """(the policy, no problems) of well-formed annotations, else (the defaults, every problem):
    :func:`parse_annotations` for a caller that keeps the outcome rather than raising it."""
    try:
        return parse_annotations(annotations), ()
    except InvalidAnnotations as err:
        return Declared(), tuple(err.problems)


def template_problems(template: str, *, zones: tuple[str, ...]) -> list[str]:
    """Problems with a storage-class template, filled in for every zone of ``zones``.

    A StorageClass name is a DNS-1123 subdomain; the template is checked for each zone, since
    one zone name can break it where another does not (``Zone_A`` -> ``zone_a``). Without a
    list, a sample zone stands in.
    """
    example = f'e.g. {STORAGE_CLASS_TEMPLATE}: "ssd-{{zone}}"'
    if "{zone}" not in template:
        return [f"{STORAGE_CLASS_TEMPLATE} {template!r} has no {{zone}} placeholder; {example}"]
    bad = [
        (zone, name)
        for zone in dict.fromkeys(z for z in zones if z) or ("zone-a",)
        if not is_dns_subdomain(name := storage_class_for(template, zone))
    ]
    if not bad:
        return []
    shown = ", ".join(f"{zone} -> {name!r}" for zone, name in bad[:3])
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    return [
        f"{STORAGE_CLASS_TEMPLATE} {template!r} does not give a valid StorageClass name (a "
        f"lower-case DNS-1123 subdomain) for every zone: {shown}{more}; {example}"
    ]


def storage_class_for(template: str, zone: str) -> str:
    """Fill ``{zone}`` in a storage-class template (plain replace: no format-string surprises)."""
    return template.replace("{zone}", zone.lower())


def stszone_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """Only the ``stszone.io/`` policy keys of an annotation map (``stszone.io/zone`` excluded)."""
    return {k: v for k, v in annotations.items() if k in STATEFULSET_KEYS}


def misspelt_keys(annotations: Mapping[str, str]) -> tuple[str, ...]:
    """The ``stszone.io/`` keys of an annotation map that are no policy key (a misspelt one,
    ``stszone.io/allow-zone-los``), sorted: what a record keeps of them, their names alone (a
    value may be large, and nothing reads it)."""
    keys = (k for k in annotations if k.startswith(PREFIX) and k not in STATEFULSET_KEYS)
    return tuple(sorted(map(sys.intern, keys)))


def misspelt_warnings(
    name: str, *, keys: Sequence[str], known: Collection[str] = STATEFULSET_KEYS
) -> tuple[str, ...]:
    """The warning ``stszone audit`` and ``stszone explain`` give of a workload whose
    annotations hold misspelt ``keys`` (:func:`misspelt_keys`; ``known``: the keys its kind
    reads). Its pods and its ``/scale`` read the other keys as if they were alone, but an
    update of it reads them as malformed (:func:`parse_annotations` refuses unknown keys): it
    is guarded on the defaults, and one that changes a ``stszone.io/`` key is refused."""
    if not keys:
        return ()
    return (
        f"{name}: unknown annotation(s) {', '.join(keys)}: an update keeping them is judged on "
        "the default policy and one changing stszone.io/ annotations is refused; correct or "
        f"remove them (known: {', '.join(sorted(known))})",
    )


def prefixed_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """Every ``stszone.io/`` key of an annotation map, a misspelt one too: an update that adds
    or changes one changes what the object declares (:func:`stszone_annotations` keeps only the
    known keys)."""
    return {k: v for k, v in annotations.items() if k.startswith(PREFIX)}
