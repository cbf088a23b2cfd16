"""`stszone manifests --ca`: the serving pair read beside the CA, refused by the flag that names
another when a file is not there."""

from __future__ import annotations

from pathlib import Path

import pytest

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
