"""The blast radius while stszone is down: only StatefulSet pods wait for it.

Both configurations are registered as production registers them (``webhook.install
.registration``, matchConditions included), narrowed to a namespace of this test, and pointed
at a URL where nothing listens: stszone is stopped, ``failurePolicy: Fail`` stands. The API
server itself must then create a Deployment's pod (the CEL condition skips the webhook) and
refuse a StatefulSet's pod (the condition sends it, and the call fails). Without
matchConditions both pods are refused.
"""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from tests.e2e.conftest import delete_namespace, opted_in_namespace, registrations
from tests.e2e.kube import RUN_LABEL, Kubectl, Obj, wait_for, workload
from tests.process import free_port
from webhook.install.certfiles import issue
from webhook.install.registration import MUTATE_NAME

TIMEOUT = float(os.environ.get("STSZONE_E2E_TIMEOUT", "180"))
IMAGE = os.environ.get("STSZONE_E2E_IMAGE", "registry.k8s.io/pause:3.10")


@pytest.fixture(scope="module")
def stopped(kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    """kubectl in an opted-in namespace whose stszone webhooks call a URL nobody answers."""
    run = secrets.token_hex(3)
    name = f"stszone-e2e-down-{run}"
    certs = tmp_path_factory.mktemp("down") / "certs"
    issue(certs, service="stszone-e2e", namespace=name, ips=["127.0.0.1"])
    ca_bundle = base64.b64encode((certs / "ca.crt").read_bytes()).decode()
    # A port nobody listens on: the API server's calls are refused at once.
    url = f"https://127.0.0.1:{free_port('127.0.0.1')}"
    with ExitStack() as stack:
        stack.callback(delete_namespace, kubectl, name)
        kubectl.create(opted_in_namespace(name, run))
        for config in registrations(
            name=name, url=url, ca_bundle=ca_bundle, namespace=name, run=run
        ):
            stack.callback(kubectl.delete, config["kind"].lower(), name)
            kubectl.create(config)
        yield kubectl.within(name)


def _pods(kubectl: Kubectl, app: str) -> list[Obj]:
    pods: list[Obj] = kubectl.get("pods", "-l", f"app={app}")["items"]
    return pods


def test_deployment_pods_are_created_and_statefulset_pods_wait_while_stszone_is_down(
    stopped: Kubectl,
) -> None:
    """With the webhooks registered and unanswered, a Deployment's pod is created; a
    StatefulSet's pod is refused by the API server's failed call to stszone."""
    # The StatefulSet object itself skips stszone (its own label), so it can be created while
    # stszone is down; its pods carry no skip label and are sent.
    stopped.create(
        workload("StatefulSet", "db", image=IMAGE, replicas=1, labels={"stszone.io/skip": "true"})
    )

    def refused() -> str | None:
        events = stopped.get("events", "--field-selector", "involvedObject.name=db")["items"]
        return next(
            (
                e["message"]
                for e in events
                if e.get("reason") == "FailedCreate" and MUTATE_NAME in e.get("message", "")
            ),
            None,
        )

    # First the refusal: it also proves the registrations are in force before the Deployment.
    message = wait_for("the StatefulSet's pod create to be refused", refused, timeout=TIMEOUT)
    assert "failed calling webhook" in message, message
    assert _pods(stopped, "db") == []

    stopped.create(
        workload("Deployment", "web", image=IMAGE, replicas=1, labels={RUN_LABEL: "blast-radius"})
    )
    pods = wait_for("the Deployment's pod", lambda: _pods(stopped, "web"), timeout=TIMEOUT)
    assert len(pods) == 1
    assert "stszone.io/zone" not in pods[0]["metadata"].get("annotations", {})
    assert _pods(stopped, "db") == []
