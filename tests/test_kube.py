"""Connecting to the API: kubeconfig (token + CA, exec plugin), in-cluster service account, 401s.

The fake API server runs over real TLS with the development CA, so every test goes through the
``kubernetes`` package's loaders and a verified TLS handshake, as against a real cluster.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from tests.fakeapi import FakeApi, eventually
from tests.kubeconfig import write_kubeconfig, write_service_account
from webhook.cluster.api import Api
from webhook.cluster.credsource import load_credentials
from webhook.cluster.kubeconfig import kubeconfig_files
from webhook.cluster.kubecontext import kubeconfig_context
from webhook.cluster.live import LiveView, live_store
from webhook.cluster.reflector import Tuning
from webhook.config import Settings
from webhook.errors import ConfigError
from webhook.install.certfiles import DevCerts

TUNING = Tuning(page_size=50, backoff_initial=0.02, backoff_cap=0.1, healthy_after=0.2)


@pytest.fixture
async def api(dev_certs: DevCerts) -> AsyncIterator[FakeApi]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(dev_certs.cert, dev_certs.key)
    async with FakeApi(token="t-1", ssl_context=context) as fake:
        yield fake


async def listed(kubeconfig: Path) -> int:
    store = await live_store(Settings(), credentials=load_credentials(str(kubeconfig)))
    return len(store.pods)


async def test_kubeconfig_token_and_ca(api: FakeApi, dev_certs: DevCerts, tmp_path: Path) -> None:
    """A kubeconfig's server, CA file and bearer token are used (TLS verified against the CA)."""
    path = write_kubeconfig(tmp_path / "config", server=api.url, token="t-1", ca=dev_certs.ca)
    assert await listed(path) == 12
    assert api.requests and all(s.resource for s in api.requests)


async def test_kubeconfig_exec_plugin(api: FakeApi, dev_certs: DevCerts, tmp_path: Path) -> None:
    """An exec plugin's ExecCredential token is used (the plugin runs off the event loop)."""
    path = write_kubeconfig(tmp_path / "config", server=api.url, exec_token="t-1", ca=dev_certs.ca)
    assert await listed(path) == 12


async def test_unknown_ca_is_refused(api: FakeApi, tmp_path: Path) -> None:
    """Without the cluster's CA the handshake fails: no silent fallback to an unverified one."""
    path = write_kubeconfig(tmp_path / "config", server=api.url, token="t-1")
    with pytest.raises(ConfigError, match=r"cannot list the cluster via kubeconfig .*certificate"):
        await listed(path)


async def test_wrong_token_is_a_clear_error(
    api: FakeApi, dev_certs: DevCerts, tmp_path: Path
) -> None:
    """A 401 is reported with the credentials' origin, not as a bare traceback."""
    path = write_kubeconfig(tmp_path / "config", server=api.url, token="nope", ca=dev_certs.ca)
    with pytest.raises(ConfigError, match=r"kubeconfig .*HTTP 401 Unauthorized"):
        await listed(path)


async def test_a_proxy_refusal_names_the_proxy_but_never_its_password(
    dev_certs: DevCerts, tmp_path: Path
) -> None:
    """A kubeconfig's ``proxy-url`` may carry a user and password. The proxy gets them (as
    Proxy-Authorization), and a proxy that refuses (407) is named in the error without them:
    that text goes to stderr, to the log and to the unauthenticated ``/readyz``."""
    asked: list[bytes] = []

    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        asked.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    proxy = await asyncio.start_server(refuse, "127.0.0.1", 0)
    port = proxy.sockets[0].getsockname()[1]
    path = write_kubeconfig(
        tmp_path / "config",
        server="https://127.0.0.1:6443",
        token="t-1",
        ca=dev_certs.ca,
        proxy=f"http://squid:pr0xy-s3cret@127.0.0.1:{port}",
    )
    async with proxy:
        with pytest.raises(ConfigError) as caught:
            await listed(path)
    message = caught.value.message
    assert "pr0xy-s3cret" not in message and "squid:" not in message
    assert f"127.0.0.1:{port}" in message and "407" in message
    assert "proxy-url" in message  # what to look at
    sent = "Proxy-Authorization: Basic " + base64.b64encode(b"squid:pr0xy-s3cret").decode()
    assert asked and all(sent.encode() in head for head in asked)


async def test_a_cluster_that_cannot_be_listed_is_said_with_the_way_on(tmp_path: Path) -> None:
    """audit, explain, rebalance and review end with one line: what failed, and what to do
    (connection refused, here: a port nothing listens on)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = write_kubeconfig(tmp_path / "config", server=f"http://127.0.0.1:{port}", token="t")
    with pytest.raises(ConfigError) as caught:
        await listed(path)
    message = caught.value.message
    assert f"127.0.0.1:{port}" in message and "\n" not in message
    assert "check that the API server is up and its address right" in message


async def test_a_kubeconfig_user_that_impersonates_acts_as_that_identity(tmp_path: Path) -> None:
    """A kubeconfig user with ``as``, ``as-uid``, ``as-groups`` and ``as-user-extra`` (kubectl's
    ``--as`` family, kept in the file) acts as that identity, as kubectl and client-go do: every
    request carries the Impersonate-* headers (an extra's key %-escaped as client-go escapes it),
    so the API server authorizes the impersonated user, never the credential's own."""
    seen: list[dict[str, list[str]]] = []

    async def nodes(request: web.Request) -> web.Response:
        names = ("Impersonate-User", "Impersonate-Uid", "Impersonate-Group")
        extra = [k for k in request.headers if k.lower().startswith("impersonate-extra-")]
        seen.append({k: request.headers.getall(k, []) for k in (*names, *extra)})
        return web.json_response({"kind": "NodeList", "apiVersion": "v1", "items": []})

    app = web.Application()
    app.router.add_get("/api/v1/nodes", nodes)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        path = write_kubeconfig(tmp_path / "config", server=f"http://127.0.0.1:{port}", token="t")
        config = yaml.safe_load(path.read_text())
        config["users"][0]["user"].update(
            {
                "as": "system:serviceaccount:ops:reader",
                "as-uid": "u-1",
                "as-groups": ["team-a", "system:authenticated"],
                "as-user-extra": {"scopes.example.io/team": ["db", "kv"]},
            }
        )
        path.write_text(yaml.safe_dump(config))
        async with Api(load_credentials(str(path))) as api:
            await api.call("GET", "/api/v1/nodes")
    finally:
        await runner.cleanup()
    assert seen == [
        {
            "Impersonate-User": ["system:serviceaccount:ops:reader"],
            "Impersonate-Uid": ["u-1"],
            "Impersonate-Group": ["team-a", "system:authenticated"],
            "Impersonate-Extra-scopes.example.io%2Fteam": ["db", "kv"],
        }
    ]


def test_no_cluster_and_broken_kubeconfig(tmp_path: Path) -> None:
    """No cluster at all, a kubeconfig that is not there, or one that does not read, stops
    start-up with a message."""
    with pytest.raises(ConfigError, match="no cluster to talk to"):
        load_credentials(None, environ={})
    with pytest.raises(ConfigError, match=r"^--kubeconfig \S+/missing: not found; "):
        load_credentials(str(tmp_path / "missing"))
    broken = tmp_path / "broken"
    broken.write_text("clusters: []\n")
    with pytest.raises(ConfigError, match="cannot load credentials from kubeconfig"):
        load_credentials(str(broken))


def test_a_context_the_kubeconfig_lacks_says_so_and_the_way_on(tmp_path: Path) -> None:
    """``--context`` naming no context, or a kubeconfig with no current-context, is said as
    such with what to run, as ``kubectl stszone`` says it; not the loader's "Invalid
    kube-config file", which sends the user to look for a broken file."""
    path = write_kubeconfig(tmp_path / "config", server="https://127.0.0.1:1", token="t")
    with pytest.raises(ConfigError) as caught:
        load_credentials(str(path), context="nope")
    assert "context 'nope' is not in the kubeconfig" in caught.value.message
    assert "kubectl config get-contexts" in caught.value.message
    unset = tmp_path / "unset"
    unset.write_text(path.read_text().replace("current-context: fake", "current-context: ''"))
    with pytest.raises(ConfigError) as caught:
        load_credentials(str(unset))
    assert "sets no current-context; pass --context NAME" in caught.value.message
    assert "Invalid kube-config" not in caught.value.message
    # A current-context naming a context that is gone does not stop the one asked for.
    dangling = tmp_path / "dangling"
    dangling.write_text(path.read_text().replace("current-context: fake", "current-context: old"))
    assert kubeconfig_context((str(dangling),), "fake").name == "fake"


def test_a_failing_exec_plugin_stops_loading_with_its_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An exec plugin that exits non-zero: the loader only logs it (at the root logger) and
    goes on with no credentials, so every request would be an anonymous 401. It is a
    credentials error naming the plugin's complaint, and what it printed on stdout (a
    token, here) is in no message."""
    path = write_kubeconfig(
        tmp_path / "config", server="https://127.0.0.1:1", exec_token="t-1", ca=None
    )
    plugin = path.with_name(path.name + "-plugin.py")
    plugin.write_text(
        "import sys\n"
        'print(\'{"kind": "ExecCredential", "status": {"token": "st4le-t0ken"}}\')\n'
        'sys.stderr.write("login expired: run mylogin\\n")\n'
        "sys.exit(3)\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_credentials(str(path))
    message = caught.value.message
    assert message.startswith(f"cannot load credentials from kubeconfig {path}: ")
    assert "returned 3" in message and "login expired: run mylogin" in message
    assert "st4le-t0ken" not in message and "st4le-t0ken" not in caplog.text


def test_tls_files_that_do_not_load_are_named(dev_certs: DevCerts, tmp_path: Path) -> None:
    """A CA file or client pair OpenSSL refuses is named, with the kubeconfig field it comes
    from: OpenSSL alone says "[SSL] PEM lib (_ssl.c:3905)", which names neither."""
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    path = write_kubeconfig(tmp_path / "ca", server="https://127.0.0.1:1", token="t", ca=junk)
    with pytest.raises(ConfigError) as caught:
        load_credentials(str(path))
    assert f"certificate-authority {junk}" in caught.value.message
    assert "PEM" in caught.value.message
    for client in ((junk, dev_certs.key), (dev_certs.cert, dev_certs.ca)):
        path = write_kubeconfig(
            tmp_path / "client", server="https://127.0.0.1:1", ca=dev_certs.ca, client=client
        )
        with pytest.raises(ConfigError) as caught:
            load_credentials(str(path))
        message = caught.value.message
        assert f"client-certificate {client[0]} and client-key {client[1]}" in message
        assert "a PEM certificate and its own PEM key" in message


async def test_a_kubeconfig_token_file_is_reread_when_it_changes(
    api: FakeApi, dev_certs: DevCerts, tmp_path: Path
) -> None:
    """A kubeconfig whose user reads its token from a file (``tokenFile``, relative to the
    kubeconfig) that something rotates, as the kubelet does a projected token: requests carry
    the new token once the file has it, as client-go's do; none is refused first (a refused
    eviction stops ``rebalance --apply``)."""
    (tmp_path / "sa").mkdir()
    token = tmp_path / "sa" / "token"
    token.write_text("t-1")
    path = write_kubeconfig(
        tmp_path / "config", server=api.url, token_file="sa/token", ca=dev_certs.ca
    )
    credentials = load_credentials(str(path))
    assert len((await live_store(Settings(), credentials=credentials)).pods) == 12
    rotated = tmp_path / "sa" / "token.new"
    rotated.write_text("t-2")
    rotated.replace(token)
    api.token = "t-2"  # the old token's time is over
    assert len((await live_store(Settings(), credentials=credentials)).pods) == 12


async def test_in_cluster_token_is_reread_after_rotation(
    api: FakeApi, dev_certs: DevCerts, tmp_path: Path
) -> None:
    """In a pod: service-account token and CA; after a rotation, a 401 reloads the new token."""
    account = write_service_account(tmp_path / "sa", token="t-1", ca=dev_certs.ca)
    port = api.url.rsplit(":", 1)[1]
    environ = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": port}
    credentials = load_credentials(None, environ=environ, service_account=account)
    assert credentials.source == "in-cluster service account"
    view = LiveView(Settings(), credentials=credentials, tuning=TUNING)
    job = asyncio.create_task(view.run())
    try:
        await eventually(lambda: view.ready()[0])
        # The API server stops accepting the old token before the kubelet has written the new
        # one: the reconnecting watch is refused (401) until the file changes, then re-reads it.
        api.token = "t-2"
        api.cut("pods")
        await eventually(
            lambda: "401" in next(s for s in view.statuses() if s.table == "pods").last_error
        )
        (account / "token").write_text("t-2")
        api.put(
            "pods",
            {
                "metadata": {
                    "name": "x-0",
                    "namespace": "cap",
                    "labels": {"statefulset.kubernetes.io/pod-name": "x-0"},
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "StatefulSet",
                            "name": "x",
                            "controller": True,
                        }
                    ],
                }
            },
        )
        await eventually(lambda: view.store.pod("cap", "x-0") is not None)
        assert view.ready()[0]
    finally:
        job.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await job


def _config_file(path: Path, name: str, *, server: str, current: str | None) -> str:
    """A kubeconfig whose cluster, user and context are all called ``name``."""
    config: dict[str, object] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": name, "user": {"token": name}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    }
    if current is not None:
        config["current-context"] = current
    path.write_text(yaml.safe_dump(config))
    return str(path)


@pytest.mark.parametrize(
    ("currents", "expected"),
    [
        (("one", "two"), "one"),  # kubectl: the first file to set it wins
        (("one", ""), "one"),  # an empty value sets nothing
        ((None, "two"), "two"),  # the first file that sets it
    ],
)
def test_merged_kubeconfigs_take_the_first_files_current_context(
    tmp_path: Path, currents: tuple[str | None, str | None], expected: str
) -> None:
    """$KUBECONFIG=a:b uses the current-context of the first file that sets one, as kubectl
    does (client-go merges the files' plain values in reverse order, so the first one wins);
    the ``kubernetes`` loader keeps the last one's, which aimed audit, rebalance and the
    plugin at another cluster than `kubectl config current-context` names."""
    servers = {"one": "https://127.0.0.1:1/one", "two": "https://127.0.0.1:1/two"}
    first = _config_file(tmp_path / "a", "one", server=servers["one"], current=currents[0])
    second = _config_file(tmp_path / "b", "two", server=servers["two"], current=currents[1])
    missing = str(tmp_path / "missing")
    merged = os.pathsep.join((missing, first, second))
    assert kubeconfig_context(kubeconfig_files(merged, listed=True)).name == expected
    credentials = load_credentials(None, environ={"KUBECONFIG": merged})
    assert credentials.target_now().base == servers[expected]
    assert credentials.target_now().headers == {"Authorization": f"Bearer {expected}"}


def test_a_pod_without_a_service_account_token_uses_kubeconfig(tmp_path: Path) -> None:
    """Every pod has $KUBERNETES_SERVICE_HOST, token or not: a pod with
    automountServiceAccountToken false and a kubeconfig in $KUBECONFIG (a webhook serving
    another cluster) talks to that kubeconfig's cluster, as client-go does (in-cluster is
    possible only when the token file exists), instead of failing on the missing token."""
    path = write_kubeconfig(tmp_path / "config", server="https://127.0.0.1:1/k8s", token="t")
    environ = {
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "KUBECONFIG": str(path),
    }
    credentials = load_credentials(None, environ=environ, service_account=tmp_path / "none")
    assert credentials.source == f"kubeconfig {path}"
    assert credentials.target_now().base == "https://127.0.0.1:1/k8s"
