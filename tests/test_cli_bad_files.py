"""Bad files handed to the command line: each is one line on stderr and exit 2, never a
traceback (what `stszone audit`, `explain`, `review` and `manifests --base` meet when a file is
hand-written, truncated or not what the user meant to give)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.hang import HANG_GUARD
from tests.process import clean_environ
from webhook import cli
from webhook.cli import plugin
from webhook.install.certfiles import ensure_dev_certs

ROOT = Path(__file__).resolve().parents[1]
GUARD = ROOT / "deploy" / "examples" / "guard"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``stszone ARGS`` in-process: (exit status, stdout, stderr)."""
    status = cli.main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def guard_cluster(tmp_path: Path, *, replicas: Any) -> str:
    """The guard example's cluster with shop/db at ``replicas``."""
    doc = yaml.safe_load((GUARD / "cluster.yaml").read_text())
    for item in doc["items"]:
        if item["kind"] == "StatefulSet" and item["metadata"]["name"] == "db":
            item["spec"]["replicas"] = replicas
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.mark.parametrize("command", [["audit"], ["explain", "-n", "shop", "sts/db"]])
def test_a_replica_count_beyond_int32_in_a_cluster_file_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str]
) -> None:
    """``replicas: 10**30`` (no API server stores it: the field is int32) is the file's item
    named, exit 2, not an OverflowError traceback."""
    cluster = guard_cluster(tmp_path, replicas=10**30)
    status, out, err = run(capsys, *command, "--cluster", cluster)
    assert (status, out) == (2, ""), err
    assert err.startswith(f"stszone {command[0]}: {cluster}: item "), err
    assert "spec.replicas must be a 32-bit integer" in err and err.count("\n") == 1, err


def test_int32_largest_replica_count_is_still_audited(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """2**31 - 1, the largest count Kubernetes stores, is judged (not refused)."""
    status, _, err = run(capsys, "audit", "--cluster", guard_cluster(tmp_path, replicas=2**31 - 1))
    assert status == 1 and "32-bit" not in err, err


def test_review_of_a_scale_from_beyond_int32_is_a_bad_object(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A Scale review whose oldObject holds replicas 10**30 is answered as a malformed object
    (code 400), as a string there is, not with an OverflowError traceback."""
    review = json.loads((GUARD / "scale-db-6-to-3.json").read_text())
    sent = copy.deepcopy(review)
    sent["request"]["oldObject"]["spec"]["replicas"] = 10**30
    path = tmp_path / "review.json"
    path.write_text(json.dumps(sent))
    status, out, err = run(capsys, "review", "--cluster", str(GUARD / "cluster.yaml"), str(path))
    assert status == 0, err
    response = json.loads(out)["response"]
    assert response["allowed"] is False and response["status"]["code"] == 400
    assert "spec.replicas must be a 32-bit integer" in response["status"]["message"]


#: Nested deeper than PyYAML's composer can recurse: `[[[[...]]]]` of 100000 levels.
TOO_DEEP = "[" * 100_000 + "]" * 100_000


def test_a_cluster_file_nested_too_deeply_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """One line naming the file, exit 2, not a RecursionError traceback."""
    path = tmp_path / "cluster.json"
    path.write_text(TOO_DEEP)
    status, out, err = run(capsys, "audit", "--cluster", str(path))
    assert (status, out) == (2, ""), err
    assert err.startswith(f"stszone audit: cluster file {path} nests lists or mappings too deeply")
    assert err.count("\n") == 1, err


def test_a_base_nested_too_deeply_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``manifests --base`` of such a file: one line, exit 2, not a RecursionError traceback."""
    assert run(capsys, "certs", "--out", str(tmp_path / "certs"))[0] == 0
    base = tmp_path / "overlay.yaml"
    base.write_text(TOO_DEEP)
    ca = str(tmp_path / "certs" / "ca.crt")
    status, out, err = run(capsys, "manifests", "--ca", ca, "--base", str(base))
    assert (status, out) == (2, ""), err
    assert (
        err
        == f"stszone manifests: {base} nests lists or mappings too deeply to be a rendered overlay\n"
    )


@pytest.mark.parametrize("given", ["missing", "overlay dir"])
def test_a_base_that_does_not_read_names_the_flag_and_how_to_render_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, given: str
) -> None:
    """``--base`` of a path that does not exist, or of the overlay's own directory: the one
    line names --base and says how to render an overlay into what it takes."""
    assert run(capsys, "certs", "--out", str(tmp_path / "certs"))[0] == 0
    base = tmp_path / given
    if given == "overlay dir":
        base.mkdir()
    ca = str(tmp_path / "certs" / "ca.crt")
    status, out, err = run(capsys, "manifests", "--ca", ca, "--base", str(base))
    assert (status, out) == (2, ""), err
    assert err.startswith(f"stszone manifests: cannot read the --base file {base}: "), err
    shown = f"'{base}'" if given == "overlay dir" else "DIR"
    assert err.endswith(
        f"; --base takes an overlay rendered to one file: `kubectl kustomize {shown} | "
        f"stszone manifests --ca {ca} --base -`\n"
    ), err


def test_kubectl_stszone_with_a_kubeconfig_nested_too_deeply_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``kubectl stszone`` probing such a ~/.kube/config names the kubeconfig on one line,
    exit 2, not a RecursionError traceback."""
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text(TOO_DEEP)
    status = plugin.main(["audit"], environ={"HOME": str(tmp_path)})
    out, err = capsys.readouterr()
    assert (status, out) == (2, ""), err
    assert (
        err.startswith("kubectl stszone audit: cannot read the kubeconfig ")
        and err.count("\n") == 1
    )


#: Not YAML: a mapping value where a plain scalar goes (PyYAML: line 1, column 5).
NOT_YAML = "a: b: c\n"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["audit", "--cluster", "{file}"],
            "stszone audit: cluster file {file} is not YAML or JSON",
        ),
        (
            ["audit", "--kubeconfig", "{file}"],
            "stszone audit: cannot load credentials from kubeconfig {file}",
        ),
        (
            ["manifests", "--ca", "{ca}", "--base", "{file}"],
            "stszone manifests: {file} is not YAML",
        ),
    ],
)
def test_a_file_that_is_not_yaml_is_one_line_naming_where(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], said: str
) -> None:
    """PyYAML's message runs over three lines (a snippet of the file and a caret); the refusal
    is one line with the line and column, exit 2."""
    assert run(capsys, "certs", "--out", str(tmp_path / "certs"))[0] == 0
    file = tmp_path / "bad.yaml"
    file.write_text(NOT_YAML)
    names = {"file": str(file), "ca": str(tmp_path / "certs" / "ca.crt")}
    status, out, err = run(capsys, *(a.format(**names) for a in args))
    assert (status, out) == (2, ""), err
    assert err == f"{said.format(**names)}: line 1, column 5: mapping values are not allowed here\n"


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("", "it is empty"),
        (
            "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n",
            "it is a kubeconfig: give that with --kubeconfig",
        ),
        ("42\n", "no Kubernetes object"),
    ],
)
@pytest.mark.parametrize("command", ["audit", "rebalance"])
def test_a_cluster_file_holding_no_cluster_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, why: str, command: str
) -> None:
    """An empty file (kubectl failed; its `>` stayed) or a kubeconfig given as --cluster is
    refused, exit 2, saying what the file holds, rather than read as an empty cluster ('Every
    audited pod is where stszone expects it', exit 0); a saved List with no items is one."""
    path = tmp_path / "cluster.yaml"
    path.write_text(content)
    status, out, err = run(capsys, command, "--cluster", str(path))
    assert (status, out) == (2, ""), out
    assert err.startswith(f"stszone {command}: cluster file {path} holds no List ") and (
        f"({why});" in err and err.count("\n") == 1
    ), err
    path.write_text("apiVersion: v1\nitems: []\nkind: List\nmetadata:\n  resourceVersion: ''\n")
    assert run(capsys, command, "--cluster", str(path))[0] == 0


def aliased(levels: int, *, leaf: str) -> str:
    """A YAML stream of a few hundred bytes: a list of lists, each of nine aliases of the one
    before, ``9**levels`` leaves in all (PyYAML shares them; walking them does not)."""
    lines = [f"- &l0 [{', '.join([leaf] * 9)}]"]
    lines += [f"- &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("leaf", ["x", "{kind: List, items: [{kind: Node, metadata: {name: n}}]}"])
def test_a_small_cluster_file_of_aliased_lists_is_answered_without_walking_them(
    tmp_path: Path, leaf: str
) -> None:
    """A 500-byte file whose YAML aliases make lists of lists of 9**9 leaves would keep
    `stszone audit` walking them for minutes; a saved cluster is never nested so, and the file
    is refused at once: no object in it is where kubectl writes one."""
    path = tmp_path / "cluster.yaml"
    path.write_text(aliased(9, leaf=leaf))
    done = subprocess.run(
        [sys.executable, "-m", "webhook", "audit", "--cluster", str(path)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        env=clean_environ(),
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"stszone audit: cluster file {path} holds no List")


@pytest.mark.parametrize(
    ("ca", "cert", "key", "named", "said"),
    [
        ("ca.key", "tls.crt", "tls.key", ("CA file", "ca.key", "--ca"), "holds a private key"),
        (
            "ca.crt",
            "tls.key",
            "tls.key",
            ("serving certificate file", "tls.key", "--cert"),
            "holds a private key",
        ),
        (
            "ca.crt",
            "tls.crt",
            "tls.crt",
            ("serving key", "tls.crt", "--key"),
            "holds a certificate, not a private key",
        ),
    ],
)
def test_manifests_with_a_key_and_a_certificate_swapped_says_so(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    ca: str,
    cert: str,
    key: str,
    named: tuple[str, str, str],
    said: str,
) -> None:
    """A key given where a certificate goes (or the reverse) is named as the mix-up, with the
    file and its flag, not as 'holds no PEM certificate (empty, truncated?)', which sends the
    user after a damaged file."""
    certs = tmp_path / "certs"
    assert run(capsys, "certs", "--out", str(certs))[0] == 0
    args = ("--ca", str(certs / ca), "--cert", str(certs / cert), "--key", str(certs / key))
    status, out, err = run(capsys, "manifests", *args)
    assert (status, out) == (2, ""), err
    what, file, flag = named
    assert err.startswith(f"stszone manifests: the {what} {certs / file} ({flag}) {said}"), err
    assert "files swapped?" in err, err
    assert "truncated" not in err and err.count("\n") == 1


@pytest.mark.parametrize("annotations", [["x"], {"stszone.io/zone": None}])
@pytest.mark.parametrize("command", ["audit", "rebalance"])
def test_a_kafka_broker_pod_with_malformed_annotations_names_its_item(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, annotations: Any, command: str
) -> None:
    """A broker pod (no StatefulSet owner, a node pool's labels) of a cluster file whose
    annotations are malformed is the file's item named, exit 2, as a StatefulSet's pod is, not
    a BadObject traceback."""
    doc = yaml.safe_load((ROOT / "deploy" / "examples" / "kafka" / "cluster.yaml").read_text())
    index, pod = next((i, o) for i, o in enumerate(doc["items"]) if o["kind"] == "Pod")
    pod["metadata"]["annotations"] = annotations
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc))
    status, out, err = run(capsys, command, "--cluster", str(path))
    assert (status, out) == (2, ""), err
    assert err.startswith(f"stszone {command}: {path}: item {index} (Pod): metadata.annotations")
    assert err.count("\n") == 1, err


def test_an_ordinals_start_beyond_int32_names_its_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``spec.ordinals.start: 10**30`` in a cluster file is refused naming the whole field, so
    the user finds it among the item's other fields called start."""
    doc = yaml.safe_load((GUARD / "cluster.yaml").read_text())
    for item in doc["items"]:
        if item["kind"] == "StatefulSet" and item["metadata"]["name"] == "db":
            item["spec"]["ordinals"] = {"start": 10**30}
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(doc))
    status, out, err = run(capsys, "audit", "--cluster", str(cluster))
    assert (status, out) == (2, ""), err
    assert "(StatefulSet): spec.ordinals.start must be a 32-bit integer" in err, err


@pytest.mark.parametrize("missing", ["cert", "key"])
def test_serve_with_a_missing_cert_or_key_names_its_flag(tmp_path: Path, missing: str) -> None:
    """`stszone serve --cert FILE --key FILE` where one of them does not exist: the refusal
    names the file and the flag it came from, as `stszone manifests` does."""
    dev = ensure_dev_certs(tmp_path / "certs")
    files = {"cert": str(dev.cert), "key": str(dev.key)}
    files[missing] = str(tmp_path / "nowhere.pem")
    what = {"cert": "serving certificate file", "key": "serving key"}[missing]
    flags = ["--host", "127.0.0.1", "--port", "0", "--cert", files["cert"], "--key", files["key"]]
    done = subprocess.run(
        [sys.executable, "-m", "webhook", "serve", "--offline", "--zones", "a,b,c", *flags],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        env=clean_environ(),
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"stszone serve: cannot read the {what} {tmp_path / 'nowhere.pem'} (--{missing}): "
        "No such file or directory"
    ), done.stderr
