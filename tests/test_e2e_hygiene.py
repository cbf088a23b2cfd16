"""The end-to-end tests' own cleanup, checked without a cluster: what they start or create is
stopped or deleted however a step fails (``tests/e2e/``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from inspect import unwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
import yaml

from tests.e2e import (
    replicas,
    strimzilab,
    test_helm,
    test_kruise,
    test_prometheus_component,
    test_rebalance,
)
from tests.e2e.kube import Kubectl, KubectlError
from tests.hang import HANG_GUARD
from tests.process import free_port
from tests.rendered import ROOT

#: Stays up, never Ready (nothing answers its metrics URL), and says who it is.
NEVER_READY = (
    "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(300)"
)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_restart_that_never_becomes_ready_leaves_no_process_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica started again by ``Process.restart`` that fails to become Ready is stopped
    before the failure is raised: the caller only knows the old process, which has exited."""
    monkeypatch.setattr(replicas, "READY_TIMEOUT", 1.0)
    pidfile = tmp_path / "pid"
    cmd = [sys.executable, "-c", NEVER_READY, str(pidfile)]
    log = tmp_path / "replica.log"
    with log.open("wb") as out:
        first = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{free_port()}/metrics"
    process = replicas.Process("replica-a", first, url, log, cmd, dict(os.environ))
    try:
        with pytest.raises(AssertionError, match="to be Ready"):
            process.restart(signal.SIGKILL)
        again = int(pidfile.read_text())
        assert again != first.pid
        assert _gone(again), "the restarted process was left running"
    finally:
        first.kill()
        first.wait()
        if pidfile.exists() and not _gone(pid := int(pidfile.read_text())):
            os.kill(pid, signal.SIGKILL)


SIGNALLED = """
import os
import signal
import time
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def made() -> object:
    yield None
    Path(os.environ["CLEANED"]).write_text("cleaned")


def test_terminated(made: object) -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
"""


def test_a_sigterm_during_any_e2e_test_runs_its_fixtures_teardown(tmp_path: Path) -> None:
    """``timeout`` in .ci/run stops the end-to-end pass with SIGTERM: the fixtures of a test
    that does not use ``cluster`` (a namespace, webhook configurations, ClusterRoles) are torn
    down too, as the conftest's autouse fixture turns the signal into KeyboardInterrupt."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text("from tests.e2e.conftest import *  # noqa: F403\n")
    (suite / "test_signalled.py").write_text(SIGNALLED)
    cleaned = tmp_path / "cleaned"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)],
        cwd=suite,
        env={**os.environ, "PYTHONPATH": str(ROOT), "CLEANED": str(cleaned)},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert cleaned.is_file(), f"exit {done.returncode}:\n{done.stdout}{done.stderr}"
    assert done.returncode != 0, done.stdout


FAKE_KUBECTL = """
import json
import os
import sys

import yaml

KIND = "customresourcedefinition.apiextensions.k8s.io"
state = os.environ["FAKE_KUBECTL_STATE"]
with open(state) as f:
    crds = set(json.load(f))
args = sys.argv[1:]
for flag in ("--kubeconfig", "--request-timeout", "--namespace"):
    if flag in args:
        at = args.index(flag)
        del args[at : at + 2]


def name_of(ref):
    return ref.rpartition("/")[2]


def save():
    with open(state, "w") as f:
        json.dump(sorted(crds), f)


verb = args[0]
if verb == "get":
    if args[2] not in crds:
        sys.exit(f'Error from server (NotFound): {KIND} "{args[2]}" not found')
    if "-o" in args and args[args.index("-o") + 1] == "json":  # a CRD the apply made serves
        established = {"type": "Established", "status": "True"}
        crd = {"metadata": {"name": args[2]}, "status": {"conditions": [established]}}
        print(json.dumps(crd))
    else:
        print(f"{KIND}/{args[2]}")
elif verb == "apply":
    with open(args[args.index("-f") + 1]) as f:
        docs = list(yaml.safe_load_all(f))
    for doc in docs:
        name = doc["metadata"]["name"]
        if name == os.environ.get("FAKE_KUBECTL_REFUSE"):
            save()
            sys.exit(f"error: Apply failed with 1 conflict: conflict with kubectl-client-side-apply: {name}")
        crds.add(name)
        print(f"{KIND}/{name}")
    save()
elif verb == "delete":
    crds.discard(name_of(args[1]))
    save()
else:
    sys.exit(f"fake kubectl: {args}")
"""

#: Three CRDs, in the order kubectl applies them.
MONITORING = (
    "servicemonitors.monitoring.coreos.com",
    "podmonitors.monitoring.coreos.com",
    "prometheusrules.monitoring.coreos.com",
)


class FakeCluster:
    """A kubectl on PATH that keeps a cluster's CRDs in a file, and a CRDs file to apply."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.state = tmp_path / "crds.json"
        self.state.write_text("[]")
        binary = tmp_path / "kubectl"
        binary.write_text(f"#!{sys.executable}\n{FAKE_KUBECTL}")
        binary.chmod(0o755)
        self.kubectl = Kubectl(str(binary), str(tmp_path / "kubeconfig"))
        self.crd_file = tmp_path / "monitoring.yaml"
        docs = [
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": name},
            }
            for name in MONITORING
        ]
        self.crd_file.write_text(yaml.safe_dump_all(docs))
        monkeypatch.setenv("FAKE_KUBECTL_STATE", str(self.state))
        self.monkeypatch = monkeypatch

    def has(self, *names: str) -> None:
        self.state.write_text(json.dumps(list(names)))

    def refuse(self, name: str) -> None:
        self.monkeypatch.setenv("FAKE_KUBECTL_REFUSE", name)

    def crds(self) -> set[str]:
        found: list[str] = json.loads(self.state.read_text())
        return set(found)


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    return FakeCluster(tmp_path, monkeypatch)


def _crd_fixtures(fake: FakeCluster, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Each module's CRD fixture (its generator), reading the fake's CRDs file."""
    monkeypatch.setattr(test_prometheus_component, "CRD_FILE", fake.crd_file)
    monkeypatch.setattr(test_kruise, "CRD_FILE", fake.crd_file)
    monkeypatch.setattr(test_kruise, "CRD", MONITORING[0])
    monkeypatch.setattr(test_helm, "CRD_FILES", {MONITORING[0]: fake.crd_file})
    cluster = SimpleNamespace(kubectl=fake.kubectl)
    return {
        "prometheus component": lambda: unwrap(test_prometheus_component.crds)(fake.kubectl),
        "kruise": lambda: unwrap(test_kruise.kruise_crd)(cluster),
        "helm": lambda: unwrap(test_helm.crds)(fake.kubectl),
    }


@pytest.mark.parametrize("module", ["prometheus component", "kruise", "helm"])
def test_a_crds_apply_that_fails_half_way_leaves_no_crd(
    fake: FakeCluster, monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    """kubectl applies a file's CRDs one by one: when the last is refused, the ones it made
    are deleted all the same (the deletions are registered before the apply)."""
    fake.refuse(MONITORING[2])
    setup = _crd_fixtures(fake, monkeypatch)[module]()
    with pytest.raises(KubectlError, match="conflict"):
        next(setup)
    assert fake.crds() == set(), "left behind by a failed apply"


@pytest.mark.parametrize("module", ["prometheus component", "kruise", "helm"])
def test_a_crd_the_cluster_had_before_is_not_deleted(
    fake: FakeCluster, monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    """Only the CRDs the run created go afterwards: one of the file the cluster already served
    (and its objects, which go with it) stays."""
    fake.has(MONITORING[1])
    setup = _crd_fixtures(fake, monkeypatch)[module]()
    next(setup)
    assert fake.crds() == set(MONITORING)
    with pytest.raises(StopIteration):
        next(setup)
    assert fake.crds() == {MONITORING[1]}


class _Refusing(Kubectl):
    """kubectl whose ``uncordon`` of one node fails; every call recorded."""

    calls: ClassVar[list[tuple[str, ...]]] = []

    def run(self, *args: str, stdin: str | None = None) -> str:
        self.calls.append(args)
        if args == ("uncordon", "node-a1"):
            raise KubectlError(
                args, 1, "Unable to connect to the server: net/http: TLS handshake timeout"
            )
        return ""


def test_a_failed_uncordon_does_not_leave_the_other_nodes_cordoned() -> None:
    """test_rebalance cordons every zone but one to steer the scheduler: each node it cordoned
    is uncordoned afterwards, even when another node's uncordon fails."""
    kubectl = _Refusing("kubectl", "kubeconfig")
    kubectl.calls.clear()
    cordons = test_rebalance.Cordons(kubectl, {"node-a1": "a", "node-a2": "a", "node-b1": "b"})
    cordons.only("b")
    assert kubectl.calls == [("cordon", "node-a1"), ("cordon", "node-a2")]
    with pytest.raises(KubectlError, match="TLS handshake timeout"):
        cordons.release()
    assert ("uncordon", "node-a2") in kubectl.calls, kubectl.calls


class _RefusingDelete(Kubectl):
    """kubectl whose deletion of one PersistentVolume fails; every call recorded."""

    calls: ClassVar[list[tuple[str, ...]]] = []

    def run(self, *args: str, stdin: str | None = None) -> str:
        self.calls.append(args)
        if args[:3] == ("delete", "persistentvolume", "ns-1"):
            raise KubectlError(args, 1, "Unable to connect to the server: i/o timeout")
        return ""


def test_a_failed_volume_deletion_does_not_keep_the_others() -> None:
    """The Strimzi tests' volumes (``strimzilab.pvs``) are each deleted, even when another's
    deletion fails."""
    kubectl = _RefusingDelete("kubectl", "kubeconfig")
    kubectl.calls.clear()
    volumes = unwrap(strimzilab.pvs)(None, kubectl)
    next(volumes).extend(["ns-1", "ns-3"])
    with pytest.raises(KubectlError, match="i/o timeout"):
        next(volumes)
    deleted = [call[2] for call in kubectl.calls if call[:2] == ("delete", "persistentvolume")]
    assert sorted(deleted) == ["ns-1", "ns-3"], kubectl.calls


def test_the_e2e_tests_read_a_crds_established_condition_in_one_place() -> None:
    """Only ``tests/e2e/kube.py`` reads a CRD's Established condition (``kube.established``),
    so a fix to that reading (a CRD whose status has no conditions yet, say) reaches every wait
    for a CRD: the Strimzi CRDs' fixture and ``applied_crds`` alike."""
    readers = sorted(
        path.name
        for path in (ROOT / "tests" / "e2e").glob("*.py")
        if '"Established"' in path.read_text()
    )
    assert readers == ["kube.py"]
