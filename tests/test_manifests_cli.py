"""`stszone manifests` on the command line: the caBundle, the Secret, and the refusals."""

from __future__ import annotations

import base64
import datetime as dt
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import webhook
from tests.helpexamples import help_examples, run_example
from tests.rendered import DEPLOY, Obj, only, validate, webhooks
from tests.tools import require
from webhook.cli import main
from webhook.config import SECRET_NAME
from webhook.errors import ConfigError
from webhook.install import deploybase, deployfiles
from webhook.install.certfiles import issue
from webhook.install.pemcheck import check_serving_pair


def _issue(root: Path, name: str, namespace: str) -> Path:
    out = root / name
    issue(out, service="stszone", namespace=namespace)
    return out


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Pairs under one root: ``system`` and ``prod`` (two namespaces), ``other`` (another CA)."""
    root = tmp_path_factory.mktemp("pairs")
    _issue(root, "system", "stszone-system")
    _issue(root, "prod", "webhooks-prod")
    _issue(root, "other", "stszone-system")
    return root


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[Obj], str]:
    """Run `stszone manifests ARGS`; return (exit status, printed objects, stderr)."""
    status = main(["manifests", *args])
    captured = capsys.readouterr()
    objects = [doc for doc in yaml.safe_load_all(captured.out) if doc] if status == 0 else []
    return status, objects, captured.err


def test_ca_bundle_is_the_ca_file_and_the_secret_holds_the_pair(
    capsys: pytest.CaptureFixture[str], certs: Path
) -> None:
    """Both webhooks trust exactly --ca; the Secret the Deployment mounts holds the pair."""
    pair = certs / "system"
    status, objects, _ = run(capsys, "--ca", str(pair / "ca.crt"))
    assert status == 0
    validate(objects)
    expected = base64.b64encode((pair / "ca.crt").read_bytes()).decode()
    assert [hook["clientConfig"]["caBundle"] for _, hook in webhooks(objects)] == [expected] * 2
    secret = only(objects, "Secret")
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"] == {
        "name": SECRET_NAME,
        "namespace": "stszone-system",
        "labels": deploybase.SELECTOR,
    }
    for name in ("tls.crt", "tls.key"):
        assert base64.b64decode(secret["data"][name]) == (pair / name).read_bytes()
    kinds = [obj["kind"] for obj in objects]
    assert kinds.index("Secret") < kinds.index("Deployment")
    assert kinds[-2:] == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]


def test_namespace_flag_moves_every_reference(
    capsys: pytest.CaptureFixture[str], certs: Path
) -> None:
    """--namespace with a pair issued for it: nothing still names stszone-system."""
    pair = certs / "prod"
    status, objects, _ = run(capsys, "--ca", str(pair / "ca.crt"), "--namespace", "webhooks-prod")
    assert status == 0
    assert "stszone-system" not in deployfiles.dump(objects)
    assert only(objects, "Secret")["metadata"]["namespace"] == "webhooks-prod"
    for _, hook in webhooks(objects):
        assert hook["clientConfig"]["service"]["namespace"] == "webhooks-prod"
        assert "webhooks-prod" in hook["namespaceSelector"]["matchExpressions"][0]["values"]


def test_image_and_no_secret(capsys: pytest.CaptureFixture[str], certs: Path) -> None:
    """--image sets the container image; --no-secret leaves the Secret out."""
    ca = str(certs / "system" / "ca.crt")
    status, objects, _ = run(
        capsys, "--ca", ca, "--image", "registry.example/stszone:9", "--no-secret"
    )
    assert status == 0
    assert "Secret" not in {obj["kind"] for obj in objects}
    containers = only(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert containers[0]["image"] == "registry.example/stszone:9"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--cert", "{system}/tls.crt", "--key", "{system}/tls.key"), "go with --ca"),
        (("--no-secret",), "go with --ca"),
        (("--component", "provided-certs"), "write it with --kustomize-dir"),
        (("--ca", "{system}/missing.crt"), "cannot read the CA file"),
        (("--ca", "{system}/tls.key"), "holds a private key, not a certificate"),
        (("--ca", "{system}/tls.key", "--no-secret"), "holds a private key, not a certificate"),
        (("--ca", "{system}/ca.crt", "--namespace", "webhooks-prod"), "stszone.webhooks-prod.svc"),
        (
            ("--ca", "{other}/ca.crt", "--cert", "{system}/tls.crt", "--key", "{system}/tls.key"),
            "not signed by the CA",
        ),
        (
            ("--ca", "{system}/ca.crt", "--cert", "{system}/tls.crt", "--key", "{other}/tls.key"),
            "does not belong",
        ),
        (("--ca", "{system}/ca.crt", "--namespace", "Bad_NS"), "is not a namespace name"),
        (("--ca", "{system}/ca.crt", "--image", ""), "is not an image reference"),
        (
            ("--kustomize-dir", "{system}/base", "--ca", "{system}/ca.crt"),
            "without certificate material",
        ),
        (
            ("--ca", "{system}/ca.crt", "--base", "{system}/ca.crt", "--no-match-conditions"),
            "components/no-match-conditions",
        ),
    ],
)
def test_refusals(
    capsys: pytest.CaptureFixture[str], certs: Path, args: tuple[str, ...], message: str
) -> None:
    """A pair the API server would refuse, or a bad flag, exits 2 with a message; prints nothing."""
    filled = [arg.format(system=certs / "system", other=certs / "other") for arg in args]
    status = main(["manifests", *filled])
    captured = capsys.readouterr()
    assert status == 2
    assert message in captured.err
    assert captured.out == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--ca", "{system}/missing.crt"),
            "cannot read the CA file {system}/missing.crt (--ca): No such file or directory",
        ),
        (("--ca", "{empty}"), "the CA file {empty} (--ca) holds no PEM certificate"),
        (("--ca", "{system}/tls.key"), "the CA file {system}/tls.key (--ca) holds a private key"),
        (
            ("--ca", "{system}/ca.crt", "--cert", "{empty}", "--key", "{system}/tls.key"),
            "the serving certificate file {empty} (--cert) holds no PEM certificate",
        ),
        (
            ("--ca", "{system}/ca.crt", "--cert", "{system}/tls.crt", "--key", "{system}/ca.crt"),
            "the serving key {system}/ca.crt (--key) holds a certificate, not a private key",
        ),
        (
            ("--ca", "{system}/ca.crt", "--key", "{other}/tls.key"),
            "the serving key {other}/tls.key (--key) does not belong to the serving certificate "
            "file {system}/tls.crt (tls.crt beside --ca)",
        ),
    ],
)
def test_pem_refusals_name_the_file_and_its_flag(
    capsys: pytest.CaptureFixture[str],
    certs: Path,
    tmp_path: Path,
    args: tuple[str, ...],
    message: str,
) -> None:
    """Of three PEM files, the one to fix is named by its path and the flag that gave it (or
    as the file read beside --ca), not as "the CA file"."""
    empty = tmp_path / "empty.crt"
    empty.write_bytes(b"")
    names = {"system": certs / "system", "other": certs / "other", "empty": empty}
    status, objects, err = run(capsys, *(arg.format(**names) for arg in args))
    assert (status, objects) == (2, [])
    assert err.startswith(f"stszone manifests: {message.format(**names)}"), err
    assert err.count("\n") == 1, err


def test_base_file_gets_the_bundle_and_keeps_its_patches(
    capsys: pytest.CaptureFixture[str], certs: Path, tmp_path: Path
) -> None:
    """--base fills a rendered overlay (here: failurePolicy Ignore) instead of the built-in base."""
    objects = deployfiles.base_objects(deploybase.Install(certs="provided"))
    for _, hook in webhooks(objects):
        hook["failurePolicy"] = "Ignore"
    base = tmp_path / "dev.yaml"
    base.write_text(deployfiles.dump(objects))
    status, printed, _ = run(capsys, "--ca", str(certs / "system" / "ca.crt"), "--base", str(base))
    assert status == 0
    assert [hook["failurePolicy"] for _, hook in webhooks(printed)] == ["Ignore", "Ignore"]
    assert all("caBundle" in hook["clientConfig"] for _, hook in webhooks(printed))
    assert only(printed, "Secret")["metadata"]["namespace"] == "stszone-system"


def test_a_base_file_running_manage_certs_is_refused_with_ca(
    capsys: pytest.CaptureFixture[str], certs: Path, tmp_path: Path
) -> None:
    """The default base makes its own certificates: filling in a CA for it would do nothing."""
    base = tmp_path / "managed.yaml"
    base.write_text(deployfiles.dump(deployfiles.base_objects(deploybase.Install())))
    status = main(["manifests", "--ca", str(certs / "system" / "ca.crt"), "--base", str(base)])
    captured = capsys.readouterr()
    assert status == 2 and captured.out == ""
    assert "runs `stszone serve --manage-certs`" in captured.err
    assert "deploy/components/provided-certs" in captured.err


NOT_AN_OBJECT = "holds something that is not a Kubernetes object"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("apiVersion: v1\nkind: List\nitems:\n", NOT_AN_OBJECT),
        ("apiVersion: v1\nkind: List\nitems: 7\n", NOT_AN_OBJECT),
        ("apiVersion: v1\nkind: Service\nmetadata:\n", NOT_AN_OBJECT),
        ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n", NOT_AN_OBJECT),
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {template:}\n",
            "must hold exactly one Service named stszone",
        ),
    ],
)
def test_a_malformed_base_file_is_one_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str], certs: Path, tmp_path: Path, text: str, message: str
) -> None:
    """Null where a List's items, an object's metadata or spec belong (`metadata:` alone is
    YAML's null) is refused like any other non-object; a null deeper down reads as absent."""
    base = tmp_path / "base.yaml"
    base.write_text(text)
    status = main(["manifests", "--ca", str(certs / "system" / "ca.crt"), "--base", str(base)])
    captured = capsys.readouterr()
    assert (status, captured.out) == (2, "")
    assert captured.err.startswith("stszone manifests: ") and message in captured.err
    assert captured.err.count("\n") == 1


def test_without_ca_it_prints_the_self_managed_base(capsys: pytest.CaptureFixture[str]) -> None:
    """No --ca: the base as it is (its webhook makes its own certificates), no Secret."""
    status, printed, _ = run(capsys, "--namespace", "webhooks-prod")
    assert status == 0
    assert printed == deployfiles.base_objects(deploybase.Install(namespace="webhooks-prod"))
    assert "Secret" not in {obj["kind"] for obj in printed}
    assert (
        "--manage-certs"
        in only(printed, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    )


@pytest.mark.parametrize("example", help_examples("manifests"))
def test_every_help_example_runs_as_written(example: str, tmp_path: Path) -> None:
    """Each example of `stszone manifests --help`, in a copy of the repository's deploy/ that
    also holds what the help says the examples take: certs/ from `stszone certs`, a pair for
    namespace webhooks, and platform/stszone, an overlay of deploy/base with the component
    deploy/components/provided-certs. Nothing is applied: what an example pipes to
    `kubectl apply -f -` goes to a file instead."""
    if "kubectl kustomize" in example:
        require("kubectl", why="the --base example (kubectl kustomize)")
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    if "stszone certs --out certs" not in example:
        _issue(tmp_path, "certs", "stszone-system")
    issue(tmp_path, service="stszone", namespace="webhooks")
    overlay = tmp_path / "platform" / "stszone"
    overlay.mkdir(parents=True)
    kustomization = {
        "resources": ["../../deploy/base"],
        "components": ["../../deploy/components/provided-certs"],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    applied = tmp_path / "applied.yaml"
    done = run_example(example.replace("| kubectl apply -f -", f"> {applied}"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    if "--kustomize-dir" not in example:
        printed = applied.read_text() if applied.exists() else done.stdout
        kinds = {obj["kind"] for obj in yaml.safe_load_all(printed) if obj}
        assert {"Deployment", "ValidatingWebhookConfiguration"} <= kinds


def test_kustomize_dir_writes_the_base_and_protects_foreign_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The directory gets the generated files; a file it did not write is never overwritten."""
    out = tmp_path / "base"
    assert main(["manifests", "--kustomize-dir", str(out)]) == 0
    expected = deployfiles.kustomize_files(deploybase.Install())
    assert {path.name: path.read_text() for path in out.iterdir()} == expected
    assert main(["manifests", "--kustomize-dir", str(out)]) == 0  # regenerating is fine
    (out / "rbac.yaml").write_text("# mine\n")
    assert main(["manifests", "--kustomize-dir", str(out)]) == 2
    assert "was not written by `stszone manifests`" in capsys.readouterr().err
    assert (out / "rbac.yaml").read_text() == "# mine\n"


@pytest.mark.parametrize("component", [[], ["--component", "rebalance"]])
def test_a_kustomize_dir_that_cannot_be_made_is_one_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, component: list[str]
) -> None:
    """A --kustomize-dir under a file (or one that is a file) is refused with one line naming
    it, exit 2, as `stszone certs --out` refuses a directory it cannot write."""
    taken = tmp_path / "taken"
    taken.write_text("a file\n")
    for where in (taken / "base", taken):
        assert main(["manifests", *component, "--kustomize-dir", str(where)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("stszone manifests: cannot write ") and str(taken) in err
        assert err.count("\n") == 1 and "choose another --kustomize-dir" in err
    assert taken.read_text() == "a file\n"


def test_expiry_is_an_error_and_a_near_expiry_a_warning(certs: Path) -> None:
    """An expired serving certificate is refused; one about to expire is printed with a warning."""
    pair = {
        name: (certs / "system" / name).read_bytes() for name in ("ca.crt", "tls.crt", "tls.key")
    }
    host = "stszone.stszone-system.svc"

    def check(days: int) -> list[str]:
        now = dt.datetime.now(dt.UTC) + dt.timedelta(days=days)
        return check_serving_pair(
            ca_pem=pair["ca.crt"],
            cert_pem=pair["tls.crt"],
            key_pem=pair["tls.key"],
            host=host,
            now=now,
        )

    assert check(0) == []
    assert any("expires on" in warning for warning in check(350))
    with pytest.raises(ConfigError, match="expired on"):
        check(400)


@pytest.mark.parametrize(
    ("host", "accepted"),
    [
        ("stszone.webhooks-prod.svc", True),
        ("STSZONE.webhooks-prod.svc", True),
        ("a.stszone.webhooks-prod.svc", False),
        ("webhooks-prod.svc", False),
    ],
)
def test_wildcard_names_cover_one_label(tmp_path: Path, host: str, accepted: bool) -> None:
    """`*.NS.svc` covers `stszone.NS.svc` and nothing deeper, as the API server's TLS client."""
    issue(tmp_path, service="unrelated", namespace="elsewhere", dns=["*.webhooks-prod.svc"])
    pems = {name: (tmp_path / name).read_bytes() for name in ("ca.crt", "tls.crt", "tls.key")}
    try:
        check_serving_pair(
            ca_pem=pems["ca.crt"], cert_pem=pems["tls.crt"], key_pem=pems["tls.key"], host=host
        )
    except ConfigError:
        assert not accepted
    else:
        assert accepted


def test_renders_from_the_package_alone_without_the_repository(tmp_path: Path) -> None:
    """A pip-installed stszone has only the package: rendering must not read deploy/ or any file."""
    site, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    shutil.copytree(
        Path(webhook.__file__).parent,
        site / "webhook",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    elsewhere.mkdir()

    def python(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, *args],
            cwd=elsewhere,
            env={**os.environ, "PYTHONPATH": str(site)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert python("-c", "import webhook; print(webhook.__file__)").startswith(str(site))
    python("-m", "webhook", "manifests", "--kustomize-dir", "out")
    written = {path.name: path.read_text() for path in (elsewhere / "out").iterdir()}
    assert written == {path.name: path.read_text() for path in (DEPLOY / "base").iterdir()}


@pytest.mark.parametrize("folder", ["certs", "pairs/system"])
def test_the_hint_for_a_pair_of_another_namespace_reissues_the_pair_given(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    folder: str,
) -> None:
    """A pair issued for stszone-system, installed into webhooks-prod: the refusal's `stszone
    certs` command, run as written, re-issues the pair that was given for webhooks-prod, in
    certs/ or elsewhere, and the same manifests command then prints."""
    monkeypatch.chdir(tmp_path)
    issue(Path(folder), service="stszone", namespace="stszone-system")
    args = ["--ca", f"{folder}/ca.crt", "--namespace", "webhooks-prod"]
    status, _, err = run(capsys, *args)
    assert status == 2, err
    (hint,) = re.findall(r"`(stszone certs [^`]*)`", err)
    assert main(shlex.split(hint)[1:]) == 0
    capsys.readouterr()
    status, objects, err = run(capsys, *args)
    assert status == 0, err
    assert only(objects, "Secret")["metadata"]["namespace"] == "webhooks-prod"


def test_a_base_from_standard_input_is_named_so(
    capsys: pytest.CaptureFixture[str], certs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kubectl kustomize ... | stszone manifests --base -` piping in no overlay: the refusal
    names standard input, as the other readers of `-` do, not a file called `-`."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"kind": "ConfigMap"}')))
    status = main(["manifests", "--ca", str(certs / "system" / "ca.crt"), "--base", "-"])
    captured = capsys.readouterr()
    assert (status, captured.out) == (2, "")
    assert captured.err.startswith(f"stszone manifests: - (standard input) {NOT_AN_OBJECT}")


@pytest.mark.parametrize(
    ("flag", "piped", "said"),
    [
        ("--cert", "tls.key", "the serving certificate file on standard input (--cert) holds a "),
        ("--key", "ca.crt", "the serving key on standard input (--key) holds a certificate"),
    ],
)
def test_a_pair_file_from_standard_input_is_named_so(
    capsys: pytest.CaptureFixture[str],
    certs: Path,
    monkeypatch: pytest.MonkeyPatch,
    flag: str,
    piped: str,
    said: str,
) -> None:
    """`... | stszone manifests --cert -` (or `--key -`) piping in the wrong PEM: the refusal
    names standard input and the flag, not a file called `-`."""
    system = certs / "system"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((system / piped).read_bytes())))
    pair = {"--cert": str(system / "tls.crt"), "--key": str(system / "tls.key"), flag: "-"}
    status, objects, err = run(
        capsys, "--ca", str(system / "ca.crt"), *(a for kv in pair.items() for a in kv)
    )
    assert (status, objects) == (2, [])
    assert err.startswith(f"stszone manifests: {said}"), err


@pytest.mark.parametrize(
    "piped",
    [("--ca", "--cert"), ("--cert", "--key"), ("--ca", "--base"), ("--ca", "--cert", "--key")],
    ids=lambda flags: "+".join(flags),
)
def test_standard_input_is_given_to_one_file_only(
    capsys: pytest.CaptureFixture[str],
    certs: Path,
    monkeypatch: pytest.MonkeyPatch,
    piped: tuple[str, ...],
) -> None:
    """Standard input holds one file: a second reader of `-` gets nothing (the second file
    read as empty). Two flags given `-` are refused naming both, as kubectl refuses two
    `-f -`; the others come from files."""
    pair = certs / "system"
    files = {"--ca": "ca.crt", "--cert": "tls.crt", "--key": "tls.key"}
    args = [a for flag, name in files.items() for a in (flag, str(pair / name))]
    for flag in piped:
        args += [flag, "-"]  # the last of a repeated flag counts (argparse)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((pair / "ca.crt").read_bytes())))
    status, objects, err = run(capsys, *args)
    assert (status, objects) == (2, [])
    named = f"{', '.join(piped[:-1])} and {piped[-1]}"
    assert err == (
        f"stszone manifests: {named} each name - (standard input), which holds only one file; "
        "give one of them as - and the others as files\n"
    )
