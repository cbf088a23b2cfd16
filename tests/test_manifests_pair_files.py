"""`stszone manifests --ca`: the serving pair read beside the CA, refused by the flag that names
another when a file is not there; re-issued for its namespace by the command its warning gives."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cli import main
from webhook.install.certfiles import issue


@pytest.mark.parametrize(
    ("missing", "args", "named"),
    [
        ("tls.crt", (), "serving certificate file {dir}/tls.crt (tls.crt beside --ca)"),
        ("tls.key", ("--cert", "{dir}/tls.crt"), "serving key {dir}/tls.key (tls.key beside --ca)"),
    ],
)
def test_a_missing_file_beside_the_ca_is_named_as_the_default_of_its_flag(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    missing: str,
    args: tuple[str, ...],
    named: str,
) -> None:
    """--ca given alone (or with --cert alone): the pair is read beside it, and a file missing
    there was refused as "cannot read the serving certificate DIR/tls.crt", a file the user
    never named, without the flag that names another. The refusal says the file was the
    default beside --ca, which flag gives it, and that --no-secret goes without it."""
    pair = tmp_path / "pair"
    issue(pair, service="stszone", namespace="stszone-system")
    (pair / missing).unlink()
    flag = "--cert" if missing == "tls.crt" else "--key"
    status = main(["manifests", "--ca", str(pair / "ca.crt"), *(a.format(dir=pair) for a in args)])
    captured = capsys.readouterr()
    assert (status, captured.out) == (2, "")
    err = captured.err
    said = named.format(dir=pair)
    assert err.startswith(f"stszone manifests: cannot read the {said}: No such file"), err
    assert f"the default of {flag}: give the " in err and f" with {flag} FILE" in err, err
    assert "leave the TLS Secret out with --no-secret" in err, err
    assert err.count("\n") == 1, err


@pytest.mark.parametrize("namespace", ["webhooks-prod", "stszone-system"])
def test_the_hint_for_a_pair_about_to_expire_reissues_it_for_its_namespace(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    namespace: str,
) -> None:
    """A pair for webhooks-prod that expires in ten days: the warning's `stszone certs`
    command, run as written, re-issues it for that namespace, and the same manifests command
    then prints without the warning (for stszone-system, the default, the command is short)."""
    monkeypatch.chdir(tmp_path)
    issue(Path("certs"), service="stszone", namespace=namespace, days=10)
    args = ["--ca", "certs/ca.crt", "--namespace", namespace]
    status, _, err = _run(capsys, *args)
    assert status == 0 and "expires on" in err, err
    (hint,) = re.findall(r"`(stszone certs [^`]*)`", err)
    assert main(shlex.split(hint)[1:]) == 0
    capsys.readouterr()
    status, objects, err = _run(capsys, *args)
    assert (status, err) == (0, ""), err
    (secret,) = [o for o in objects if o["kind"] == "Secret"]
    assert secret["metadata"]["namespace"] == namespace
    assert ("--namespace" in hint) == (namespace != "stszone-system"), hint


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, Any]], str]:
    status = main(["manifests", *args])
    captured = capsys.readouterr()
    return status, [doc for doc in yaml.safe_load_all(captured.out) if doc], captured.err


def test_help_says_which_flags_read_standard_input(capsys: pytest.CaptureFixture[str]) -> None:
    """--ca, --cert and --key read `-` as standard input, as --base does, and only one of the
    four may be `-` (tests/test_manifests_cli.py): --help said so of --base
    alone, so a user piping in a certificate could not learn it was possible."""
    with pytest.raises(SystemExit):
        main(["manifests", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    entries = re.split(r" (?=--[a-z-]+ [A-Z]+ )", text.partition("options:")[2])
    for flag in ("--ca", "--cert", "--key", "--base"):
        (entry,) = [e for e in entries if e.startswith(f"{flag} FILE ")]
        assert "- for stdin" in entry, entry
    assert "--ca, --cert, --key and --base" in text and "one of them at a time" in text
