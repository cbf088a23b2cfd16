"""``--cluster -``: the saved cluster read from standard input, as kubectl's ``-f -`` reads it,
so that ``kubectl get ... -o json | stszone audit --cluster -`` needs no file in between."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpexamples import help_examples, run_example
from webhook import cli

ROOT = Path(__file__).resolve().parents[1]
GUARD = ROOT / "deploy" / "examples" / "guard"
CLUSTER = GUARD / "cluster.yaml"

#: Every command that takes --cluster and prints from it alone (serve reads it the same way).
COMMANDS = [
    ["audit"],
    ["audit", "-o", "json"],
    ["explain", "sts/db"],
    ["rebalance", "-o", "json"],
    ["review", str(GUARD / "scale-db-6-to-3.json")],
]


def as_json(path: Path) -> bytes:
    """The saved cluster as `kubectl get ... -o json` prints it."""
    return json.dumps(yaml.safe_load(path.read_text()), indent=4).encode()


def run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, stdin: bytes, *args: str
) -> tuple[int, str, str]:
    """``stszone ARGS`` in-process with ``stdin`` as standard input."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    status = cli.main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_cluster_dash_reads_standard_input_as_the_file_would_be_read(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """Each command answers from a cluster piped in exactly as from the same cluster saved to a
    file, rather than looking for a file named ``-``."""
    from_file = run(capsys, monkeypatch, b"", *command, "--cluster", str(CLUSTER))
    assert from_file[0] != 2 and from_file[1], from_file[2]
    piped = run(capsys, monkeypatch, as_json(CLUSTER), *command, "--cluster", "-")
    assert "No such file" not in piped[2], piped[2]
    assert piped == from_file


def test_review_refuses_the_review_and_the_cluster_both_from_standard_input(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Standard input holds one of them: giving both as ``-`` is refused up front, not answered
    from an empty cluster or a review read as a cluster."""
    review = (GUARD / "scale-db-6-to-3.json").read_bytes()
    status, out, err = run(capsys, monkeypatch, review, "review", "--cluster", "-", "-")
    assert (status, out) == (2, "")
    assert "both - (standard input)" in err and err.count("\n") == 1, err


def test_an_empty_standard_input_is_refused_naming_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``kubectl get`` failed and piped nothing: refused (no empty cluster that passes every
    audit), naming standard input, exit 2."""
    status, out, err = run(capsys, monkeypatch, b"", "audit", "--cluster", "-")
    assert (status, out) == (2, "")
    assert err.startswith("stszone audit: cluster file - (standard input) holds no List"), err


def test_audit_help_example_reading_standard_input_runs_as_written(tmp_path: Path) -> None:
    """The `stszone audit --help` example that pipes kubectl's JSON in, with the saved cluster
    standing for kubectl's output."""
    (example,) = [line for line in help_examples("audit") if "--cluster -" in line]
    kubectl, _, rest = example.rpartition(" | ")  # the saved command pipes within itself
    assert kubectl.startswith("kubectl get ") and kubectl.endswith("-o json")
    (tmp_path / "cluster.json").write_bytes(as_json(CLUSTER))
    done = run_example(f"cat cluster.json | {rest}", cwd=tmp_path)
    # The guard example holds misplaced pods: exit 1 with the audit's table.
    assert done.returncode == 1, done.stderr
    assert "shop/db" in done.stdout and done.stderr == ""


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b" " * (7 * 2**20 + 1), f"- (standard input) is {7 * 2**20 + 1} bytes, over the"),
        (b"{}", "- (standard input): "),
    ],
    ids=["over the cap", "not a review"],
)
def test_review_refusals_of_standard_input_name_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, body: bytes, said: str
) -> None:
    """A review piped in that is over the body cap, or no AdmissionReview, is refused naming
    standard input, as the cluster file's refusals do, not a file called ``-``."""
    status, out, err = run(capsys, monkeypatch, body, "review", "--zones", "a,b,c", "-")
    assert (status, out) == (2, "")
    assert err.startswith(f"stszone review: {said}"), err
