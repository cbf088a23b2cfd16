"""Which kubeconfig files, cluster and credentials a command takes, against kubectl's choice
(client-go's ClientConfigLoadingRules): ``--kubeconfig`` names one file, ``$KUBECONFIG`` a list.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kubeconfig import write_kubeconfig
from webhook.cli import build_parser, plugin
from webhook.cluster.credsource import load_credentials
from webhook.errors import ConfigError
from webhook.install.certfiles import DevCerts


def refusal(path: Path) -> str:
    """What loading the kubeconfig ``path`` is refused with."""
    with pytest.raises(ConfigError) as caught:
        load_credentials(str(path), environ={})
    return caught.value.message


def split_kubeconfig(tmp_path: Path, dev_certs: DevCerts) -> Path:
    """``clusters/config`` (a cluster and a context, no user) and a ``users/`` folder holding a
    client certificate and key, ``tls.crt`` and ``tls.key``; the cluster file's path."""
    (tmp_path / "clusters").mkdir()
    (tmp_path / "users").mkdir()
    cluster = write_kubeconfig(tmp_path / "clusters" / "config", server="https://127.0.0.1:1")
    config = yaml.safe_load(cluster.read_text())
    del config["users"]
    cluster.write_text(yaml.safe_dump(config))
    (tmp_path / "users" / "tls.crt").write_bytes(dev_certs.cert.read_bytes())
    (tmp_path / "users" / "tls.key").write_bytes(dev_certs.key.read_bytes())
    return cluster


def test_a_kubeconfig_flag_holding_a_colon_names_one_file(tmp_path: Path) -> None:
    """``--kubeconfig DIR/a:b`` is the file ``a:b``, as kubectl reads its flag (one explicit
    path); only ``$KUBECONFIG`` is split at ``:``. Split, it named ``DIR/a`` (another cluster
    here) and ``b``, or "none of these files is found" when ``DIR/a`` does not exist."""
    colon = write_kubeconfig(tmp_path / "a:b", server="https://127.0.0.1:1/colon", token="t")
    write_kubeconfig(tmp_path / "a", server="https://127.0.0.1:1/other", token="t")
    credentials = load_credentials(str(colon), environ={})
    assert credentials.target_now().base == "https://127.0.0.1:1/colon"
    assert credentials.source == f"kubeconfig {colon}"

    config = yaml.safe_load(colon.read_text())
    config["contexts"][0]["name"] = config["current-context"] = "colon"
    colon.write_text(yaml.safe_dump(config))
    args = build_parser(prog=plugin.PROG).parse_args(["audit", "--kubeconfig", str(colon)])
    aimed = plugin.aim(args, environ={"KUBECONFIG": str(tmp_path / "a")})
    assert (aimed.kubeconfig, aimed.context) == (str(colon), "colon")


@pytest.mark.parametrize("scheme", ["https", "HTTPS"])
@pytest.mark.parametrize(
    ("ca_field", "value"),
    [("certificate-authority", "{ca}"), ("certificate-authority-data", "{data}")],
)
def test_a_cluster_that_skips_verification_and_names_a_ca_is_refused(
    dev_certs: DevCerts, tmp_path: Path, ca_field: str, value: str, scheme: str
) -> None:
    """kubectl refuses an https cluster (its scheme in any case, as Go's url.Parse reads it)
    with ``insecure-skip-tls-verify: true`` and a CA ("specifying a root certificates file
    with the insecure flag is not allowed"), where the loader would verify nothing: refused,
    naming the cluster and the way out."""
    path = write_kubeconfig(tmp_path / "config", server=f"{scheme}://127.0.0.1:1", token="t")
    config = yaml.safe_load(path.read_text())
    data = base64.b64encode(dev_certs.ca.read_bytes()).decode()
    cluster = config["clusters"][0]["cluster"]
    cluster["insecure-skip-tls-verify"] = True
    cluster[ca_field] = value.format(ca=dev_certs.ca, data=data)
    path.write_text(yaml.safe_dump(config))
    message = refusal(path)
    assert f"cluster 'fake' sets both insecure-skip-tls-verify: true and {ca_field}" in message
    assert "specifying a root certificates file with the insecure flag is not allowed" in message
    assert "remove insecure-skip-tls-verify" in message and f"or remove {ca_field}" in message
    # Without the CA, verification is skipped, as kubectl skips it.
    del cluster[ca_field]
    path.write_text(yaml.safe_dump(config))
    assert load_credentials(str(path), environ={}).target_now().base == "https://127.0.0.1:1"


def test_relative_paths_are_resolved_against_the_file_that_holds_them(
    dev_certs: DevCerts, tmp_path: Path
) -> None:
    """$KUBECONFIG=clusters/config:users/config, each file's paths written relative to it (as
    `kubectl config set-credentials` keeps them): kubectl resolves the user's client
    certificate, key and exec command against the users' file (ResolveLocalPaths), where the
    loader resolves them against the cluster's file ("File does not exist")."""
    cluster = split_kubeconfig(tmp_path, dev_certs)
    (tmp_path / "users" / "bin").mkdir()
    token = tmp_path / "users" / "bin" / "token"
    credential = json.dumps(
        {
            "apiVersion": "client.authentication.k8s.io/v1",
            "kind": "ExecCredential",
            "status": {"token": "from-exec"},
        }
    )
    token.write_text(f"#!/bin/sh\necho '{credential}'\n")
    token.chmod(0o755)
    users = tmp_path / "users" / "config"
    user: dict[str, object] = {"client-certificate": "tls.crt", "client-key": "tls.key"}
    users.write_text(yaml.safe_dump({"users": [{"name": "tester", "user": user}]}))
    listed = f"{cluster}:{users}"
    connection = load_credentials(None, environ={"KUBECONFIG": listed}).target_now()
    assert connection.base == "https://127.0.0.1:1"

    user.clear()
    user["exec"] = {"apiVersion": "client.authentication.k8s.io/v1", "command": "./bin/token"}
    users.write_text(yaml.safe_dump({"users": [{"name": "tester", "user": user}]}))
    connection = load_credentials(None, environ={"KUBECONFIG": listed}).target_now()
    assert connection.headers == {"Authorization": "Bearer from-exec"}


def test_an_empty_file_in_the_kubeconfig_list_is_skipped(tmp_path: Path) -> None:
    """$KUBECONFIG=empty:config (a file `touch`ed for later, or only comments): kubectl reads
    an empty file as an empty configuration and uses the others, where the loader stops
    ("Invalid kube-config. ... file is empty"). An empty file alone holds no configuration."""
    config = write_kubeconfig(tmp_path / "config", server="https://127.0.0.1:1/k8s", token="t")
    (tmp_path / "empty").write_text("")
    (tmp_path / "comments").write_text("# the team's clusters go here\n")
    listed = f"{tmp_path / 'empty'}:{config}:{tmp_path / 'comments'}"
    credentials = load_credentials(None, environ={"KUBECONFIG": listed})
    assert credentials.target_now().base == "https://127.0.0.1:1/k8s"
    args = build_parser(prog=plugin.PROG).parse_args(["audit"])
    assert plugin.aim(args, environ={"KUBECONFIG": listed}).context == "fake"
    with pytest.raises(ConfigError, match="holds no configuration"):
        load_credentials(str(tmp_path / "empty"), environ={})


def test_a_file_naming_two_clusters_alike_is_refused(tmp_path: Path) -> None:
    """A kubeconfig with two clusters named "fake" (one appended by hand with a new server):
    kubectl refuses the file ("duplicate name ... in list"), where the loader would take the
    first one and talk to it: refused, naming the file and the name."""
    path = write_kubeconfig(tmp_path / "config", server="https://127.0.0.1:1/old", token="t")
    config = yaml.safe_load(path.read_text())
    config["clusters"].append({"name": "fake", "cluster": {"server": "https://127.0.0.1:1/new"}})
    path.write_text(yaml.safe_dump(config))
    assert f"{path} has two clusters named 'fake', which kubectl refuses" in refusal(path)
    args = build_parser(prog=plugin.PROG).parse_args(["audit", "--kubeconfig", str(path)])
    with pytest.raises(ConfigError, match="has two clusters named 'fake'"):
        plugin.aim(args, environ={})


def test_an_empty_file_field_names_no_file(tmp_path: Path) -> None:
    """``tokenFile: ""`` or ``certificate-authority: ""`` (as templates write a field left
    blank): kubectl reads an empty path as unset, where the loader reads the kubeconfig's
    directory ("Is a directory", "File does not exist")."""
    path = write_kubeconfig(tmp_path / "config", server="https://127.0.0.1:1", token="t")
    config = yaml.safe_load(path.read_text())
    config["users"][0]["user"]["tokenFile"] = ""
    config["clusters"][0]["cluster"]["certificate-authority"] = ""
    path.write_text(yaml.safe_dump(config))
    connection = load_credentials(str(path), environ={}).target_now()
    assert connection.headers == {"Authorization": "Bearer t"}


def test_a_context_without_a_kubeconfig_says_which_is_missing() -> None:
    """`stszone audit --context prod` with no $KUBECONFIG, where kubectl would read
    ~/.kube/config: the message says the context needs a kubeconfig named, in a pod or not
    (not "not in a pod (no KUBERNETES_SERVICE_HOST)")."""
    in_a_pod = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    for environ in ({}, in_a_pod):
        with pytest.raises(ConfigError) as caught:
            load_credentials(None, context="prod", environ=environ)
        message = caught.value.message
        assert message.startswith("--context prod names a kubeconfig context, but no kubeconfig")
        assert "--kubeconfig PATH or set $KUBECONFIG" in message
        assert "not in a pod" not in message


@pytest.mark.parametrize(("kind", "name"), [("contexts", "fake"), ("users", "tester")])
def test_a_file_naming_two_contexts_or_users_alike_is_refused(
    tmp_path: Path, kind: str, name: str
) -> None:
    """Two contexts, or two users, of one name in a file: kubectl refuses the file as it
    refuses two clusters alike ("duplicate name in list"); taking the first would act as a user
    or in a context the file's author did not mean."""
    path = write_kubeconfig(tmp_path / "config", server="https://127.0.0.1:1", token="t")
    config = yaml.safe_load(path.read_text())
    config[kind].append(dict(config[kind][0]))
    path.write_text(yaml.safe_dump(config))
    message = refusal(path)
    assert f"{path} has two {kind} named {name!r}, which kubectl refuses" in message
    assert "(duplicate name in list); rename or remove one" in message


def test_a_cluster_naming_a_ca_file_and_data_with_insecure_names_both(
    dev_certs: DevCerts, tmp_path: Path
) -> None:
    """A cluster giving certificate-authority and certificate-authority-data with
    insecure-skip-tls-verify: the refusal names both, as both have to go to skip verification."""
    path = write_kubeconfig(tmp_path / "config", server="https://127.0.0.1:1", ca=dev_certs.ca)
    config = yaml.safe_load(path.read_text())
    cluster = config["clusters"][0]["cluster"]
    cluster["insecure-skip-tls-verify"] = True
    cluster["certificate-authority-data"] = base64.b64encode(dev_certs.ca.read_bytes()).decode()
    path.write_text(yaml.safe_dump(config))
    message = refusal(path)
    both = "certificate-authority and certificate-authority-data"
    assert f"insecure-skip-tls-verify: true and {both}, which kubectl" in message
    assert f"or remove {both} to skip verification" in message


def test_relative_paths_after_an_entry_without_fields_are_resolved(
    dev_certs: DevCerts, tmp_path: Path
) -> None:
    """$KUBECONFIG=clusters/config:users/config whose users file lists a user with no ``user``
    fields before the one the context names: that one's relative client certificate and key
    are still read against the users' file, as kubectl reads them."""
    cluster = split_kubeconfig(tmp_path, dev_certs)
    users = tmp_path / "users" / "config"
    user = {"client-certificate": "tls.crt", "client-key": "tls.key"}
    users.write_text(
        yaml.safe_dump({"users": [{"name": "unused"}, {"name": "tester", "user": user}]})
    )
    environ = {"KUBECONFIG": f"{cluster}:{users}"}
    assert load_credentials(None, environ=environ).target_now().base == "https://127.0.0.1:1"


def _set(config: dict[str, Any], where: str, value: Any) -> None:
    """``config`` with the field at ``where`` (``users[0].user``) set to ``value``."""
    *parents, last = where.replace("[", ".").replace("]", "").split(".")
    node: Any = config
    for key in parents:
        node = node[int(key)] if key.isdigit() else node[key]
    node[int(last) if last.isdigit() else last] = value


@pytest.mark.parametrize(
    ("where", "value", "said"),
    [
        ("clusters", 5, "clusters is 5 (a number) where a kubeconfig has a list of entries"),
        ("users", {"tester": {}}, "users is a mapping where a kubeconfig has a list of entries"),
        ("users[0]", 5, "users[0] is 5 (a number) where a kubeconfig has a mapping with a name"),
        ("users[0]", "tester", "users[0] is 'tester' (a string) where a kubeconfig has a mapping"),
        ("contexts[0].context", "fake", "contexts[0].context is 'fake' (a string) where a "),
        ("clusters[0].cluster", "x", "clusters[0].cluster is 'x' (a string) where a kubeconfig"),
        ("users[0].user", [1], "users[0].user is a list where a kubeconfig has a mapping"),
        ("clusters[0].name", 5, "clusters[0].name is 5 (a number) where a kubeconfig has a string"),
        ("current-context", ["fake"], "current-context is a list where a kubeconfig has a string"),
        (
            "clusters[0].cluster.insecure-skip-tls-verify",
            "true",
            "insecure-skip-tls-verify is 'true' (a string) where a kubeconfig has true or false",
        ),
    ],
)
def test_a_field_of_the_wrong_type_is_named_with_its_file(
    tmp_path: Path, where: str, value: Any, said: str
) -> None:
    """kubectl refuses a kubeconfig whose field has another type ("cannot unmarshal number into
    Go struct field Config.clusters"): refused too, naming the file, the field and what it
    should be, not in Python's words ("'int' object is not iterable"), with a traceback (a
    context that is a string) or quietly (a cluster that is a string talked to localhost, a
    user that is a list as anonymous)."""
    path = write_kubeconfig(tmp_path / "config", server="https://127.0.0.1:1", token="t")
    config = yaml.safe_load(path.read_text())
    _set(config, where, value)
    path.write_text(yaml.safe_dump(config))
    message = refusal(path)
    assert f"{path}: {where}" in message and said in message, message
    assert "kubectl refuses the file too" in message and "object" not in message, message
