"""``kubectl stszone``: the kubeconfig, context and namespace resolved as kubectl resolves them.

Against the fake API server (the recorded cluster: StatefulSet cap/db). The real kubectl
finding the plugin on PATH is shown in tests/e2e/test_plugin.py.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fakeapi import FakeApi
from tests.kubeconfig import write_kubeconfig
from webhook.cli import build_parser, main, plugin
from webhook.cli import review as review_cmd
from webhook.cli.options import settings_from

REVIEW = Path(__file__).parent / "fixtures" / "admission" / "003-Pod-CREATE.json"


def with_contexts(path: Path, current: str, **namespaces: str | None) -> Path:
    """Add contexts (name -> namespace) on the kubeconfig's cluster and user; set current."""
    config = yaml.safe_load(path.read_text())
    for name, namespace in namespaces.items():
        context: dict[str, Any] = {"cluster": "fake", "user": "tester"}
        if namespace is not None:
            context["namespace"] = namespace
        config["contexts"].append({"name": name.replace("_", "-"), "context": context})
    config["current-context"] = current
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    config = write_kubeconfig(tmp_path / "config", server="https://127.0.0.1:1", token="t")
    return with_contexts(config, "in-cap", in_cap="cap", in_prod="prod")


def aimed(argv: list[str], environ: Mapping[str, str]) -> dict[str, Any]:
    args = plugin.aim(build_parser(prog=plugin.PROG).parse_args(argv), environ=environ)
    return {k: getattr(args, k, "-") for k in ("kubeconfig", "context", "target_namespace")}


@pytest.mark.parametrize(
    ("argv", "environ", "expected"),
    [
        (["audit"], {"KUBECONFIG": "{kc}"}, (None, "in-cap", "cap")),
        (["audit", "--context", "in-prod"], {"KUBECONFIG": "{kc}"}, (None, "in-prod", "prod")),
        (["audit", "--context", "fake"], {"KUBECONFIG": "{kc}"}, (None, "fake", "default")),
        (["audit", "-n", "shop"], {"KUBECONFIG": "{kc}"}, (None, "in-cap", "shop")),
        (["audit", "-A"], {"KUBECONFIG": "{kc}"}, (None, "in-cap", None)),
        (["audit", "--kubeconfig", "{kc}"], {"KUBECONFIG": "/nowhere"}, ("{kc}", "in-cap", "cap")),
        (["audit"], {"HOME": "{home}"}, ("{home}/.kube/config", "in-cap", "cap")),
        (["review", "f.json"], {"KUBECONFIG": "{kc}"}, (None, "in-cap", "-")),
        (["audit", "--cluster", "c.yaml"], {"KUBECONFIG": "{kc}"}, (None, None, None)),
        (["review", "--offline", "f.json"], {"KUBECONFIG": "{kc}"}, (None, None, "-")),
        (["certs"], {"KUBECONFIG": "{kc}"}, ("-", "-", "-")),
    ],
)
def test_aimed_as_kubectl_would(
    tmp_path: Path,
    kubeconfig: Path,
    argv: list[str],
    environ: dict[str, str],
    expected: tuple[str | None, ...],
) -> None:
    """--kubeconfig, else $KUBECONFIG (left for the command to read: a list, where
    --kubeconfig names one file), else ~/.kube/config; --context, else current-context; -n,
    else -A (all), else the context's namespace, else default; offline stays offline."""
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(kubeconfig.read_text())
    names = {"kc": str(kubeconfig), "home": str(home)}
    argv = [arg.format(**names) for arg in argv]
    environ = {k: v.format(**names) for k, v in environ.items()}
    got = aimed(argv, environ)
    want = [v.format(**names) if isinstance(v, str) else v for v in expected]
    assert [got["kubeconfig"], got["context"], got["target_namespace"]] == want


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["audit", "--context", "nope"], "context 'nope' is not in the kubeconfig"),
        (["audit", "--kubeconfig", "/no/such/file"], "--kubeconfig /no/such/file: not found; "),
    ],
)
def test_a_context_kubectl_would_not_find_is_a_usage_error(
    kubeconfig: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """Exit 2 with one line naming the plugin, the command and what to do."""
    assert plugin.main(argv, environ={"KUBECONFIG": str(kubeconfig)}) == 2
    err = capsys.readouterr().err
    assert err.startswith("kubectl stszone audit: ") and message in err, err


def capture(call: Any, out: Path) -> int:
    with out.open("w") as handle, contextlib.redirect_stdout(handle):
        status: int = call()
        return status


async def test_plugin_audits_and_reviews_the_context_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """audit: the context's namespace, or -A; review: answered from the cluster (the claim's
    volume decides the zone), where plain `stszone review` with $KUBECONFIG set stays offline."""
    async with FakeApi(token="t0k3n") as api:
        config = write_kubeconfig(tmp_path / "kubeconfig", server=api.url, token="t0k3n", ca=api.ca)
        environ = {"KUBECONFIG": str(with_contexts(config, "in-cap", in_cap="cap"))}
        # kubectl hands the plugin its environment, which the command reads $KUBECONFIG from.
        monkeypatch.setenv("KUBECONFIG", environ["KUBECONFIG"])
        api.put(
            "namespaces", {"metadata": {"name": "cap", "labels": {"stszone.io/enabled": "true"}}}
        )
        out = tmp_path / "out.json"

        def run(*argv: str) -> Any:
            status = capture(lambda: plugin.main(list(argv), environ=environ), out)
            return status, json.loads(out.read_text())

        status, report = await asyncio.to_thread(run, "audit", "-o", "json")
        assert status == 0
        assert [(s["namespace"], s["name"]) for s in report["statefulsets"]] == [("cap", "db")]
        _, report = await asyncio.to_thread(run, "audit", "-o", "json", "--context", "fake")
        assert report["statefulsets"] == []  # namespace "default"
        _, report = await asyncio.to_thread(run, "audit", "-o", "json", "--context", "fake", "-A")
        assert [s["name"] for s in report["statefulsets"]] == ["db"]

        status, answer = await asyncio.to_thread(run, "review", str(REVIEW))
        assert status == 0 and answer["response"]["allowed"] is True
        patch = json.loads(base64.b64decode(answer["response"]["patch"]))
        zones = [op["value"] for op in patch if op["path"] == "/metadata/annotations"]
        assert zones == [{"stszone.io/zone": "zone-c"}]  # claim data-db-0's volume is in zone-c
        lists_before = len(api.requests)
        capture(lambda: main(["review", str(REVIEW)]), out)
        offline = json.loads(out.read_text())["response"]
        assert offline["allowed"] is False and offline["status"]["reason"] == "NoZones"
        assert len(api.requests) == lists_before  # plain stszone review never called the cluster


async def test_plugin_rebalance_statefulset_names_its_own_namespace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kubectl stszone rebalance --statefulset cap/db` plans cap/db: NS/NAME says the
    namespace, so the context's (here none: default) is not filled in as an -n that would
    "disagree" with it."""
    async with FakeApi(token="t0k3n") as api:
        config = write_kubeconfig(tmp_path / "kubeconfig", server=api.url, token="t0k3n", ca=api.ca)
        api.put(
            "namespaces", {"metadata": {"name": "cap", "labels": {"stszone.io/enabled": "true"}}}
        )
        environ = {"KUBECONFIG": str(config)}
        monkeypatch.setenv("KUBECONFIG", environ["KUBECONFIG"])
        out = tmp_path / "out.json"
        argv = ["rebalance", "--statefulset", "cap/db", "-o", "json"]
        status = await asyncio.to_thread(capture, lambda: plugin.main(argv, environ=environ), out)
    assert "disagree" not in capsys.readouterr().err
    assert status in (0, 1)
    planned = json.loads(out.read_text())
    assert [(s["namespace"], s["name"]) for s in planned["statefulsets"]] == [("cap", "db")]


def test_plugin_in_a_pod_without_a_kubeconfig_uses_its_service_account(tmp_path: Path) -> None:
    """kubectl in a pod with no kubeconfig at all talks as the pod's service account, in the
    pod's namespace (client-go: $POD_NAMESPACE, else the service account's namespace file);
    `kubectl stszone` does too, review included, instead of asking for a ~/.kube/config."""
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("t")
    (account / "namespace").write_text("jobs\n")
    environ = {
        "HOME": str(tmp_path / "home"),
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
    }

    def aim(argv: list[str], env: Mapping[str, str] = environ) -> Any:
        parsed = build_parser(prog=plugin.PROG).parse_args(argv)
        return plugin.aim(parsed, environ=env, service_account=account)

    audit = aim(["audit"])
    assert (audit.kubeconfig, audit.context, audit.target_namespace) == (None, None, "jobs")
    assert aim(["audit"], {**environ, "POD_NAMESPACE": "ci"}).target_namespace == "ci"
    assert aim(["audit", "-n", "shop"]).target_namespace == "shop"
    assert review_cmd.goes_live(settings_from(aim(["review", "f.json"]), environ={}))
    plain = build_parser().parse_args(["review", "f.json"])
    assert not review_cmd.goes_live(settings_from(plain, environ={}))


@pytest.mark.parametrize("content", ["", "apiVersion: v1\nkind: Config\n"])
def test_plugin_in_a_pod_with_an_empty_kubeconfig_uses_its_service_account(
    tmp_path: Path, content: str
) -> None:
    """A ~/.kube/config that holds no configuration (an empty file, or a stub with no cluster,
    context or user, as images ship one) is no kubeconfig to kubectl: client-go's deferred
    loading meets its empty-config error and falls back to the in-cluster config
    (merged_client_builder.go, IsConfigEmpty in validation.go). The plugin does too."""
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("t")
    (account / "namespace").write_text("jobs\n")
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(content)
    environ = {
        "HOME": str(home),
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
    }
    parsed = build_parser(prog=plugin.PROG).parse_args(["audit"])
    audit = plugin.aim(parsed, environ=environ, service_account=account)
    assert (audit.kubeconfig, audit.context, audit.target_namespace) == (None, None, "jobs")
    assert audit.in_cluster
