"""A kubeconfig edited while stszone runs is read again whole: a reload (after a 401, or when the
user's ``tokenFile`` changes) refuses what loading it refuses and sends what loading it sends."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fakeapi import FakeApi, Fault, eventually
from tests.kubeconfig import write_kubeconfig
from tests.retries import in_background
from webhook.cluster.api import Api, ApiError, CredentialsError
from webhook.cluster.credsource import load_credentials
from webhook.cluster.kubeconfigshape import refuse_bad_shape
from webhook.cluster.live import LiveView
from webhook.cluster.reflector import Tuning
from webhook.config import Settings
from webhook.errors import ConfigError
from webhook.install.certfiles import ensure_dev_certs

TOKEN = "t-1"


async def _reload(api: FakeApi, client: Api, token_file: Path, trigger: str) -> None:
    """Make ``client``'s credentials load again: a 401, or a rotated ``tokenFile``."""
    if trigger == "401":
        api.inject("pods", "list", Fault.status(401))
        with pytest.raises(ApiError):
            await client.call("GET", "/api/v1/pods")
    else:
        await asyncio.to_thread(token_file.write_text, TOKEN + "\n")


@pytest.mark.parametrize("trigger", ["401", "tokenFile"])
async def test_a_reload_refuses_an_insecure_cluster_with_a_ca(tmp_path: Path, trigger: str) -> None:
    """The cluster is edited to insecure-skip-tls-verify: true beside a CA that did not sign
    the server, which kubectl refuses and so does loading it. A reload took it, spoke TLS
    verifying nothing and sent the token to whoever answered; it is refused as at load, and
    no request reaches the server."""
    stranger = ensure_dev_certs(tmp_path / "stranger").ca
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    async with FakeApi(token=TOKEN) as api:
        path = write_kubeconfig(tmp_path / "config", server=api.url, token_file="token", ca=api.ca)
        async with Api(load_credentials(str(path), environ={})) as client:
            await client.call("GET", "/api/v1/pods")
            config = yaml.safe_load(path.read_text())
            cluster = config["clusters"][0]["cluster"]
            cluster.update(
                {"insecure-skip-tls-verify": True, "certificate-authority": str(stranger)}
            )
            path.write_text(yaml.safe_dump(config))
            with pytest.raises(ConfigError) as at_load:
                load_credentials(str(path), environ={})
            await _reload(api, client, token_file, trigger)
            seen = len(api.requests)
            with pytest.raises(CredentialsError) as caught:
                await client.call("GET", "/api/v1/pods")
    assert len(api.requests) == seen
    assert at_load.value.message in str(caught.value)
    assert "sets both insecure-skip-tls-verify: true and certificate-authority" in str(caught.value)


@pytest.mark.parametrize("trigger", ["401", "tokenFile"])
async def test_a_reload_sends_the_impersonation_the_file_holds(
    tmp_path: Path, trigger: str
) -> None:
    """The user is edited to impersonate (``as: reader``): requests after a reload act as
    reader, as a fresh start would, rather than as the user the file no longer says."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    async with FakeApi(token=TOKEN) as api:
        path = write_kubeconfig(tmp_path / "config", server=api.url, token_file="token", ca=api.ca)
        async with Api(load_credentials(str(path), environ={})) as client:
            config = yaml.safe_load(path.read_text())
            config["users"][0]["user"]["as"] = "reader"
            path.write_text(yaml.safe_dump(config))
            await _reload(api, client, token_file, trigger)
            target = await client.credentials.target()
    assert target.impersonation == (("Impersonate-User", "reader"),)


async def test_a_reload_of_a_deleted_kubeconfig_says_it_is_gone(tmp_path: Path) -> None:
    """The kubeconfig is deleted while stszone runs (a volume unmounted, a file moved): the
    reload after a 401 said the file was empty, sending the user to look inside a file that is
    not there. It says the file is not found, and once the file is back requests go through."""
    async with FakeApi(token=TOKEN) as api:
        path = write_kubeconfig(tmp_path / "config", server=api.url, token=TOKEN, ca=api.ca)
        written = path.read_text()
        async with Api(load_credentials(str(path), environ={})) as client:
            path.unlink()
            api.inject("pods", "list", Fault.status(401))
            with pytest.raises(ApiError):
                await client.call("GET", "/api/v1/pods")
            with pytest.raises(CredentialsError) as caught:
                await client.call("GET", "/api/v1/pods")
            path.write_text(written)
            await client.call("GET", "/api/v1/pods")
    said = str(caught.value)
    assert f"kubeconfig {path}: not found" in said, said
    assert "empty" not in said, said


async def test_a_kubeconfig_deleted_while_it_is_read_is_said_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kubeconfig is deleted in the middle of a reload after a 401: after stszone found it
    there and read it, before the loader reads it again. The refusal is the one a kubeconfig
    deleted before the reload gets (kubeconfig PATH: not found, and what to do), not the
    loader's raw "[Errno 2] No such file or directory"."""
    async with FakeApi(token=TOKEN) as api:
        path = write_kubeconfig(tmp_path / "config", server=api.url, token=TOKEN, ca=api.ca)
        written = path.read_text()
        async with Api(load_credentials(str(path), environ={})) as client:

            def check_then_delete(file: str, loaded: Any) -> None:
                refuse_bad_shape(file, loaded)
                path.unlink()  # between stszone's read of the file and the loader's

            monkeypatch.setattr("webhook.cluster.kubeconfig.refuse_bad_shape", check_then_delete)
            api.inject("pods", "list", Fault.status(401))
            with pytest.raises(ApiError):
                await client.call("GET", "/api/v1/pods")
            with pytest.raises(CredentialsError) as midway:
                await client.call("GET", "/api/v1/pods")
            monkeypatch.undo()
            with pytest.raises(CredentialsError) as before:  # deleted before the reload
                await client.call("GET", "/api/v1/pods")
            path.write_text(written)
            await client.call("GET", "/api/v1/pods")
    said = str(midway.value)
    assert "Errno" not in said, said
    assert f"kubeconfig {path}: not found; put it back" in said, said
    assert said == str(before.value)


async def test_a_refused_reload_is_logged_once_per_refusal_not_per_retry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The live view runs (a watch per kind, each re-opened often here) when its kubeconfig is
    edited to insecure-skip-tls-verify beside a CA and the tokenFile rotates: every reflector
    retries every few seconds, and would say the refusal each time. It is said once; a
    different refusal (a CA file that is not there) once more; and once the file is good
    again, that. Each edit replaces the file whole, as an editor or a Secret volume does."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    tuning = Tuning(watch_timeout=(0.05, 0.05), backoff_initial=0.01, backoff_cap=0.02)
    async with FakeApi(token=TOKEN) as api:
        path = write_kubeconfig(tmp_path / "config", server=api.url, token_file="token", ca=api.ca)
        config = yaml.safe_load(path.read_text())
        cluster = config["clusters"][0]["cluster"]

        def edit(**fields: object) -> None:
            edited = tmp_path / "config.new"
            edited.write_text(
                yaml.safe_dump(
                    config | {"clusters": [{"name": "fake", "cluster": cluster | fields}]}
                )
            )
            edited.replace(path)

        view = LiveView(
            Settings(kafka_node_pools=False, kruise=False),
            credentials=load_credentials(str(path), environ={}),
            tuning=tuning,
        )
        async with in_background(view.run()):
            await eventually(lambda: view.ready()[0])
            caplog.set_level(logging.INFO)

            def retried(times: int) -> Callable[[], bool]:
                now = [s.restarts for s in view.statuses()]
                return lambda: all(
                    s.restarts >= n + times for s, n in zip(view.statuses(), now, strict=True)
                )

            edit(**{"insecure-skip-tls-verify": True})
            token_file.write_text(TOKEN + "\n")  # a rotated token: the kubeconfig is read again
            await eventually(retried(3))
            edit(**{"certificate-authority": str(tmp_path / "gone.crt")})
            await eventually(retried(3))
            said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
            assert len(said) == 2, "\n".join(said)
            assert "sets both insecure-skip-tls-verify: true and certificate-authority" in said[0]
            assert "gone.crt" in said[1]
            edit()
            await eventually(lambda: "load again" in caplog.text)
            served = len(api.requests)  # requests reach the server again, and say nothing
            await eventually(lambda: len(api.requests) >= served + 20)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == said
    back = [r.getMessage() for r in caplog.records if "load again" in r.getMessage()]
    (line,) = back
    # It says how many requests failed meanwhile: every cache retried three times per refusal.
    found = re.fullmatch(
        rf"credentials from kubeconfig {re.escape(str(path))} load again "
        r"\((\d+) requests failed in \d+s\)",
        line,
    )
    assert found is not None, line
    assert int(found[1]) >= 2 * 3 * len(view.statuses()), line
