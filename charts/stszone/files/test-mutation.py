# `helm test`: a dry-run StatefulSet create in an opted-in namespace must come back with the
# zone list stszone's mutating webhook writes. Run by the test hook's pod (templates/tests/),
# with its ServiceAccount; elsewhere, with $KUBECONFIG. Exit 0 when mutated, else 1 saying why.
import os
import sys

from kubernetes import client, config
from kubernetes.client.rest import ApiException

namespace = os.environ["STSZONE_TEST_NAMESPACE"]
expected = os.environ.get("STSZONE_TEST_ZONES", "")
logs = "kubectl -n {} logs deployment/{}".format(
    os.environ.get("STSZONE_NAMESPACE", "stszone-system"),
    os.environ.get("STSZONE_DEPLOYMENT", "stszone"),
)
try:
    config.load_incluster_config()
except config.ConfigException:
    config.load_kube_config()
labels = {"app": "stszone-helm-test"}
statefulset = {
    "apiVersion": "apps/v1",
    "kind": "StatefulSet",
    "metadata": {"name": "stszone-helm-test"},
    "spec": {
        "replicas": 0,
        "serviceName": "stszone-helm-test",
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
        },
    },
}
try:
    made = client.AppsV1Api().create_namespaced_stateful_set(namespace, statefulset, dry_run="All")
except ApiException as err:
    sys.exit(
        f"the dry-run create of StatefulSet stszone-helm-test in namespace {namespace} failed "
        f"({err.status} {err.reason}): {err.body}; if stszone refused it, `{logs}` says why"
    )
zones = (made.metadata.annotations or {}).get("stszone.io/zones")
if not zones:
    sys.exit(
        f"the API server admitted StatefulSet stszone-helm-test in namespace {namespace} without "
        "the stszone.io/zones annotation, so stszone's mutating webhook was not called or did "
        "not answer: check `kubectl get mutatingwebhookconfiguration` and its namespaceSelector "
        f"(the namespace is labelled stszone.io/enabled=true), and `{logs}`"
    )
if expected and zones != expected:
    sys.exit(f"stszone wrote stszone.io/zones={zones}, but the chart's zones value is {expected}")
print(
    f"stszone answered: StatefulSet stszone-helm-test in {namespace} got stszone.io/zones={zones}"
)
