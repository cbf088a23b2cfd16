"""A kubeconfig's TLS material that does not load, named as the user wrote it."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from tests.kubeconfig import write_kubeconfig
from webhook.cluster.credentials import load_credentials
from webhook.errors import ConfigError
from webhook.install.certfiles import DevCerts


def test_tls_data_fields_that_do_not_load_are_named_as_written(
    dev_certs: DevCerts, tmp_path: Path
) -> None:
    """A CA or client pair given inline (``*-data``, as most kubeconfigs are written) is named
    by its ``*-data`` field: the loader writes it to a temporary file, gone once stszone exits,
    whose name the user never wrote and cannot look at."""
    junk = base64.b64encode(b"not a certificate\n").decode()
    path = write_kubeconfig(tmp_path / "ca", server="https://127.0.0.1:1", token="t")
    config = yaml.safe_load(path.read_text())
    config["clusters"][0]["cluster"]["certificate-authority-data"] = junk
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as caught:
        load_credentials(str(path))
    message = caught.value.message
    assert "the cluster's certificate-authority-data does not load" in message
    assert "/tmp" not in message.replace(str(tmp_path), "")
    path = write_kubeconfig(tmp_path / "client", server="https://127.0.0.1:1", ca=dev_certs.ca)
    config = yaml.safe_load(path.read_text())
    config["users"][0]["user"] = {
        "client-certificate-data": junk,
        "client-key-data": base64.b64encode(dev_certs.key.read_bytes()).decode(),
    }
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as caught:
        load_credentials(str(path))
    message = caught.value.message
    assert "the user's client-certificate-data and client-key-data do not load" in message
    assert "/tmp" not in message.replace(str(tmp_path), "")
