"""A kubeconfig's TLS material that does not load, named as the user wrote it."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from tests.kubeconfig import write_kubeconfig
from webhook.cluster.credsource import load_credentials
from webhook.errors import ConfigError
from webhook.install.certfiles import DevCerts


def test_tls_data_fields_that_do_not_load_are_named_as_written(
    dev_certs: DevCerts, tmp_path: Path
) -> None:
    """A CA or client pair given inline (``*-data``, as most kubeconfigs are written) is named
    by its ``*-data`` field: the loader writes it to a temporary file, gone once stszone exits,
    whose name the user never wrote and cannot look at."""
    junk = base64.b64encode(b"not a certificate\n").decode()
    key = base64.b64encode(dev_certs.key.read_bytes()).decode()
    ca = _refusal(tmp_path / "ca", cluster={"certificate-authority-data": junk})
    assert "the cluster's certificate-authority-data does not load" in ca
    pair = {"client-certificate-data": junk, "client-key-data": key}
    client = _refusal(tmp_path / "client", ca=dev_certs.ca, user=pair)
    assert "the user's client-certificate-data and client-key-data do not load" in client
    for message in (ca, client):
        assert "/tmp" not in message.replace(str(tmp_path), "")


def _refusal(
    path: Path,
    *,
    ca: Path | None = None,
    cluster: dict[str, str] | None = None,
    user: dict[str, str] | None = None,
) -> str:
    """The message of loading a kubeconfig whose cluster gets ``cluster``'s fields and whose
    user is ``user`` (when given)."""
    written = write_kubeconfig(path, server="https://127.0.0.1:1", token="t", ca=ca)
    config = yaml.safe_load(written.read_text())
    config["clusters"][0]["cluster"].update(cluster or {})
    if user is not None:
        config["users"][0]["user"] = user
    written.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as caught:
        load_credentials(str(written))
    return caught.value.message
