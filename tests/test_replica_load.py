"""The end-to-end load's accounting of a killed replica (``tests/e2e/replicas.py``), checked
without a cluster: which failed calls a SIGKILL may cost, of the load and of the StatefulSet
controller, and one lost call counted once.

The messages are kubectl's in the lab (kube-apiserver v1.36) when a replica behind the Service
address was SIGKILLed under load; each connection named was one the killed process held.
"""

from __future__ import annotations

import json
from typing import ClassVar

import pytest

from tests.e2e.kube import Kubectl, KubectlError
from tests.e2e.replicas import FailedCreate, Failure, Load

_POST = 'failed to call webhook: Post "https://stszone.stszone-replicas-b9e61b.svc:443/validate?timeout=5s"'
_CALLING = f'Internal error occurred: failed calling webhook "validate.stszone.io": {_POST}'
#: ``kubectl scale`` (the ``statefulsets/scale`` webhook) on a kept-alive connection of the
#: replica, taken up as it died.
BROKEN_PIPE = f"Error from server (InternalError): {_CALLING}: write tcp 127.0.0.1:46168->127.100.0.181:443: write: broken pipe"
#: ``kubectl create`` with its request unread by the replica as it died: over 300 characters,
#: its reason last, which is why the load keeps every message whole.
RESET_CREATE = f'Error from server (InternalError): error when creating "STDIN": {_CALLING}: read tcp 127.0.0.1:35122->127.100.0.134:443: read: connection reset by peer'
CLOSED_BEFORE_ANSWER = f"Error from server (InternalError): {_CALLING}: EOF"
#: What a replica that is up says when it refuses: not a connection lost.
DENIED = 'Error from server (Forbidden): admission webhook "validate.stszone.io" denied the request: scale-down of sigkill-3 from 6 to 2 would drop zone zone-c'
TIMED_OUT = f"Error from server (InternalError): {_CALLING}: context deadline exceeded"

#: The kill's span in the tests below: signalled at 100, the replacement Ready at 103.
SPAN = {"signalled": 100.0, "replaced": 103.0}


@pytest.mark.parametrize("message", [BROKEN_PIPE, RESET_CREATE, CLOSED_BEFORE_ANSWER])
@pytest.mark.parametrize(
    ("started", "ended"),
    [(99.5, 100.01), (100.2, 100.3), (102.9, 104.0)],
    ids=["under way at the kill", "just after", "begun before the replacement was Ready"],
)
def test_a_webhook_call_lost_on_the_killed_replica_is_its_cost(
    message: str, started: float, ended: float
) -> None:
    assert Failure(started, ended, message).cut_by_kill(**SPAN)


@pytest.mark.parametrize("message", [BROKEN_PIPE, RESET_CREATE])
@pytest.mark.parametrize(
    ("started", "ended"),
    [(99.0, 99.9), (103.5, 103.6)],
    ids=["ended before the signal", "begun once the replacement was Ready"],
)
def test_a_lost_connection_outside_the_kill_is_not_its_cost(
    message: str, started: float, ended: float
) -> None:
    assert not Failure(started, ended, message).cut_by_kill(**SPAN)


@pytest.mark.parametrize("message", [DENIED, TIMED_OUT, "a dry-run pod came back without its zone"])
def test_a_failure_of_another_kind_at_the_kill_is_not_its_cost(message: str) -> None:
    assert not Failure(100.1, 100.2, message).cut_by_kill(**SPAN)


#: A FailedCreate the StatefulSet controller recorded in the lab (kube-controller-manager
#: v1.36) for a pod whose webhook call a SIGKILL cut, as ``kubectl get events -o json`` has it
#: (its metadata left out; its times and count made those of the tests below).
CUT_CREATE = {
    "apiVersion": "v1",
    "count": 2,
    "eventTime": None,
    "firstTimestamp": "2026-12-08T01:00:10Z",
    "involvedObject": {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": "scaled-1",
        "namespace": "replicas-work-39b078",
    },
    "kind": "Event",
    "lastTimestamp": "2026-12-08T01:00:11Z",
    "message": (
        "Create Pod scaled-1-0 in StatefulSet scaled-1 failed error: Internal error occurred: "
        'failed calling webhook "mutate.stszone.io": failed to call webhook: Post '
        '"https://stszone.stszone-replicas-39b078.svc:443/mutate?timeout=5s": read tcp '
        "127.0.0.1:42776->127.100.0.106:443: read: connection reset by peer"
    ),
    "reason": "FailedCreate",
    "reportingComponent": "statefulset-controller",
    "source": {"component": "statefulset-controller"},
    "type": "Warning",
}
#: 2026-12-08T01:00:10.4Z and 01:00:13Z: signalled, and the replacement Ready (Unix time).
WALL = {"signalled": 1796691610.4, "replaced": 1796691613.0}


def test_a_failed_create_is_read_with_what_it_stands_for() -> None:
    """Its set, its whole message, the creates it counts, its first and last (Unix seconds)."""
    create = FailedCreate.of(CUT_CREATE)
    assert (create.statefulset, create.count) == ("scaled-1", 2)
    assert create.message == CUT_CREATE["message"]
    assert (create.first, create.last) == (1796691610.0, 1796691611.0)


@pytest.mark.parametrize(
    ("first", "last"),
    [("01:00:10", "01:00:10"), ("01:00:10", "01:00:13")],
    ids=["in the second of the signal", "up to the replacement"],
)
def test_a_create_cut_by_the_kill_is_its_cost(first: str, last: str) -> None:
    event = {**CUT_CREATE, "firstTimestamp": f"2026-12-08T{first}Z"}
    event["lastTimestamp"] = f"2026-12-08T{last}Z"
    assert FailedCreate.of(event).cut_by_kill(**WALL)


@pytest.mark.parametrize(
    ("first", "last"),
    [("01:00:09", "01:00:10"), ("01:00:11", "01:00:14")],
    ids=["failed before the signal", "failed again once the replacement was Ready"],
)
def test_a_create_failed_outside_the_kill_is_not_its_cost(first: str, last: str) -> None:
    event = {**CUT_CREATE, "firstTimestamp": f"2026-12-08T{first}Z"}
    event["lastTimestamp"] = f"2026-12-08T{last}Z"
    assert not FailedCreate.of(event).cut_by_kill(**WALL)


def test_a_create_refused_at_the_kill_is_not_its_cost() -> None:
    """A replica that is up refusing the pod (its set not yet in its view) is no lost call."""
    refused = (
        "Create Pod scaled-1-0 in StatefulSet scaled-1 failed error: admission webhook "
        '"mutate.stszone.io" denied the request: StatefulSet stszone-replicas/scaled-1 has not '
        "reached stszone's view yet"
    )
    assert not FailedCreate.of({**CUT_CREATE, "message": refused}).cut_by_kill(**WALL)


class _Cluster(Kubectl):
    """kubectl on a cluster of StatefulSets whose pods appear when scaled; the creation of
    ``load-5`` is cut once, as by a replica killed under it."""

    sets: ClassVar[dict[str, int]] = {}
    cut: ClassVar[set[str]] = set()

    def run(self, *args: str, stdin: str | None = None) -> str:
        verb = args[0]
        if verb == "create":
            assert stdin is not None
            obj = json.loads(stdin)
            name = obj["metadata"]["name"]
            if name in self.cut:
                self.cut.discard(name)
                raise KubectlError(args, 1, RESET_CREATE)
            self.sets[name] = 0
            return json.dumps({**obj, "metadata": {**obj["metadata"], "uid": f"uid-{name}"}})
        if verb == "scale":
            name = args[2]
            if name not in self.sets:
                raise KubectlError(
                    args,
                    1,
                    f'error: no objects passed to scale statefulsets.apps "{name}" not found',
                )
            self.sets[name] = 6
            return ""
        if verb == "get":
            name = args[3].removeprefix("app=")
            return json.dumps({"items": [{}] * self.sets.get(name, 0)})
        if verb == "delete":
            self.sets.pop(args[2], None)
            return ""
        raise AssertionError(f"unexpected kubectl {args}")


def test_a_creation_cut_by_the_kill_is_one_failure_of_the_load() -> None:
    """The set whose creation was cut is created by the next cycle, so the cycle that scales it
    finds it: one lost call, one failure."""
    _Cluster.sets.clear()
    _Cluster.cut.clear()
    _Cluster.cut.add("load-5")
    load = Load(_Cluster("kubectl", "kubeconfig"))
    load.prepare()
    results = [load.step() for _ in range(10)]
    assert [f.message for f in load.failures] == [RESET_CREATE]
    assert load.errors == [RESET_CREATE]
    assert results.count(False) == 1
    assert load.cycles == 10
    # Cycle 1 made load-5 before scaling load-1, which it left as it was; the cycles after it
    # each scaled and deleted their own set, load-5's included; the sets ahead wait.
    assert _Cluster.sets == {"load-owner": 0, "load-1": 0} | {f"load-{i}": 0 for i in range(10, 14)}
