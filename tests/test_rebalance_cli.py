"""`stszone rebalance` as users meet it: the dry-run table and JSON, --apply against the fake
API server, the --move-data confirmation, and the refusals (exit 2)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import poolsim as sim
from tests import rebalancing as r
from tests.fakeapi import FakeApi
from tests.kubeconfig import write_kubeconfig
from webhook.cli import main
from webhook.cli.rebalance import confirm
from webhook.cli.rebalance_text import progress_printer
from webhook.cluster.rebalance import Event
from webhook.cluster.snapshot import from_objects
from webhook.errors import ConfigError
from webhook.rules.rebalance import chosen, plan

#: The seed's story (see test_rebalance_plan.py): db-2 pinned by pv-2 in zone-b.
SEED = {0: "a1", 1: "a2", 2: "b1", 3: "c1", 4: "c2", 5: "b2"}


def seed_objects() -> list[dict[str, Any]]:
    extra = [r.claim("data-db-2", "pv-2"), r.volume("pv-2", "zone-b", "data-db-2")]
    return r.cluster(SEED, sts=r.statefulset(6, templates=("data",)), extra=extra)


@pytest.fixture
def seed_file(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"kind": "List", "items": seed_objects()}))
    return path


def test_dry_run_table_from_a_saved_cluster(
    seed_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table, the notes, the kubectl commands in order, and exit 1 (db-2 stays)."""
    assert main(["rebalance", "--cluster", str(seed_file), "--timeout", "120"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[:17] == [
        "StatefulSet shop/db: zones zone-a,zone-b,zone-c, replicas 6",
        "  ORDINAL  POD   NODE  NOW     TARGET  CLASS           ACTION",
        "  0        db-0  a1    zone-a  zone-a  in place        -",
        "  1        db-1  a2    zone-a  zone-b  movable         step 1: evict",
        "  2        db-2  b1    zone-b  zone-c  pinned by data  keep (needs --move-data)",
        "  3        db-3  c1    zone-c  zone-a  movable         step 2: evict",
        "  4        db-4  c2    zone-c  zone-b  movable         step 4: evict",
        "  5        db-5  b2    zone-b  zone-c  movable         step 3: evict",
        "  2: its volume pv-2 is in zone-b",
        "  2: it moves only with --move-data, which deletes its data",
        "  The same with kubectl, in order (--apply also checks, before each step, that the",
        "  set is whole and the pod unchanged, and after it, that the new pod is in its zone):",
        "    # step 1: db-1 zone-a -> zone-b",
        "    kubectl create --raw /api/v1/namespaces/shop/pods/db-1/eviction -f - <<< "
        """'{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"db-1","namespace":"shop"},"""
        """"deleteOptions":{"preconditions":{"uid":"uid-db-1"}}}'""",
        "    until kubectl -n shop get pod db-1 -o jsonpath='{.metadata.uid}' | grep -qv "
        "'^uid-db-1$'; do sleep 1; done",
        "    kubectl -n shop wait pod/db-1 --for=condition=Ready --timeout=120s",
        "    kubectl -n shop wait statefulset/db --for=jsonpath='{.status.availableReplicas}'=6 "
        "--timeout=120s",
    ]
    assert [line for line in lines if line.startswith("    # step")] == [
        "    # step 1: db-1 zone-a -> zone-b",
        "    # step 2: db-3 zone-c -> zone-a",
        "    # step 3: db-5 zone-b -> zone-c",
        "    # step 4: db-4 zone-c -> zone-b",
    ]
    assert lines[-1] == (
        "Dry run: 4 move(s); 1 ordinal(s) stay outside their zone; run again with --apply to "
        "make them."
    )


def test_dry_run_json_with_move_data_shows_the_claim_it_would_delete(
    seed_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """-o json for scripts; with --move-data nothing is left, so exit 0, and nothing applied."""
    assert main(["rebalance", "--cluster", str(seed_file), "--move-data", "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (db,) = report["statefulsets"]
    assert (report["complete"], report["moveData"], report["applied"]) == (True, True, None)
    row = db["ordinals"][2]
    assert (row["class"], row["claims"]) == ("pinned by data", ["data-db-2"])
    assert row["action"].endswith("delete data-db-2, evict")
    step = next(s for s in db["steps"] if s["ordinal"] == 2)
    assert step["commands"][0] == "kubectl -n shop delete pvc data-db-2 --wait=false"
    assert step["commands"][1].startswith("kubectl create --raw /api/v1/namespaces/shop/pods/db-2")


def test_nothing_to_do_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every ordinal in its zone: exit 0 and a sentence saying so."""
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(r.cluster({0: "a1", 1: "b1", 2: "c1"})))
    assert main(["rebalance", "--cluster", str(path)]) == 0
    assert (
        capsys.readouterr()
        .out.rstrip()
        .endswith("Nothing to do: every ordinal is in its rule zone.")
    )


def test_a_set_that_cannot_be_planned_is_counted_not_nothing_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One set in place, one whose topology key no node carries: exit 1, and the summary names
    the set it could not plan instead of saying every ordinal is in its rule zone."""
    rack = {"stszone.io/topology-key": "example.io/rack"}
    racked = r.statefulset(0, name="racked", annotations=rack)
    del racked["metadata"]["annotations"]["stszone.io/zones"]
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(r.cluster({0: "a1", 1: "b1", 2: "c1"}, extra=[racked])))
    assert main(["rebalance", "--cluster", str(path)]) == 1
    lines = capsys.readouterr().out.rstrip().splitlines()
    assert (
        "  PROBLEM: no zone list: no stszone.io/zones on it, no --zones, and no node labelled "
        "example.io/rack"
    ) in lines
    assert lines[-2:] == [
        "1 set(s) could not be planned (PROBLEM above): StatefulSet shop/racked.",
        "Nothing to do in the other sets: every ordinal is in its rule zone.",
    ]


def _pools_file(tmp_path: Path) -> Path:
    """db in place, and a KafkaNodePool "brokers" in shop (opted in), in kafka (not opted in)
    and in kube-system (never touched, even labelled)."""
    pools = [
        sim.pool_object("brokers", replicas=3, node_ids=[0, 1, 2], namespace=ns)
        for ns in ("shop", "kafka", "kube-system")
    ]
    objects = [
        *r.cluster({0: "a1", 1: "b1", 2: "c1"}),
        r.namespace("kafka", enabled=False),
        r.namespace("kube-system"),
        *pools,
    ]
    path = tmp_path / "pools.json"
    path.write_text(json.dumps({"kind": "List", "items": objects}))
    return path


@pytest.mark.parametrize(
    ("args", "named"),
    [([], ["shop/brokers"]), (["-n", "kafka"], []), (["--statefulset", "shop/db"], [])],
)
def test_the_kafka_note_names_only_the_pools_the_selection_covers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], named: list[str]
) -> None:
    """Pools of namespaces stszone does not serve are none of its business, and --statefulset
    names one set, never a pool."""
    assert main(["rebalance", "--cluster", str(_pools_file(tmp_path)), *args]) == 0
    out = capsys.readouterr().out
    noted = [line for line in out.splitlines() if line.startswith("KafkaNodePool")]
    assert noted == [
        f"KafkaNodePool {name}: brokers are not moved: a broker's data moves with Kafka's "
        "partition reassignment (Cruise Control), not with its pod; see docs/kafka.md"
        for name in named
    ]


def test_json_names_the_kafka_pools_the_table_notes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """-o json says what the table's last line says: which pools are left out, and why."""
    path = str(_pools_file(tmp_path))
    assert main(["rebalance", "--cluster", path]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("KafkaNodePool")]
    assert main(["rebalance", "--cluster", path, "-o", "json"]) == 0
    (pool,) = json.loads(capsys.readouterr().out)["kafkaNodePools"]
    assert (pool["namespace"], pool["name"]) == ("shop", "brokers")
    assert line == f"KafkaNodePool shop/brokers: {pool['note']}"
    assert pool["note"].startswith("brokers are not moved: ")


def test_statefulset_naming_a_kafka_pool_says_it_is_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--statefulset shop/brokers names a KafkaNodePool: the refusal says what it is and why
    it has no plan, not that nothing of that name exists."""
    argv = ["rebalance", "--cluster", str(_pools_file(tmp_path)), "--statefulset", "shop/brokers"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "shop/brokers is a KafkaNodePool: brokers are not moved: " in err
    assert "not found" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--apply"], "--cluster FILE only plans; --apply needs a live cluster"),
        (["-n", "dev", "--statefulset", "shop/db"], "-n dev and --statefulset shop/db disagree"),
        (["--statefulset", "shop/nope"], "StatefulSet shop/nope was not found"),
    ],
)
def test_refusals_exit_2(
    seed_file: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """Flags that cannot go together: exit 2 with the reason, nothing planned."""
    assert main(["rebalance", "--cluster", str(seed_file), *args]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


def test_no_cluster_at_all_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(name, raising=False)
    assert main(["rebalance"]) == 2
    assert "rebalance needs a cluster" in capsys.readouterr().err


def test_move_data_confirmation_names_the_set_and_the_ordinals() -> None:
    """Asked on a terminal (only "yes" goes on); refused without one unless --yes."""
    snap = from_objects(seed_objects())
    result = plan(snap.store, snap.state, sets=chosen(snap.store), move_data=True)
    asked: list[str] = []
    out = io.StringIO()

    def answer(text: str) -> Callable[[str], str]:
        def ask(prompt: str) -> str:
            asked.append(prompt)
            return text

        return ask

    confirm(result, ask=answer("yes"), interactive=True, out=out)
    assert asked == ["Delete the data of shop/db ordinal(s) 2? Type yes: "]
    assert "  shop/db ordinal 2: data-db-2" in out.getvalue()
    with pytest.raises(ConfigError, match="not confirmed: nothing was changed"):
        confirm(result, ask=answer("y"), interactive=True, out=out)
    with pytest.raises(ConfigError, match="confirm with --yes"):
        confirm(result, ask=answer("yes"), interactive=False, out=out)


async def test_apply_against_the_api_converges_with_json_progress(tmp_path: Path) -> None:
    """--apply -o json: the eviction hook plays the controller; progress goes to stderr as JSON
    lines (not a terminal), the document to stdout, exit 0."""
    async with FakeApi(token="t", fixtures=False) as api:
        for obj in r.cluster({0: "a1", 1: "a2", 2: "c1"}):
            api.put(
                obj["kind"].lower() + "s" if obj["kind"] != "StatefulSet" else "statefulsets", obj
            )

        def controller(namespace: str, name: str) -> None:
            ordinal = int(name.rpartition("-")[2])
            node = {0: "a1", 1: "b1", 2: "c1"}[ordinal]
            api.put("pods", r.pod(ordinal, node, uid=f"{name}-again"))

        api.on_evict.append(controller)
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server=api.url, token="t", ca=api.ca)
        argv = ["rebalance", "--kubeconfig", str(kubeconfig), "-n", "shop", "--apply", "-o", "json"]
        out, err = io.StringIO(), io.StringIO()

        def run() -> int:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                return main(argv)

        assert await asyncio.to_thread(run) == 0
        lists = [s for s in api.requests if s.verb == "list" and s.resource == "pods"]
    report = json.loads(out.getvalue())
    assert report["applied"] == {
        "converged": True,
        "stopped": None,
        "interrupted": False,
        "statefulsets": [
            {
                "apiGroup": "apps",
                "namespace": "shop",
                "name": "db",
                "moved": [1],
                "alreadyInPlace": [],
                "left": [],
                "stopped": None,
            }
        ],
    }
    events = [json.loads(line) for line in err.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["step", "evicted", "moved"]
    assert events[-1]["message"] == "db-1 is Ready on b1 in zone-b"
    assert lists[0].namespace == "shop"  # -n lists one namespace


async def test_apply_lists_and_evicts_in_the_context_named_by_context(tmp_path: Path) -> None:
    """--context names the cluster rebalance plans from and evicts in, as it does for audit:
    the kubeconfig's current-context, another cluster holding a set of the same name, sees
    no request at all."""
    async with FakeApi(token="t", fixtures=False) as named, FakeApi(fixtures=False) as other:
        for api in (named, other):
            for obj in r.cluster({0: "a1", 1: "a2", 2: "c1"}):
                kind = obj["kind"]
                api.put("statefulsets" if kind == "StatefulSet" else kind.lower() + "s", obj)

        def controller(namespace: str, name: str) -> None:
            named.put("pods", r.pod(1, "b1", uid=f"{name}-again"))

        named.on_evict.append(controller)
        path = write_kubeconfig(tmp_path / "kubeconfig", server=named.url, token="t", ca=named.ca)
        config = yaml.safe_load(path.read_text())
        config["clusters"].append({"name": "other", "cluster": {"server": other.url}})
        config["contexts"].append(
            {"name": "other", "context": {"cluster": "other", "user": "tester"}}
        )
        config["current-context"] = "other"
        path.write_text(yaml.safe_dump(config))
        argv = ["rebalance", "--kubeconfig", str(path), "--context", "fake", "-n", "shop"]

        def run() -> int:
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                return main([*argv, "--apply", "--timeout", "3", "-o", "json"])

        assert await asyncio.to_thread(run) == 0
    assert other.requests == []
    assert [s.name for s in named.seen("pods", "evict")] == ["db-1"]


async def test_move_data_without_a_terminal_needs_yes(tmp_path: Path) -> None:
    """Live --apply --move-data with stdin not a terminal: exit 2, nothing evicted."""
    async with FakeApi(token="t", fixtures=False) as api:
        for obj in seed_objects():
            kind = obj["kind"]
            resource = {"StatefulSet": "statefulsets", "PersistentVolumeClaim": "persistentvolumeclaims",
                        "PersistentVolume": "persistentvolumes"}.get(kind, kind.lower() + "s")  # fmt: skip
            api.put(resource, obj)
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server=api.url, token="t", ca=api.ca)
        argv = ["rebalance", "--kubeconfig", str(kubeconfig), "--apply", "--move-data"]
        err = io.StringIO()

        def run() -> int:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                return main(argv)

        assert await asyncio.to_thread(run) == 2
        assert api.seen("pods", "evict") == []
    assert "confirm with --yes" in err.getvalue()


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_progress_is_one_line_per_step() -> None:
    """On a terminal the step's line is rewritten (carriage return, clear) until it ends."""
    screen = Terminal()
    report = progress_printer(screen)
    for kind, message in (("step", "db-1 a -> b: waiting"), ("evicted", "db-1 a -> b: evicted"),
                          ("moved", "db-1 is Ready on n2 in b"), ("step", "db-3 c -> a: waiting")):  # fmt: skip
        report(Event(kind, "shop", "db", message, 1, 1, 2))  # type: ignore[arg-type]
    lines = [
        line.rpartition("\r")[2].replace("\x1b[K", "") for line in screen.getvalue().split("\n")
    ]
    assert lines == ["[shop/db 1/2] db-1 is Ready on n2 in b", "[shop/db 1/2] db-3 c -> a: waiting"]
