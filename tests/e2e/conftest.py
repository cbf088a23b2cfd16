"""End-to-end fixtures: a real cluster, the webhook running here, and URL-based registrations.

Run with ``STSZONE_E2E_KUBECONFIG=~/.kube/config python -m pytest tests/e2e`` (skipped when
the variable is unset). Other knobs, all optional:

- ``STSZONE_E2E_HOST``: the address the API server reaches this machine at (default
  127.0.0.1, right when the API server runs on this host; for kind use the Docker network
  gateway, e.g. 172.18.0.1). The serving certificate is issued for it.
- ``STSZONE_E2E_BIND``: where the webhook listens (default: the host when it is an IP, else
  0.0.0.0).
- ``STSZONE_E2E_ZONES``: the zone list (default: the zones of the schedulable nodes; with fewer
  than two, three made-up zones, and the scheduling test fails: only a missing
  ``STSZONE_E2E_KUBECONFIG`` skips).
- ``STSZONE_E2E_TIMEOUT``: seconds to wait for pods to be created and scheduled (default 180).
- ``STSZONE_E2E_IMAGE``: the test pods' image (default registry.k8s.io/pause:3.10).

Set up in this order and torn down in reverse, whether the tests pass, fail or are
interrupted: (1) namespace ``stszone-e2e-<run>`` labelled ``stszone.io/enabled=true``;
(2) the webhook process; (3) Mutating/ValidatingWebhookConfigurations ``stszone-e2e-<run>``
that match only that namespace. So the configurations go first, the namespace last. Everything
carries the label ``stszone.io/e2e=<run>``; after a run killed with SIGKILL, clean up with
``kubectl delete mutatingwebhookconfigurations,validatingwebhookconfigurations,namespaces
-l stszone.io/e2e``.
"""

from __future__ import annotations

import base64
import functools
import os
import secrets
import shutil
import signal
import warnings
from collections.abc import Generator, Iterator
from contextlib import ExitStack
from pathlib import Path
from types import FrameType
from typing import Any, TypedDict

import pytest

from tests.e2e.kube import (
    RUN_LABEL,
    ZONE_KEY,
    Cluster,
    Kubectl,
    Obj,
    crd_file,
    established,
    wait_for,
)
from tests.e2e.server import is_ip, serving
from tests.process import tail
from webhook.config import DEFAULT_NAMESPACE
from webhook.install import registration
from webhook.install.certfiles import issue

MADE_UP_ZONES = ("e2e-zone-a", "e2e-zone-b", "e2e-zone-c")
LOG_KEY = pytest.StashKey[Path]()
STRIMZI_CRD_FILE = crd_file("STSZONE_STRIMZI_CRDS", "strimzi.yaml")
STRIMZI_CRDS = ("kafkanodepools.kafka.strimzi.io", "strimzipodsets.core.strimzi.io")


def schedulable_zones(kubectl: Kubectl) -> set[str]:
    """Zones of nodes that are Ready, not cordoned and not tainted against new pods."""
    zones = set()
    for node in kubectl.get("nodes")["items"]:
        spec, labels = node.get("spec", {}), node["metadata"].get("labels", {})
        conditions = node.get("status", {}).get("conditions", [])
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
        tainted = any(
            taint.get("effect") in ("NoSchedule", "NoExecute") for taint in spec.get("taints", [])
        )
        if ready and not tainted and not spec.get("unschedulable") and ZONE_KEY in labels:
            zones.add(labels[ZONE_KEY])
    return zones


def _choose_zones(kubectl: Kubectl) -> tuple[tuple[str, ...], bool]:
    available = schedulable_zones(kubectl)
    wanted = os.environ.get("STSZONE_E2E_ZONES", "")
    if wanted:
        zones = tuple(zone.strip() for zone in wanted.split(",") if zone.strip())
        return zones, set(zones) <= available
    if len(available) >= 2:
        return tuple(sorted(available)), True
    return MADE_UP_ZONES, False


def registrations(*, name: str, url: str, ca_bundle: str, namespace: str, run: str) -> list[Obj]:
    """Both configurations, calling ``url``, for ``namespace`` only, labelled with ``run``."""

    def client(path: str) -> Obj:
        return {"url": f"{url}{path}", "caBundle": ca_bundle}

    # The production rules and selectors, narrowed to the test namespace: a run can never
    # touch any other namespace of the cluster, whatever its labels.
    namespaces = registration.namespace_selector(DEFAULT_NAMESPACE, only=namespace)
    labels = {RUN_LABEL: run}
    return [
        registration.mutating(name, client=client("/mutate"), namespaces=namespaces, labels=labels),
        registration.validating(
            name, client=client("/validate"), namespaces=namespaces, labels=labels
        ),
    ]


def _probe_statefulset(run: str) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "probe", "labels": {RUN_LABEL: run}},
        "spec": {
            "serviceName": "probe",
            "replicas": 0,
            "selector": {"matchLabels": {"app": "probe"}},
            "template": {
                "metadata": {"labels": {"app": "probe"}},
                "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # A CI timeout sends SIGTERM; turning it into KeyboardInterrupt runs the teardown.
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session", autouse=True)
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt while any end-to-end test runs, so every fixture's
    teardown runs: not only ``cluster``'s, also the namespaces, webhook configurations,
    ClusterRoles, CRDs and processes of tests that never use it. Session-scoped and autouse,
    it is set up before and torn down after every other fixture of the directory."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.fixture(scope="session")
def kubectl() -> Kubectl:
    """kubectl on PATH, bound to ``$STSZONE_E2E_KUBECONFIG`` (no namespace)."""
    kubeconfig = os.path.expanduser(os.environ["STSZONE_E2E_KUBECONFIG"])
    if not Path(kubeconfig).is_file():
        pytest.fail(f"STSZONE_E2E_KUBECONFIG={kubeconfig} is not a file")
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.fail("the end-to-end tests need kubectl on PATH")
    return Kubectl(binary, kubeconfig)


@pytest.fixture(scope="session")
def strimzi_crds(kubectl: Kubectl) -> None:
    """The Strimzi CRDs, applied when missing (before the webhook starts when asked first)."""
    have = {i["metadata"]["name"] for i in kubectl.get("customresourcedefinitions")["items"]}
    if not set(STRIMZI_CRDS) <= have:
        if not STRIMZI_CRD_FILE.is_file():
            pytest.fail(f"the cluster lacks the Strimzi CRDs and {STRIMZI_CRD_FILE} does not exist")
        kubectl.run("apply", "--server-side", "-f", str(STRIMZI_CRD_FILE))
    for crd in STRIMZI_CRDS:
        wait_for(
            f"CRD {crd} to be established", functools.partial(established, kubectl, crd), timeout=60
        )


def opted_in_namespace(name: str, run: str) -> Obj:
    """A namespace labelled ``stszone.io/enabled=true`` and with the run's label."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"stszone.io/enabled": "true", RUN_LABEL: run}},
    }


@pytest.fixture(scope="session")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config, kubectl: Kubectl
) -> Iterator[Cluster]:
    """The namespace, the running webhook and its registrations; all removed afterwards."""
    kubeconfig = kubectl.kubeconfig
    host = os.environ.get("STSZONE_E2E_HOST", "127.0.0.1")
    bind = os.environ.get("STSZONE_E2E_BIND", host if is_ip(host) else "0.0.0.0")
    zones, schedulable = _choose_zones(kubectl)
    run = secrets.token_hex(3)
    name = f"stszone-e2e-{run}"
    work = tmp_path_factory.mktemp("e2e")
    certs = work / "certs"
    issue(certs, service="stszone-e2e", namespace=name, **_san(host))
    log = work / "serve.log"
    pytestconfig.stash[LOG_KEY] = log
    with ExitStack() as stack:
        # Each deletion is registered before its creation: a create that times out
        # client-side may still have happened.
        stack.callback(delete_namespace, kubectl, name)
        kubectl.create(opted_in_namespace(name, run))
        webhook = stack.enter_context(
            serving(
                host=host, bind=bind, kubeconfig=kubeconfig, certs=certs, zones=zones, work=work
            )
        )
        url = webhook.url
        ca_bundle = base64.b64encode((certs / "ca.crt").read_bytes()).decode()
        for config in registrations(
            name=name, url=url, ca_bundle=ca_bundle, namespace=name, run=run
        ):
            stack.callback(kubectl.delete, config["kind"].lower(), name)
            kubectl.create(config)
        scoped = kubectl.within(name)
        _wait_until_called(scoped, run=run, url=url, log=log)
        yield Cluster(
            kubectl=scoped,
            namespace=name,
            run=run,
            zones=zones,
            schedulable=schedulable,
            image=os.environ.get("STSZONE_E2E_IMAGE", "registry.k8s.io/pause:3.10"),
            timeout=float(os.environ.get("STSZONE_E2E_TIMEOUT", "180")),
            webhook=webhook,
        )


def delete_namespace(kubectl: Kubectl, name: str) -> None:
    """Delete the test namespace and wait (bounded) until it is gone; a stuck one is reported."""
    kubectl.delete("namespace", name)
    try:
        wait_for(
            f"namespace {name} to be deleted", lambda: kubectl.gone("namespace", name), timeout=180
        )
    except AssertionError as err:
        warnings.warn(f"{err}; check `kubectl get namespace {name} -o yaml`", stacklevel=1)


class _Names(TypedDict, total=False):
    """The subject alternative names ``issue`` takes: IP addresses or DNS names."""

    ips: list[str]
    dns: list[str]


def _san(host: str) -> _Names:
    return {"ips": [host]} if is_ip(host) else {"dns": [host]}


def _wait_until_called(kubectl: Kubectl, *, run: str, url: str, log: Path) -> None:
    """Registrations take effect within moments; prove it with a dry run the webhook mutates."""

    def mutated() -> bool:
        created = kubectl.create(_probe_statefulset(run), dry_run=True)
        return "stszone.io/zones" in created["metadata"].get("annotations", {})

    try:
        wait_for("the API server to call the webhook", mutated, timeout=60)
    except AssertionError as err:
        raise AssertionError(
            f"{err}\nIs {url} reachable from the API server? Set STSZONE_E2E_HOST to this "
            f"machine's address as the API server sees it.\nwebhook log:\n{tail(log)}"
        ) from None


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by the mark added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test of this directory is marked ``e2e``, and skipped unless a cluster is named:
    a module cannot forget either, and ``python -m pytest`` with no cluster passes."""
    here = Path(__file__).parent
    skip = pytest.mark.skip(
        reason="end-to-end tests need a cluster: set STSZONE_E2E_KUBECONFIG to its kubeconfig"
    )
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.e2e)
            if not os.environ.get("STSZONE_E2E_KUBECONFIG"):
                item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the webhook's log to every failing end-to-end test."""
    report = yield
    log = item.config.stash.get(LOG_KEY, None)
    if report.failed and log is not None:
        report.sections.append(("stszone webhook log (last lines)", tail(log)))
    return report
