"""Offline cluster view: a saved ``kubectl get ... -A -o yaml`` list (:data:`SAVE` says what).

The file ``-`` is standard input, as in kubectl's ``-f -``. Accepts a ``List`` (``kind: List``
or any ``*List``), a multi-document YAML stream, or a JSON file, with items of kinds Node,
PersistentVolume, PersistentVolumeClaim, StatefulSet (``apps`` and OpenKruise's), KafkaNodePool,
Pod and Namespace, each read at the apiVersion the live view lists it at (an item with none, by
its kind alone: :func:`webhook.model.tables.table_of`); other kinds and groups are ignored, and
so are Pods owned by neither a StatefulSet nor a KafkaNodePool.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from webhook.errors import BadObject, ConfigError, one_line
from webhook.model.nodepools import pool_of, poolpod_info
from webhook.model.records import Info, PodInfo
from webhook.model.store import Store
from webhook.model.tables import EXTRACTORS, TABLES, Table, table_of


def flatten(
    doc: Any, *, item_kind: str = "", api_version: str = "", depth: int = 3
) -> Iterator[Mapping[str, Any]]:
    """The objects of documents and lists; items of a typed list (``PodList``) carry no
    ``kind`` (nor ``apiVersion``) of their own, so they get the list's: an ``apps.kruise.io``
    StatefulSet is not an ``apps/v1`` one.

    Arrays and lists are unpacked ``depth`` deep (the documents, a document that is a JSON
    array, a List in it) and no deeper: YAML aliases make a small file a list of lists of
    billions of leaves, which no saved cluster is."""
    if depth < 0:
        return
    if isinstance(doc, Mapping):
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
            inner = "" if kind == "List" else kind.removesuffix("List")
            version = doc.get("apiVersion") if inner else ""
            for item in doc["items"]:
                yield from flatten(
                    item,
                    item_kind=inner,
                    api_version=version if isinstance(version, str) else "",
                    depth=depth - 1,
                )
        elif item_kind and "kind" not in doc:
            made = {**doc, "kind": item_kind}
            if api_version and "apiVersion" not in doc:
                made["apiVersion"] = api_version
            yield made
        else:
            yield doc
    elif isinstance(doc, list):
        for item in doc:
            yield from flatten(item, depth=depth - 1)


#: The cluster file that is standard input: ``kubectl get ... -o json | stszone audit --cluster -``.
STDIN: Final = "-"
#: The kinds a saved cluster lists only where their CRDs are served (KafkaNodePools, Advanced
#: StatefulSets), as ``kubectl api-resources -o name`` names them.
SERVED_ONLY: Final = ("kafkanodepools.kafka.strimzi.io", "statefulsets.apps.kruise.io")
#: The command that saves a cluster file, said alike by every command's help and refusals:
#: every namespace (``-A``), and the Namespace objects, whose opt-in label the view reads.
#: kubectl refuses the whole command when one of its resource types is not served, so the
#: kinds of SERVED_ONLY are named only when ``kubectl api-resources`` lists them (each with
#: its comma); ``statefulsets.apps`` is spelled out, as OpenKruise's CRD claims the short name
#: ``sts`` too.
SAVE: Final = (
    'kubectl get "$(kubectl api-resources -o name | grep -xF'
    + "".join(f" -e {kind}" for kind in SERVED_ONLY)
    + " | tr '\\n' ,)nodes,pv,pvc,statefulsets.apps,pods,namespaces\" -A"
)


def read_documents(path: Path) -> list[Any]:
    """The YAML (or JSON) documents of ``path`` (``-``: standard input); :class:`ConfigError`
    when it cannot be read."""
    stdin = str(path) == STDIN
    name = f"{path} (standard input)" if stdin else str(path)
    try:
        # Bytes, not text: the YAML reader takes UTF-8 and, by their byte order mark, UTF-16
        # files (PowerShell's `>` writes them), and refuses bytes that are neither.
        if stdin:
            docs = list(yaml.safe_load_all(sys.stdin.buffer))
        else:
            with path.open("rb") as handle:
                docs = list(yaml.safe_load_all(handle))
    except OSError as err:
        raise ConfigError(f"cannot read cluster file {name}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"cluster file {name} is not YAML or JSON: {one_line(err)}") from None
    except RecursionError:  # PyYAML composes nested collections by recursion
        raise ConfigError(
            f"cluster file {name} nests lists or mappings too deeply to be a saved cluster; "
            f"save it with {SAVE} -o yaml"
        ) from None
    if not _holds_cluster(docs):
        # An empty file (kubectl failed, its `>` stayed) or another file (a kubeconfig) would
        # be an empty cluster: every audit passed, every review allowed.
        what = _kinds(docs)
        into = "and pipe it in" if stdin else f"> {path}"
        raise ConfigError(
            f"cluster file {name} holds no List and no Node, PersistentVolume(Claim), "
            f"StatefulSet, Pod or Namespace ({what}); save one with {SAVE} -o yaml {into}"
        )
    return docs


def _holds_cluster(docs: list[Any]) -> bool:
    """Whether ``docs`` hold a list (``items: []`` is a cluster with none) or an object of a
    kind the view reads."""
    for doc in docs:
        kind = doc.get("kind") if isinstance(doc, Mapping) else None
        if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
            return True
    return any(table_of(item) for item in flatten(docs) if isinstance(item, Mapping))


def _kinds(docs: list[Any]) -> str:
    """What ``docs`` hold instead, for the refusal."""
    if all(doc is None for doc in docs):
        return "it is empty"
    kinds = sorted({str(d.get("kind")) for d in docs if isinstance(d, Mapping) and "kind" in d})
    if kinds == ["Config"]:
        return "it is a kubeconfig: give that with --kubeconfig"
    return f"kinds: {', '.join(kinds)}" if kinds else "no Kubernetes object"


def load_store(path: Path, *, zones: tuple[str, ...] | None = None) -> Store:
    """Read ``path`` into a :class:`Store`; raise :class:`ConfigError` when it cannot be read."""
    return store_from_objects(read_documents(path), zones=zones, source=str(path))


def objects_labels(item: Any) -> dict[str, str]:
    """``metadata.labels`` of a raw object ({} when it has none or they are malformed)."""
    meta = item.get("metadata") if isinstance(item, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


def store_from_objects(
    docs: Iterable[Any],
    *,
    zones: tuple[str, ...] | None = None,
    source: str = "cluster file",
    namespaces_listed: bool = False,
) -> Store:
    """A Store holding the given raw API objects or lists of them (every table marked loaded).

    With no Namespace among them, opt-in is unknown (every set counts) unless
    ``namespaces_listed`` says the opted-in namespaces were listed and there are none.
    """
    tables: dict[Table, list[Info]] = {table: [] for table in TABLES}
    for index, item in enumerate(flatten(list(docs))):
        table = table_of(item)
        if table is None:
            continue
        try:
            info = EXTRACTORS[table](item)
            if isinstance(info, PodInfo) and info.owner is None:
                if pool_of(objects_labels(item)) is not None:  # a Kafka node pool's broker
                    tables["poolpods"].append(poolpod_info(item))
                continue
        except BadObject as err:
            raise ConfigError(
                f"{source}: item {index} ({item.get('kind')}): {err.message}"
            ) from None
        tables[table].append(info)
    store = Store(zones=zones)
    for table, infos in tables.items():
        if table == "namespaces" and not infos and not namespaces_listed:
            continue  # no Namespace objects: opt-in is unknown, not "nothing opted in"
        store.replace(table, infos)
    return store
