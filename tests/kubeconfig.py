"""Client configurations pointing at the fake API server: kubeconfig files and a service account.

Written the way users and the kubelet write them, so the tests go through the ``kubernetes``
package's own loaders (tokens, CA files, exec plugins, the in-cluster token and CA files).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml


def write_kubeconfig(
    path: Path,
    *,
    server: str,
    token: str | None = None,
    ca: Path | None = None,
    exec_token: str | None = None,
    token_file: str | None = None,
    proxy: str | None = None,
    client: tuple[Path, Path] | None = None,
) -> Path:
    """A one-context kubeconfig; ``exec_token`` makes an exec plugin print that token;
    ``token_file`` is the user's ``tokenFile`` as written (relative to the kubeconfig's
    directory, or absolute); ``proxy`` is the cluster's ``proxy-url``; ``client`` the user's
    client-certificate and client-key files."""
    cluster: dict[str, object] = {"server": server}
    if proxy is not None:
        cluster["proxy-url"] = proxy
    if ca is not None:
        cluster["certificate-authority"] = str(ca)
    user: dict[str, object] = {}
    if token is not None:
        user["token"] = token
    if token_file is not None:
        user["tokenFile"] = token_file
    if client is not None:
        user["client-certificate"], user["client-key"] = str(client[0]), str(client[1])
    if exec_token is not None:
        credential = {
            "apiVersion": "client.authentication.k8s.io/v1",
            "kind": "ExecCredential",
            "status": {"token": exec_token},
        }
        plugin = path.with_name(path.name + "-plugin.py")
        plugin.write_text(f"print({json.dumps(json.dumps(credential))})\n")
        user["exec"] = {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": cluster}],
        "users": [{"name": "tester", "user": user}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester"}}],
        "current-context": "fake",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def write_service_account(directory: Path, *, token: str, ca: Path) -> Path:
    """What the kubelet mounts at /var/run/secrets/kubernetes.io/serviceaccount."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_bytes(ca.read_bytes())
    (directory / "namespace").write_text("stszone-system")
    return directory
