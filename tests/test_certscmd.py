"""``stszone certs``: what it prints, exit statuses, refusals, and --force keeping the CA."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from webhook.cli import main


def files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_first_run_creates_everything(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 0; the output names each file, the SANs and the next step."""
    out = tmp_path / "certs"
    status = main(
        [
            "certs",
            "--out",
            str(out),
            "--service",
            "wh",
            "--namespace",
            "ns",
            "--dns",
            "a.example",
            "--dns",
            "b.example",
            "--ip",
            "10.0.0.5",
        ]
    )
    assert status == 0
    text = capsys.readouterr().out
    for name in ("ca.crt", "ca.key", "tls.crt", "tls.key"):
        assert str(out / name) in text
    assert text.count("created") == 2
    assert (
        "names:  wh, wh.ns, wh.ns.svc, wh.ns.svc.cluster.local, a.example, b.example, 10.0.0.5"
        in text
    )
    assert f"stszone manifests --ca {out / 'ca.crt'} --namespace ns" in text
    leaf = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    assert f"serial {leaf.serial_number:x}" in text
    assert f"valid until {leaf.not_valid_after_utc:%Y-%m-%d}" in text


def test_second_run_refused_then_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --force: exit 2 and nothing changes; with it: new serving pair, same CA."""
    assert main(["certs", "--out", str(tmp_path)]) == 0
    before = files(tmp_path)
    capsys.readouterr()
    assert main(["certs", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stszone certs: ") and "pass --force" in err
    assert files(tmp_path) == before
    assert main(["certs", "--out", str(tmp_path), "--force"]) == 0
    text = capsys.readouterr().out
    assert text.count("reused") == 2
    after = files(tmp_path)
    assert after["ca.crt"] == before["ca.crt"] and after["ca.key"] == before["ca.key"]
    assert after["tls.crt"] != before["tls.crt"] and after["tls.key"] != before["tls.key"]


def test_key_type_and_days(tmp_path: Path) -> None:
    """--key-type and --days shape the serving certificate."""
    assert main(["certs", "--out", str(tmp_path), "--key-type", "rsa-3072", "--days", "30"]) == 0
    key = serialization.load_pem_private_key((tmp_path / "tls.key").read_bytes(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey) and key.key_size == 3072
    leaf = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    assert (
        30 * 86400
        <= (leaf.not_valid_after_utc - leaf.not_valid_before_utc).total_seconds()
        <= 30 * 86400 + 600
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--ip", "10.0.0.300"], "'10.0.0.300' is not an IP address"),
        (["--days", "0"], "at least 1 day"),
        (["--ca-days", "-1"], "at least 1 day"),
    ],
)
def test_bad_flags_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    """A bad value is a one-line error and exit status 2."""
    assert main(["certs", "--out", str(tmp_path / "o"), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--namespace", "a b"], "--namespace 'a b' is not a namespace name"),
        (["--namespace", "x" * 64], "at most 63 characters"),
        (["--service", "Bad_Name"], "--service 'Bad_Name' is not a Service name"),
    ],
)
def test_a_name_no_dns_name_can_hold_is_refused_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    """The Service and namespace become labels of stszone.NS.svc: one that is no DNS label
    (what `stszone manifests --namespace` refuses too) exits 2 before a file is written."""
    out = tmp_path / "o"
    assert main(["certs", "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stszone certs: ") and message in err and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--days", "0"], "serving certificate validity must be at least 1 day"),
        (["--ca-days", "0"], "CA validity must be at least 1 day"),
        (["--days", "100000000"], "serving certificate validity of 100000000 days"),
        (["--ca-days", "100000000"], "CA validity of 100000000 days"),
    ],
)
def test_a_validity_that_cannot_be_issued_is_refused_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    """Exit 2 with one line, and no CA left behind for the next run to reuse without its
    --ca-days or --key-type; a validity past the year 9999 is no traceback either."""
    out = tmp_path / "o"
    assert main(["certs", "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stszone certs: ") and message in err and err.count("\n") == 1
    assert not out.exists()


def test_a_dns_name_that_is_not_ascii_is_refused_naming_its_a_label(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A certificate holds DNS names as A-labels: a Unicode --dns is one line saying which
    one to give, exit 2, before a file is written."""
    out = tmp_path / "o"
    assert main(["certs", "--out", str(out), "--dns", "bücher.example"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stszone certs: ") and err.count("\n") == 1
    assert "'bücher.example'" in err and "xn--bcher-kva.example" in err
    assert not out.exists()


def test_the_next_command_is_quoted_for_the_shell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An --out with a space in it: the printed `next:` command still reads as one word."""
    out = tmp_path / "my certs"
    assert main(["certs", "--out", str(out)]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("next:")]
    assert shlex.split(line.removeprefix("next:")) == [
        *("stszone", "manifests", "--ca", str(out / "ca.crt"), "--namespace", "stszone-system"),
        *("|", "kubectl", "apply", "-f", "-"),
    ]


def test_unknown_key_type_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse lists the key types when an unknown one is given."""
    with pytest.raises(SystemExit) as exit_info:
        main(["certs", "--key-type", "dsa"])
    assert exit_info.value.code == 2
    assert "ecdsa-p256" in capsys.readouterr().err


def test_help_has_examples(capsys: pytest.CaptureFixture[str]) -> None:
    """--help describes CA reuse and shows examples."""
    with pytest.raises(SystemExit):
        main(["certs", "--help"])
    text = capsys.readouterr().out
    for needle in (
        "--out DIR",
        "--force",
        "--key-type",
        "examples:",
        "stszone certs --force",
        "reused",
    ):
        assert needle in text


def test_python_dash_m_webhook_certs(tmp_path: Path) -> None:
    """The command works through ``python -m webhook`` (the console script's entry point)."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    }
    result = subprocess.run(
        [sys.executable, "-m", "webhook", "certs", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]


def test_an_out_directory_that_cannot_be_looked_in_is_one_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Looking for an existing pair can fail (permissions, a name too long): exit 2, one line."""
    out = tmp_path / ("d" * 300)  # longer than a file name may be: stat() fails
    assert main(["certs", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stszone certs: cannot write") and "choose another --out" in err
    assert len(err.strip().splitlines()) == 1
