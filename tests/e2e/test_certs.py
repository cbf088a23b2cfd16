"""Self-managed certificates on a real control plane: from no Secret and an empty caBundle, two
``stszone serve --manage-certs`` processes share the Service's ClusterIP:443 (``--reuse-port``),
become Ready and are called by the API server; with ``--cert-validity 30s`` (the shortest) the
serving pair and then the CA rotate while pods are created in a loop, and no admission fails.

Failures are counted where the cluster sees them: the StatefulSet controller's FailedCreate
events, the API server's ``apiserver_admission_webhook_rejection_count{error_type=
"calling_webhook_error"}`` for stszone's webhooks (a TLS handshake it refuses counts there), and
the server-side dry runs of StatefulSet pods this test sends itself. At the end each replica
must answer a review the test sends over new connections that trust only the caBundle: the
kernel hands each connection to one of the listeners, and the API server's few kept-alive
ones may all be on one replica for the whole run. The processes run with a token of
stszone's ServiceAccount bound to exactly the rendered RBAC. What happened (serials before
and after, every renewal, the API server's calls each replica answered) is printed at the end
(``pytest -s``) and written to ``certs-e2e.json`` in the test's directory.
"""

from __future__ import annotations

import base64
import http.client
import json
import secrets
import ssl
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from cryptography import x509

from tests import builders
from tests.e2e import certslab, replicas
from tests.e2e.kube import Kubectl, wait_for, workload
from tests.e2e.replicas import IMAGE, Load
from webhook.install import tlssecret

#: The serving pair's lifetime (``--cert-validity``), the shortest stszone takes: the pair is
#: renewed about every 19 s; the CA (90 s) gets a successor 57 s after its creation, which
#: signs 3 s (the settling time) later, and the old CA leaves the caBundles 3 s after that.
VALIDITY = 30.0
#: Seconds the rotation may take: by then the first CA has expired.
ROTATION_TIMEOUT = 3 * VALIDITY
#: After the rotation, the load goes on until the pair is renewed from the new CA alone and
#: until it has made this much, at most ``LOAD_TIMEOUT`` seconds.
MIN_CYCLES, MIN_DRY_RUNS, LOAD_TIMEOUT = 5, 100, 120.0


def _serials(secret: dict[str, Any] | None) -> tuple[str, str, tuple[str, ...]]:
    """(CA serial, serving serial, bundle serials) of the Secret, hex."""
    if secret is None:
        return "", "", ()
    contents = tlssecret.read(secret)
    ca = f"{contents.ca.serial:x}" if contents.ca else ""
    serving = f"{contents.serving.serial:x}" if contents.serving else ""
    return ca, serving, tuple(f"{c.serial_number:x}" for c in contents.bundle)


def _bundle_serials(pem: bytes) -> tuple[str, ...]:
    if not pem:
        return ()
    return tuple(f"{c.serial_number:x}" for c in x509.load_pem_x509_certificates(pem))


def test_two_replicas_make_inject_and_rotate_their_certificates_without_a_failed_admission(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    run = secrets.token_hex(3)
    zones = ",".join(
        sorted(
            {
                n["metadata"]["labels"]["topology.kubernetes.io/zone"]
                for n in kubectl.get("nodes")["items"]
            }
        )
    )
    timeline: list[dict[str, Any]] = []
    summary: dict[str, Any] = {"run": run}
    with ExitStack() as cleanup:
        lab = certslab.install(kubectl, run=run, cleanup=cleanup)
        work = kubectl.within(lab.workload)
        kubeconfig = certslab.token_kubeconfig(kubectl, lab, tmp_path / "stszone.kubeconfig")
        processes = [
            replicas.launch(
                name,
                lab,
                kubeconfig=kubeconfig,
                zones=zones,
                work=tmp_path,
                validity=f"{VALIDITY:g}s",
            )
            for name in (f"replica-a-{run}", f"replica-b-{run}")
        ]
        for process in processes:
            cleanup.callback(process.stop)
        certslab.register(kubectl, lab, cleanup=cleanup)  # deleted first on the way out
        assert certslab.secret_state(kubectl, lab) is None  # from no Secret
        assert certslab.bundle_of(kubectl, lab, "MutatingWebhookConfiguration") == b""

        def both_ready() -> bool:
            for process in processes:
                process.alive()
            return all(process.ready() for process in processes)

        wait_for("both processes to be Ready", both_ready, timeout=120, interval=0.5)
        first = _serials(certslab.secret_state(kubectl, lab))
        summary["before"] = {"ca": first[0], "serving": first[1], "bundle": list(first[2])}
        leaders = [p.metrics().get("stszone_certificate_leader", -1.0) for p in processes]
        assert sorted(leaders) == [0.0, 1.0], leaders

        # The API server calls them: a StatefulSet is placed, ordinal by zone.
        placed = workload("StatefulSet", "placed", image=IMAGE, replicas=3, labels={})
        work.create(placed)

        def placed_pods() -> list[dict[str, Any]] | None:
            pods = work.get("pods", "-l", "app=placed")["items"]
            done = [p for p in pods if p["spec"].get("nodeName")]
            return pods if len(done) == 3 else None

        pods = wait_for("3 placed pods", placed_pods, timeout=120)
        chosen = {
            p["metadata"]["name"]: p["metadata"]["annotations"]["stszone.io/zone"] for p in pods
        }
        assert chosen == {f"placed-{i}": zones.split(",")[i] for i in range(3)}

        errors_before = replicas.apiserver_webhook_errors(kubectl)
        calls_before = replicas.apiserver_webhook_calls(kubectl)
        load = Load(work)
        load.start()
        cleanup.callback(load.finish)
        started = time.monotonic()

        def rotated() -> bool:
            for process in processes:
                process.alive()
            secret = certslab.secret_state(kubectl, lab)
            ca, serving, bundle = _serials(secret)
            held = _bundle_serials(
                certslab.bundle_of(kubectl, lab, "ValidatingWebhookConfiguration")
            )
            if (
                not timeline
                or timeline[-1]["serving"] != serving
                or timeline[-1]["bundle"] != list(bundle)
                or timeline[-1]["caBundle"] != list(held)
            ):
                timeline.append(
                    {
                        "at": round(time.monotonic() - started, 1),
                        "ca": ca,
                        "serving": serving,
                        "bundle": list(bundle),
                        "caBundle": list(held),
                    }
                )
            return ca != first[0] and bundle == (ca,) and held == (ca,)

        wait_for(
            "the CA to rotate and the old one to leave",
            rotated,
            timeout=ROTATION_TIMEOUT,
            interval=2,
        )
        # Under load after the old CA has gone: the pair renewed once more, from the new CA
        # alone, and the load on until it has made enough to count. On a slow machine that can
        # outlast the new CA's own two thirds: a second rotation then starts, and must go as
        # cleanly.
        rotated_to = timeline[-1]["serving"]
        give_up = time.monotonic() + LOAD_TIMEOUT
        while time.monotonic() < give_up and (
            timeline[-1]["serving"] == rotated_to
            or load.cycles < MIN_CYCLES
            or load.dry_runs < MIN_DRY_RUNS
        ):
            rotated()
            time.sleep(2)
        load.finish()
        last = _serials(certslab.secret_state(kubectl, lab))
        summary["after"] = {"ca": last[0], "serving": last[1], "bundle": list(last[2])}
        errors_after = replicas.apiserver_webhook_errors(kubectl)
        calls_after = replicas.apiserver_webhook_calls(kubectl)
        failed = replicas.failed_creates(work)
        # The pair renews every 19 s: read the Secret and the replicas' gauges until they agree
        # (a renewal between the two reads is not a disagreement).
        served = wait_for(
            "both replicas to serve the Secret's pair",
            lambda: _served_expiries(kubectl, lab, processes),
            timeout=VALIDITY,
        )
        summary.update(
            timeline=timeline,
            seconds=round(time.monotonic() - started),
            statefulsets_created=load.cycles,
            webhook_calls={k: calls_after[k] - calls_before.get(k, 0.0) for k in calls_after},
            dry_runs=load.dry_runs,
            dry_run_errors=load.dry_run_errors,
            failed_creates=failed,
            calling_webhook_errors=errors_after - errors_before,
            reloads={p.name: len(p.lines("serving certificate reloaded")) for p in processes},
            answered={p.name: p.answered() for p in processes},
            leader_writes={p.name: len(p.lines("stszone.certs: Secret")) for p in processes},
            pods_created_by_controller=sum(
                int(e.get("count") or 1)
                for e in work.get("events", "--field-selector", "reason=SuccessfulCreate")["items"]
            ),
        )
        (tmp_path / "certs-e2e.json").write_text(json.dumps(summary, indent=2))
        print(json.dumps(summary, indent=2))
        servings = {entry["serving"] for entry in timeline} | {first[1]}
        cas = {entry["ca"] for entry in timeline} | {first[0]}
        assert len(servings) >= 3 and len(cas) >= 2, summary
        assert failed == [], failed
        assert load.dry_run_errors == [], load.dry_run_errors
        assert load.errors == [], load.errors
        assert errors_after - errors_before == 0
        assert load.cycles >= MIN_CYCLES and load.dry_runs >= MIN_DRY_RUNS, summary
        # Every create recorded (the last cycle may have been stopped half-way).
        assert summary["pods_created_by_controller"] >= 6 * (load.cycles - 1)
        assert summary["webhook_calls"].get("rejected", 0.0) == 0.0
        assert served
        assert all(count >= 2 for count in summary["reloads"].values()), summary["reloads"]
        _each_answers(kubectl, lab, processes)
        wait_for(
            "both caBundles to hold the Secret's bundle",
            lambda: _bundles_are_the_secrets(kubectl, lab),
            timeout=VALIDITY,
        )


def _each_answers(kubectl: Kubectl, lab: certslab.Lab, processes: list[replicas.Process]) -> None:
    """Send reviews to the Service's address, each over a new connection that trusts only the
    caBundle, as the API server's next one would, until every replica has answered one more."""
    bundle = certslab.bundle_of(kubectl, lab, "ValidatingWebhookConfiguration").decode()
    context = ssl.create_default_context(cadata=bundle)
    context.check_hostname = False  # a Service's DNS name, served at its ClusterIP
    pod = builders.plain_pod("probe", namespace=lab.workload)
    body = json.dumps(builders.review(pod, dry_run=True)).encode()
    before = {p.name: p.answered() for p in processes}

    def answered_by_each() -> bool:
        conn = http.client.HTTPSConnection(lab.cluster_ip, 443, context=context, timeout=10)
        try:
            conn.request("POST", "/validate", body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            assert response.status == 200, response.read()[:300]
        finally:
            conn.close()
        return all(p.answered() > before[p.name] for p in processes)

    wait_for("each replica to answer a review", answered_by_each, timeout=60, interval=0)


def _bundles_are_the_secrets(kubectl: Kubectl, lab: certslab.Lab) -> bool:
    """Both configurations hold exactly the Secret's bundle at the end."""
    secret = certslab.secret_state(kubectl, lab) or {}
    wanted = base64.b64decode(secret["data"][tlssecret.BUNDLE])
    return all(
        certslab.bundle_of(kubectl, lab, kind) == wanted
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    )


def _served_expiries(
    kubectl: Kubectl, lab: certslab.Lab, processes: list[replicas.Process]
) -> list[float | None] | None:
    """The expiry gauges of both replicas when both equal the Secret's pair's notAfter."""
    expiry = tlssecret.read(certslab.secret_state(kubectl, lab) or {}).serving
    assert expiry is not None, "the Secret holds no serving pair"
    gauges = [p.metrics().get("stszone_certificate_expiry_timestamp_seconds") for p in processes]
    wanted = expiry.cert.not_valid_after_utc.timestamp()
    return gauges if gauges == [wanted] * len(processes) else None
