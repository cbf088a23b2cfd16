"""The command line as a user meets it: `stszone review`, and --help on every command."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders as b
from tests.helpexamples import ROOT, help_examples, run_example
from tests.process import clean_environ
from webhook import cli
from webhook.cli import build_parser, settings_from
from webhook.wire.patch import apply

FIXTURES = Path(__file__).parent / "fixtures" / "admission"
COMMANDS = ["serve", "review", "certs", "manifests", "audit"]


def review_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    """Run `stszone review ...` in-process; return (exit status, parsed stdout or None, stderr)."""
    status = cli.main(["review", *args])
    out, err = capsys.readouterr()
    return status, (json.loads(out) if out.strip() else None), err


def test_review_answers_the_whole_chain(capsys: pytest.CaptureFixture[str]) -> None:
    """A recorded Pod CREATE: the mutation's patch, validated after being applied."""
    status, body, _ = review_cli(capsys, "--zones", "a,b,c", str(FIXTURES / "011-Pod-CREATE.json"))
    assert status == 0
    sent = b.fixture_review("011-Pod-CREATE")
    response = body["response"]
    assert response["uid"] == sent["request"]["uid"] and response["allowed"] is True
    pod = apply(sent["request"]["object"], json.loads(base64.b64decode(response["patch"])))
    assert pod["metadata"]["annotations"]["stszone.io/zone"] == "c"  # db-2 -> zones[2]


def test_review_chain_denial_wins(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A pod whose own nodeSelector excludes its zone: denied, exit status still 0."""
    pod = b.sts_pod(ordinal=0, node_selector={"topology.kubernetes.io/zone": "b"})
    path = tmp_path / "review.json"
    path.write_text(json.dumps(b.review(pod)))
    status, body, _ = review_cli(capsys, "--zones", "a,b,c", str(path))
    assert status == 0 and body["response"]["allowed"] is False
    assert "nodeSelector topology.kubernetes.io/zone=b" in body["response"]["status"]["message"]


def test_review_chain_answers_a_deeply_nested_object_as_each_endpoint_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A field nested 900 levels deep (the review decoder reads up to the recursion limit):
    each endpoint alone answers it, and so does the chain, which validates the patched pod."""
    pod = b.sts_pod(ordinal=1)
    deep: dict[str, Any] = {}
    pod["spec"]["extra"] = deep
    for _ in range(900):
        deep["a"] = {}
        deep = deep["a"]
    path = tmp_path / "review.json"
    path.write_text(json.dumps(b.review(pod)))
    _, mutated, _ = review_cli(capsys, "--zones", "a,b,c", "--endpoint", "mutate", str(path))
    status, body, err = review_cli(capsys, "--zones", "a,b,c", str(path))
    assert (status, err) == (0, "")
    assert body["response"]["allowed"] is True
    assert body["response"]["patch"] == mutated["response"]["patch"]


def test_review_one_endpoint_alone(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--endpoint validate judges the object as sent: an unmutated pod lacks its zone."""
    path = tmp_path / "review.json"
    path.write_text(json.dumps(b.review(b.sts_pod(ordinal=1))))
    status, body, _ = review_cli(capsys, "--zones", "a,b,c", "--endpoint", "validate", str(path))
    assert status == 0 and body["response"]["allowed"] is False
    status, body, _ = review_cli(capsys, "--zones", "a,b,c", "--endpoint", "mutate", str(path))
    assert body["response"]["patchType"] == "JSONPatch"


def test_review_reads_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`-` reads the review from standard input."""
    data = (FIXTURES / "035-Pod-CREATE.json").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    status, body, _ = review_cli(capsys, "--zones", "a,b,c", "-")
    assert status == 0 and body["response"] == {
        "uid": b.fixture_review("035-Pod-CREATE")["request"]["uid"],
        "allowed": True,
    }


def test_review_help_example_reading_stdin_runs_as_written() -> None:
    """The example of `stszone review --help` that reads `-` answers the review it is given."""
    (example,) = [line for line in help_examples("review") if "-" in line.split()]
    done = run_example(example, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["kind"] == "AdmissionReview" and answer["response"]["uid"]


def test_review_reads_a_cluster_file_saved_as_utf16_and_refuses_one_that_is_not_text(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`kubectl get ... -o yaml > cluster.yaml` in Windows PowerShell writes UTF-16 with a byte
    order mark: YAML allows it, and the zones of its nodes are read; bytes that are no text
    are refused, exit 2."""
    nodes = {"kind": "List", "items": [b.node(f"n-{z}", z) for z in ("x", "y", "z")]}
    cluster = tmp_path / "cluster.yaml"
    cluster.write_bytes(yaml.safe_dump(nodes).encode("utf-16"))
    path = tmp_path / "review.json"
    path.write_text(json.dumps(b.review(b.sts_pod(ordinal=1))))
    status, body, err = review_cli(capsys, "--cluster", str(cluster), str(path))
    assert (status, err) == (0, ""), err
    patch = json.loads(base64.b64decode(body["response"]["patch"]))
    assert {"stszone.io/zone": "y"} in [op["value"] for op in patch]
    cluster.write_bytes(b"kind: List\nitems: [\xff]\n")
    status, body, err = review_cli(capsys, "--cluster", str(cluster), str(path))
    assert (status, body) == (2, None)
    assert err.startswith(f"stszone review: cluster file {cluster} is not YAML or JSON")


@pytest.mark.parametrize(
    "recorded",
    ["023-StatefulSet-UPDATE.json", "../kruise/admission/011-all-StatefulSet-UPDATE-web.json"],
)
def test_review_of_a_statefulset_update_without_its_old_object_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, recorded: str
) -> None:
    """A hand-written UPDATE that leaves out oldObject is refused naming oldObject, not as a
    set whose metadata.name is missing: the object it does carry is named."""
    sent = json.loads((FIXTURES / recorded).read_text())
    del sent["request"]["oldObject"]
    path = tmp_path / "review.json"
    path.write_text(json.dumps(sent))
    status, body, _ = review_cli(capsys, "--zones", "a,b,c", str(path))
    assert status == 0
    response = body["response"]
    assert response["allowed"] is False and response["status"]["code"] == 400
    assert "oldObject" in response["status"]["message"], response
    assert "metadata.name" not in response["status"]["message"]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "not valid JSON"),
        ('{"kind": "Pod"}', "kind must be AdmissionReview"),
        (None, "cannot read"),
    ],
)
def test_review_malformed_file_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str | None, says: str
) -> None:
    """Exit 2, nothing on stdout, one line on stderr saying what is wrong."""
    path = tmp_path / "review.json"
    if content is not None:
        path.write_text(content)
    status, body, err = review_cli(capsys, "--zones", "a,b,c", str(path))
    assert (status, body) == (2, None)
    assert err.startswith("stszone review: ") and says in err and err.count("\n") == 1


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_examples(command: str) -> None:
    """`stszone COMMAND --help` (through the real console entry) shows its examples."""
    done = subprocess.run(
        [sys.executable, "-m", "webhook", command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "examples:" in done.stdout and f"stszone {command}" in done.stdout


def test_bad_zones_flag_is_refused_by_argparse(capsys: pytest.CaptureFixture[str]) -> None:
    """A duplicated zone in --zones is a usage error (exit 2) naming the problem."""
    with pytest.raises(SystemExit) as exited:
        cli.main(["review", "--zones", "a,a", "x.json"])
    assert exited.value.code == 2
    assert "lists a more than once" in capsys.readouterr().err


def test_loop_flag_picks_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """--loop uvloop (the default) builds uvloop's loop, --loop asyncio asyncio's own; without
    uvloop installed, --loop uvloop is a ConfigError that names the way out."""
    import asyncio

    from webhook.cli.serve import loop_factory
    from webhook.errors import ConfigError

    assert settings_from(build_parser().parse_args(["serve"])).loop == "uvloop"
    loop = loop_factory("uvloop")()
    try:
        assert type(loop).__module__.startswith("uvloop")
    finally:
        loop.close()
    loop = loop_factory("asyncio")()
    try:
        assert isinstance(loop, asyncio.BaseEventLoop)
    finally:
        loop.close()
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now raises ImportError
    with pytest.raises(ConfigError, match="--loop asyncio"):
        loop_factory("uvloop")


def test_zone_risk_interval_flag_sets_the_refresh_and_refuses_non_positive(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--zone-risk-interval reaches Settings; 0, negative, nan, inf and words are refused."""
    parser = build_parser()
    assert settings_from(parser.parse_args(["serve"])).zone_risk_interval == 30.0
    given = parser.parse_args(["serve", "--zone-risk-interval", "2.5"])
    assert settings_from(given).zone_risk_interval == 2.5
    for bad in ("0", "-1", "nan", "inf", "soon"):
        with pytest.raises(SystemExit):
            parser.parse_args(["serve", "--zone-risk-interval", bad])
        assert "is not a number of seconds above 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--port", "99999", "'99999' is not a port (0 to 65535)"),
        ("--port", "-1", "'-1' is not a port (0 to 65535)"),
        ("--port", "https", "'https' is not a port (0 to 65535)"),
        ("--metrics-port", "70000", "'70000' is not a port (1 to 65535)"),
        ("--metrics-port", "0", "'0' is not a port (1 to 65535)"),
    ],
)
def test_a_port_out_of_range_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], flag: str, value: str, says: str
) -> None:
    """A port outside 1..65535 (0 too for --port: the kernel picks one) exits 2 naming the
    flag; the event loop would otherwise listen on the value modulo 65536."""
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["serve", flag, value])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"argument {flag}: {says}")


@pytest.mark.parametrize(
    "args",
    [
        pytest.param([], id="the overview"),
        pytest.param(["audit", "--cluster", "deploy/examples/guard/cluster.yaml"], id="audit"),
        pytest.param(
            ["explain", "--cluster", "deploy/examples/kafka/cluster.yaml", "knp/broker"],
            id="explain, more than a buffer",
        ),
    ],
)
def test_a_reader_that_stops_early_ends_the_command_quietly(args: list[str]) -> None:
    """``stszone audit ... | head -7`` (docs/guard.md): once the reader has gone, the command
    stops as ``cat`` or ``grep`` would, with no traceback and the status a shell gives a command
    ended by SIGPIPE (128 + 13)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhook", *args],
        cwd=ROOT,
        env=clean_environ(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.stdout.close()  # the reader is gone before the first line is written
    _, err = proc.communicate(timeout=60)
    assert err.decode() == ""
    assert proc.returncode == 141


def _cluster_file(tmp_path: Path, *objects: dict[str, Any]) -> str:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))
    return str(path)


def _namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def test_review_of_a_namespace_not_opted_in_is_allowed_unchanged(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The namespaceSelector keeps namespace ns (no stszone.io/enabled=true) from stszone, so
    the API server admits its pods unchanged: review answers so, and says why on stderr, as
    explain says "not opted in" there. Opted in, the same pod gets its zone."""
    path = tmp_path / "review.json"
    path.write_text(json.dumps(b.review(b.sts_pod(ordinal=1))))
    nodes = [b.node("n1", "a"), b.node("n2", "b"), b.node("n3", "c")]
    cluster = _cluster_file(tmp_path, _namespace("ns"), *nodes)
    status, body, err = review_cli(capsys, "--cluster", cluster, str(path))
    assert status == 0 and body["response"] == {"uid": body["response"]["uid"], "allowed": True}
    assert err == (
        "stszone review: not sent to stszone: namespace ns is not opted in (label "
        "stszone.io/enabled=true)\n"
    )
    opted = _cluster_file(tmp_path, _namespace("ns", **{"stszone.io/enabled": "true"}), *nodes)
    status, body, err = review_cli(capsys, "--cluster", opted, str(path))
    assert body["response"]["patchType"] == "JSONPatch" and err == ""


def test_review_of_a_statefulset_labelled_skip_is_allowed_unchanged(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The objectSelector (stszone.io/skip NotIn [true]) matches neither the set nor its old
    version, so the API server never sends this scale-down from 3 to 1, which would drop zones
    b and c: review allows it. With the label on the new object only, the old one matches, the
    request is sent, and the guard refuses it."""
    skip = {"stszone.io/skip": "true"}
    zones = {"stszone.io/zones": "a,b,c"}
    old = b.statefulset(replicas=3, templates=(), annotations=zones)
    new = b.statefulset(replicas=1, templates=(), annotations=zones)
    old["metadata"]["labels"] = new["metadata"]["labels"] = skip
    pods = [b.sts_pod(ordinal=i, claims=(), node=f"n{i}") for i in range(3)]
    nodes = [b.node("n0", "a"), b.node("n1", "b"), b.node("n2", "c")]
    cluster = _cluster_file(tmp_path, *nodes, old, *pods)
    path = tmp_path / "review.json"
    path.write_text(json.dumps(b.review(new, operation="UPDATE", old=old)))
    status, body, err = review_cli(capsys, "--cluster", cluster, str(path))
    assert status == 0 and body["response"]["allowed"] is True
    assert (
        err
        == "stszone review: not sent to stszone: the StatefulSet is labelled stszone.io/skip=true\n"
    )
    del old["metadata"]["labels"]
    path.write_text(json.dumps(b.review(new, operation="UPDATE", old=old)))
    status, body, err = review_cli(capsys, "--cluster", cluster, str(path))
    assert body["response"]["allowed"] is False and err == ""
