"""A kubeconfig server's scheme, read as kubectl reads it: to an http server the user's
credentials stay home; to an https one, in whatever case, they go over TLS verified against the
cluster's CA."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import yaml
from aiohttp import web

from tests.conftest import FAKE_TOKEN
from tests.fakeapi import FakeApi, Fault
from tests.kubeconfig import write_kubeconfig
from webhook.cluster.api import Api
from webhook.cluster.credsource import load_credentials
from webhook.cluster.live import live_store
from webhook.config import Settings
from webhook.errors import ConfigError
from webhook.install.certfiles import ensure_dev_certs

SECRET = "s3cret-t0ken"


@pytest.fixture
async def recorder() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    """An http server on 127.0.0.1 answering an empty node list; the headers of each request."""
    seen: list[dict[str, str]] = []

    async def nodes(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.json_response({"kind": "NodeList", "apiVersion": "v1", "items": []})

    app = web.Application()
    app.router.add_get("/api/v1/nodes", nodes)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", seen
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("user", ["token", "tokenFile", "basic", "exec"])
async def test_no_credential_goes_to_an_http_server(
    recorder: tuple[str, list[dict[str, str]]],
    tmp_path: Path,
    user: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """client-go reads the user's identification only for an https server (clientcmd's
    ClientConfig, behind rest.IsConfigTransportTLS), so kubectl sends an http server no
    Authorization and runs no exec plugin; stszone neither, and says in one line, without the
    secret, that the credentials stay home. The user's impersonation still goes, as in
    client-go."""
    url, seen = recorder
    ran = tmp_path / "plugin-ran"
    (tmp_path / "token").write_text(SECRET)
    path = write_kubeconfig(
        tmp_path / "config",
        server=url,
        token=SECRET if user == "token" else None,
        token_file="token" if user == "tokenFile" else None,
        exec_token=SECRET if user == "exec" else None,
    )
    config = yaml.safe_load(path.read_text())
    fields = config["users"][0]["user"]
    fields["as"] = "reader"
    if user == "basic":
        fields.update({"username": "admin", "password": SECRET})
    path.write_text(yaml.safe_dump(config))
    if user == "exec":
        plugin = tmp_path / "config-plugin.py"
        plugin.write_text(f"open({str(ran)!r}, 'w').close()\n" + plugin.read_text())

    with caplog.at_level(logging.WARNING, logger="stszone"):
        async with Api(load_credentials(str(path))) as api:
            await api.call("GET", "/api/v1/nodes")

    assert seen and all("Authorization" not in headers for headers in seen)
    assert all(headers.get("Impersonate-User") == "reader" for headers in seen)
    assert not ran.exists()
    said = [r.getMessage() for r in caplog.records if r.name.startswith("stszone")]
    assert len(said) == 1 and "not served over https" in said[0] and SECRET not in said[0]


@pytest.mark.parametrize("scheme", ["HTTPS", "Https"])
async def test_an_https_server_in_upper_case_is_verified_against_its_ca(
    api: FakeApi, tmp_path: Path, scheme: str
) -> None:
    """Go's url.Parse lower-cases a scheme, so kubectl takes ``HTTPS://host`` for https and
    verifies the server against the cluster's CA, refusing one that CA did not sign. The
    loader takes the CA only for a server starting with ``https``: stszone spoke TLS to it
    verifying nothing, and sent the token to whoever answered. Refused as kubectl refuses it,
    before a request reaches the server; with the CA that signed it, it is served."""
    server = scheme + api.url.removeprefix("https")
    stranger = ensure_dev_certs(tmp_path / "stranger").ca
    path = write_kubeconfig(tmp_path / "config", server=server, token=FAKE_TOKEN, ca=stranger)
    async with Api(load_credentials(str(path), environ={})) as client:
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await client.call("GET", "/api/v1/nodes")
    assert not api.requests

    path = write_kubeconfig(tmp_path / "config", server=server, token=FAKE_TOKEN, ca=api.ca)
    async with Api(load_credentials(str(path), environ={})) as client:
        assert (await client.call("GET", "/api/v1/nodes"))["kind"] == "NodeList"


async def test_a_401_from_an_http_server_says_no_credentials_went(tmp_path: Path) -> None:
    """An http server that answers 401 never saw the user's token, which stays home as kubectl
    keeps it: the refusal says so and what to do, rather than to renew a token it never got."""
    async with FakeApi() as api:
        api.inject("pods", "list", Fault.status(401))
        path = write_kubeconfig(tmp_path / "config", server=api.url, token=SECRET)
        with pytest.raises(ConfigError) as caught:
            await live_store(Settings(), credentials=load_credentials(str(path), environ={}))
    said = caught.value.message
    assert "HTTP 401" in said and "no credentials were sent (the user's token)" in said
    assert "give the kubeconfig's cluster its https address" in said
    assert "renew" not in said and SECRET not in said


@pytest.mark.parametrize("tls", [False, True])
async def test_a_401_for_a_user_without_credentials_says_it_has_none(
    tmp_path: Path, tls: bool
) -> None:
    """The kubeconfig's user has no credentials at all (no token, client pair, exec plugin...):
    a 401 is the server refusing an anonymous request, not credentials gone stale. The refusal
    says no credentials were sent as the user has none, and to give it some; over http, that
    kubectl sends them only over https too."""
    async with FakeApi(token=SECRET if tls else None) as api:
        api.inject("pods", "list", Fault.status(401))
        path = write_kubeconfig(tmp_path / "config", server=api.url, ca=api.ca)
        with pytest.raises(ConfigError) as caught:
            await live_store(Settings(), credentials=load_credentials(str(path), environ={}))
    said = caught.value.message
    assert "HTTP 401" in said and "renew" not in said
    assert "no credentials were sent: the kubeconfig's user has none" in said
    assert "`kubectl config set-credentials`" in said
    assert ("give the kubeconfig's cluster its https address" in said) is not tls


async def test_the_chosen_context_of_an_http_server_sends_no_credential(
    recorder: tuple[str, list[dict[str, str]]], tmp_path: Path
) -> None:
    """``--context`` naming an http cluster while the current-context names an https one: the
    chosen context's user keeps its token home, as kubectl keeps it, whatever the current
    context's server."""
    url, seen = recorder
    path = write_kubeconfig(tmp_path / "config", server=url, token=SECRET)
    config = yaml.safe_load(path.read_text())
    config["clusters"].append({"name": "tls", "cluster": {"server": "https://127.0.0.1:1"}})
    config["contexts"] = [
        {"name": "safe", "context": {"cluster": "tls", "user": config["users"][0]["name"]}},
        {"name": "plain", "context": dict(config["contexts"][0]["context"])},
    ]
    config["current-context"] = "safe"
    path.write_text(yaml.safe_dump(config))

    async with Api(load_credentials(str(path), context="plain", environ={})) as api:
        await api.call("GET", "/api/v1/nodes")

    assert seen and all("Authorization" not in headers for headers in seen)


async def test_a_context_without_a_user_talks_to_an_http_server(
    recorder: tuple[str, list[dict[str, str]]], tmp_path: Path
) -> None:
    """A context that names no user (anonymous, as kubectl takes it) reaches an http server:
    no credential to keep home, nothing to warn about."""
    url, seen = recorder
    path = write_kubeconfig(tmp_path / "config", server=url)
    config = yaml.safe_load(path.read_text())
    del config["contexts"][0]["context"]["user"]
    path.write_text(yaml.safe_dump(config))

    async with Api(load_credentials(str(path), environ={})) as api:
        assert (await api.call("GET", "/api/v1/nodes"))["kind"] == "NodeList"

    assert seen and all("Authorization" not in headers for headers in seen)


async def test_a_401_from_an_https_server_says_to_renew_the_credentials_it_got(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Over https the token goes, so a 401 means the cluster refused it: renew it. Nothing says
    the credentials stayed home."""
    async with FakeApi(token=SECRET) as api:
        api.inject("pods", "list", Fault.status(401))
        path = write_kubeconfig(tmp_path / "config", server=api.url, token=SECRET, ca=api.ca)
        with caplog.at_level(logging.WARNING, logger="stszone"), pytest.raises(ConfigError) as err:
            await live_store(Settings(), credentials=load_credentials(str(path), environ={}))
    assert "HTTP 401" in err.value.message and "renew them" in err.value.message
    assert "no credentials were sent" not in err.value.message
    assert not [r for r in caplog.records if "not served over https" in r.getMessage()]
