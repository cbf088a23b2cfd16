"""A set placed before stszone, then a node loses its zone label: the guard judges by facts.

Skipped unless ``STSZONE_E2E_KUBECONFIG`` names a cluster; see ``conftest.py`` for the knobs
and for what is created and always deleted. This test also removes one node's zone label for
a while and always puts it back (``ExitStack``), whether it passes, fails or is interrupted.

With k zones Z0..Zk-1, the set ``before`` has pods labelled ``stszone.io/skip=true`` (so
stszone leaves them alone, as it would pods created before it was installed), placed node by
node: ordinal i in Zi for i < k-1, ordinal k-1 in Z0 on another node N, ordinal k in Zk-1 --
a placement the rule (ordinal i in Zi mod k) would not have made. Scaling k+1 -> k removes
ordinal k, the only pod in Zk-1. Then N loses its zone label:

- the pod on N keeps the zone label Kubernetes copied onto it when it was bound
  (PodTopologyLabels, 1.33+): it is still located in Z0, and the scale-down is refused;
- without that label too (a cluster before 1.33), its zone is *unknown*: the scale-down is
  still refused, naming N. Filling the unknown zone in from the rule (Zk-1 for ordinal k-1)
  would have let it through and emptied Zk-1.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest

from tests.e2e.kube import (
    ZONE_KEY,
    Cluster,
    Kubectl,
    KubectlError,
    place_on,
    skipped_statefulset,
    wait_for,
)
from tests.e2e.pinning import nodes_by_zone

NAME = "before"


@contextmanager
def _unlabelled(kubectl: Kubectl, node: str, zone: str) -> Iterator[None]:
    """Remove ``node``'s zone label; put it back however the block ends."""
    with ExitStack() as stack:
        # Registered first: a removal that times out client-side may still have happened.
        stack.callback(kubectl.run, "label", "node", node, f"{ZONE_KEY}={zone}", "--overwrite")
        kubectl.run("label", "node", node, f"{ZONE_KEY}-")
        yield


def _refusal(kubectl: Kubectl, replicas: int) -> str:
    """The webhook's refusal of a server-side dry-run scale to ``replicas``.

    Once the guard has seen the set as placed, every such scale-down empties a zone whatever
    its view holds of the label changes: it must refuse it at every moment, so an allowed one
    fails the test at once.
    """
    try:
        kubectl.run("scale", "statefulset", NAME, f"--replicas={replicas}", "--dry-run=server")
    except KubectlError as err:
        return err.stderr
    raise AssertionError(f"the guard allowed scaling {NAME} to {replicas}, emptying a zone")


def test_scale_down_relying_on_a_node_that_lost_its_zone_label_is_refused(
    cluster: Cluster,
) -> None:
    """Placed before stszone, then a node loses its label: the guard never fills the zone in
    from the rule; the scale-down that would empty a zone is refused, naming the node."""
    if not cluster.schedulable:
        pytest.skip(f"zones {', '.join(cluster.zones)} do not all have schedulable nodes")
    zones, k = cluster.zones, len(cluster.zones)
    nodes = nodes_by_zone(cluster.kubectl, zones)
    first = nodes[zones[0]]
    if len(first) < 2:
        pytest.skip(f"zone {zones[0]} needs two schedulable nodes (one keeps its label)")
    # Ordinal k-1 goes to Z0 on another node than ordinal 0.
    homes = [nodes[zones[i]][0] for i in range(k - 1)] + [first[-1], nodes[zones[-1]][0]]
    kubectl = cluster.kubectl
    kubectl.create(skipped_statefulset(cluster, NAME))
    for ordinal, node in enumerate(homes):
        place_on(cluster, NAME, ordinal, node)
    lost, moved, node = zones[-1], f"{NAME}-{k - 1}", homes[k - 1]
    wanted = f"would drop zone {lost} (ordinal {k} is its only pod)"

    def set_up() -> bool:
        """Whether the guard refuses already, with every label in place."""
        try:
            kubectl.run("scale", "statefulset", NAME, f"--replicas={k}", "--dry-run=server")
        except KubectlError as err:
            return wanted in err.stderr
        return False

    # Ordinal k holds Zk-1 once the view has its pod's binding; until then the rule puts it
    # in Z0 and the scale-down keeps every zone held, so an allowed answer is waited out here
    # (from here on the guard must refuse at every moment).
    wait_for(f"the guard to see {NAME}-{k} in {lost}", set_up, timeout=cluster.timeout)

    with _unlabelled(kubectl, node, zones[0]):
        # A cluster before 1.33: the pod has no topology label of its own either.
        kubectl.run("label", "pod", moved, f"{ZONE_KEY}-")
        why = f"node {node} has no label {ZONE_KEY}"
        # The webhook's view follows the watches: wait until its answer shows both changes.
        wait_for(f"the guard to see {node} unlabelled", lambda: why in _refusal(kubectl, k),
                 timeout=cluster.timeout)  # fmt: skip
        with pytest.raises(KubectlError) as refused:
            kubectl.run("scale", "statefulset", NAME, f"--replicas={k}")
        message = refused.value.stderr
        assert (
            wanted in message and f"unless kept ordinal {k - 1}, whose zone is unknown" in message
        )
        assert why in message and "stszone.io/allow-zone-loss" in message
        assert kubectl.get("statefulset", NAME)["spec"]["replicas"] == k + 1

        # 1.33+: the label Kubernetes copied onto the pod at binding still locates it in Z0.
        kubectl.run("label", "pod", moved, f"{ZONE_KEY}={zones[0]}", "--overwrite")

        def located_by_its_label() -> bool:
            return why not in _refusal(kubectl, k)

        wait_for("the guard to read the pod's own label", located_by_its_label,
                 timeout=cluster.timeout)  # fmt: skip
        with pytest.raises(KubectlError) as refused:
            kubectl.run("scale", "statefulset", NAME, f"--replicas={k}")
        assert wanted in refused.value.stderr and "unknown" not in refused.value.stderr
        assert kubectl.get("statefulset", NAME)["spec"]["replicas"] == k + 1
    labels = kubectl.get("node", node)["metadata"]["labels"]
    assert labels.get(ZONE_KEY) == zones[0], "the node's zone label is back"
