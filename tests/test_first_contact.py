"""What a new user meets first: README command (a), ``stszone`` alone, ``--version``, the view line,
and the first mistakes (a port in use, a kubeconfig that is not there), each one line.

README command (a) must behave the same on every machine: on a workstation where ``KUBECONFIG``
names a cluster (most Kubernetes users) it still serves the offline answer the README shows.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kubeconfig import write_kubeconfig
from tests.process import clean_environ, free_port, start_serve
from webhook import __version__, cli
from webhook.cli import COMMANDS, build_parser, settings_from
from webhook.cluster.kubeconfig import require_kubeconfig
from webhook.cluster.view import choose_view
from webhook.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_TEXT = README.read_text()
#: The review the README's offline session sends: pod db-1 as the StatefulSet controller made it.
README_REVIEW = ROOT / "tests" / "fixtures" / "admission" / "007-Pod-CREATE.json"
#: A line ``logs.setup`` writes in the text format: "2026-11-30 13:52:50,266 INFO    stszone: ...".
LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ +\S+: ")


def readme_command_a() -> list[str]:
    """The arguments README command (a) gives ``stszone`` (its first ``stszone serve``)."""
    block = README.read_text().split("```", 2)[1]
    line = next(line for line in block.splitlines() if "stszone serve" in line)
    words = shlex.split(line.rpartition("&&")[2])
    assert words[0].endswith("stszone"), line
    return words[1:]


def test_readme_command_a_is_offline_even_with_kubeconfig_set(
    tmp_path: Path, stopper: list[subprocess.Popen[bytes]]
) -> None:
    """With KUBECONFIG naming an unreachable cluster, command (a) answers the README's recorded
    review offline: db-1 (ordinal 1) gets the second zone of its --zones list."""
    args = readme_command_a()
    assert args[0] == "serve"
    zones = args[args.index("--zones") + 1].split(",")
    unreachable = write_kubeconfig(
        tmp_path / "kubeconfig", server=f"https://127.0.0.1:{free_port()}", token="t"
    )
    environ = {**clean_environ(), "KUBECONFIG": str(unreachable)}
    server = start_serve(tmp_path, *args[1:], environ=environ, cwd=tmp_path)
    stopper.append(server.proc)
    assert server.get("/readyz") == 200
    review = json.loads(README_REVIEW.read_bytes())
    pod = review["request"]["object"]["metadata"]
    ordinal = int(pod["labels"]["apps.kubernetes.io/pod-index"])
    status, body = server.post("/mutate", README_REVIEW.read_bytes())
    assert status == 200
    response = json.loads(body)["response"]
    assert response["uid"] == review["request"]["uid"] and response["allowed"] is True
    patch = json.loads(base64.b64decode(response["patch"]))
    added = {op["path"]: op["value"] for op in patch}
    assert added["/metadata/annotations"] == {"stszone.io/zone": zones[ordinal % len(zones)]}
    server.terminate()
    assert server.proc.wait(timeout=30) == 0
    log = server.log.read_text()
    assert "cluster view: offline" in log and "--offline was given" in log, log
    assert "to go live instead" in log
    # The README names the log line that says which view and why, and when it comes.
    claim = re.search(
        r"the\s+log\s+line\s+`([^`.]+)\.\.\.`\s+of\s+`stszone serve`\s+says\s+which\s+view",
        README_TEXT,
    )
    assert claim is not None, "README no longer names the view's log line"
    lines = log.splitlines()
    views = [i for i, line in enumerate(lines) if f" {claim[1]}" in line]
    serving = [i for i, line in enumerate(lines) if "serving https://" in line]
    assert len(views) == 1 and len(serving) == 1, log
    assert views[0] < serving[0], "the view line comes after the server listens"


POD = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}


@pytest.mark.parametrize(
    ("argv", "environ", "token", "live", "why"),
    [
        (["--offline", "--zones", "a"], {"KUBECONFIG": "/k"}, False, False, "--offline was given"),
        (["--cluster", "c.yaml"], {"KUBECONFIG": "/k"}, False, False, "--cluster c.yaml was given"),
        (["--kubeconfig", "/x"], {}, False, True, "--kubeconfig /x was given"),
        ([], {**POD, "KUBECONFIG": "/k"}, True, True, "in a pod"),
        ([], {**POD}, False, True, "in a pod"),  # loading says the token is missing
        # automountServiceAccountToken: false, a kubeconfig mounted instead
        ([], {**POD, "KUBECONFIG": "/k"}, False, True, "$KUBECONFIG is /k"),
        ([], {"KUBECONFIG": "/k"}, False, True, "$KUBECONFIG is /k"),
        (["--zones", "a"], {}, False, False, "no --kubeconfig, no $KUBECONFIG and not in a pod"),
    ],
)
def test_the_view_line_says_which_view_and_why(
    tmp_path: Path, argv: list[str], environ: dict[str, str], token: bool, live: bool, why: str
) -> None:
    """One line: live or offline, the reason (flag, environment, pod), and the other way."""
    account = tmp_path / "serviceaccount"
    if token:
        account.mkdir()
        (account / "token").write_text("t")
    settings = settings_from(build_parser().parse_args(["serve", *argv]), environ=environ)
    choice = choose_view(settings, environ=environ, service_account=account)
    line = choice.describe()
    assert choice.live is live
    assert why in line
    assert ("add --offline" in line) if live else ("--kubeconfig" in line)


def test_stszone_alone_lists_every_command_with_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Like kubectl: the commands, one line each, and how to get a command's help."""
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    names = [re.match(r"  (\S+) ", line) for line in out.splitlines()]
    listed = [m.group(1) for m in names if m]
    assert listed == [c.__name__.rpartition(".")[2] for c in COMMANDS]
    choices = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert isinstance(choices, dict)  # the subcommands' action: name -> parser
    assert sorted(listed) == sorted(choices)
    assert "stszone COMMAND --help" in out


def test_version() -> None:
    """``stszone --version`` prints the package version."""
    done = subprocess.run(
        [sys.executable, "-m", "webhook", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert done.stdout.strip() == f"stszone {__version__}"


def test_environment_is_read_when_a_command_runs_not_for_help(tmp_path: Path) -> None:
    """A malformed $STSZONE_ZONES does not break --help of any command; a command that reads
    it fails with exit 2 and one line naming the variable."""
    environ = {**clean_environ(), "STSZONE_ZONES": "a,,a"}
    for command in ("certs", "serve", "review", "audit", "manifests"):
        done = subprocess.run(
            [sys.executable, "-m", "webhook", command, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            env=environ,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "webhook", "review", str(README_REVIEW)],
        capture_output=True,
        text=True,
        timeout=60,
        env=environ,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "STSZONE_ZONES" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def run_cli(*args: str, cwd: Path, environ: dict[str, str] | None = None) -> tuple[int, list[str]]:
    """``python -m webhook ARGS`` to its end: (exit status, lines of stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "webhook", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_environ() if environ is None else environ,
        cwd=cwd,
        check=False,
    )
    return done.returncode, done.stderr.splitlines()


def the_one_error(lines: list[str]) -> str:
    """The one line of output that is not an INFO log record (there must be exactly one)."""
    assert not any("Traceback" in line for line in lines), "\n".join(lines)
    others = [line for line in lines if not (LOG_RECORD.match(line) and " INFO " in line)]
    assert len(others) == 1, "\n".join(lines)
    return others[0]


def listening() -> socket.socket:
    """A socket listening on 127.0.0.1 at a port the kernel picks (as another process would)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_a_port_in_use_is_one_line_naming_port(tmp_path: Path) -> None:
    """``stszone serve`` on a port another process listens on exits 2 with one line: what
    happened, and the flag that chooses another port."""
    with listening() as taken:
        port = str(taken.getsockname()[1])
        args = ["--offline", "--zones", "a,b,c", "--certs-dir", str(tmp_path / "certs")]
        status, lines = run_cli("serve", *args, "--host", "127.0.0.1", "--port", port, cwd=tmp_path)
    error = the_one_error(lines)
    assert status == 2
    assert error.startswith("stszone serve: ") and f"127.0.0.1:{port}" in error
    assert "address already in use" in error and "--port" in error


def test_an_address_not_on_this_machine_is_one_line_naming_host(tmp_path: Path) -> None:
    """``--host`` 192.0.2.1 (TEST-NET-1, documentation only: on no machine) exits 2 with one
    line saying the address is not this machine's."""
    args = ["--offline", "--zones", "a,b,c", "--certs-dir", str(tmp_path / "certs")]
    status, lines = run_cli(
        "serve", *args, "--host", "192.0.2.1", "--port", str(free_port()), cwd=tmp_path
    )
    error = the_one_error(lines)
    assert status == 2
    assert "192.0.2.1" in error and "cannot assign requested address" in error
    assert "give --host an address of this machine" in error


def test_a_busy_metrics_port_fails_start_up_in_one_line(tmp_path: Path) -> None:
    """``--metrics-port`` on a port in use stops start-up before the webhook says it serves:
    one line naming ``--metrics-port``, no background failure, exit 2."""
    with listening() as taken:
        metrics = str(taken.getsockname()[1])
        args = ["--offline", "--zones", "a,b,c", "--certs-dir", str(tmp_path / "certs")]
        status, lines = run_cli(
            "serve", *args, "--host", "127.0.0.1", "--port", str(free_port()),
            "--metrics-port", metrics, cwd=tmp_path,
        )  # fmt: skip
    error = the_one_error(lines)
    assert status == 2
    assert "/metrics" in error and f"127.0.0.1:{metrics}" in error
    assert "address already in use" in error and "--metrics-port" in error
    assert not any("serving https://" in line for line in lines), "\n".join(lines)


@pytest.mark.parametrize("source", ["--kubeconfig", "$KUBECONFIG"])
def test_a_kubeconfig_that_does_not_exist_says_not_found(tmp_path: Path, source: str) -> None:
    """A kubeconfig path with no file behind it is named, said to be not found, and the way
    on is given; not the loader's "Invalid kube-config file"."""
    missing = tmp_path / "no-such-kubeconfig"
    environ = clean_environ()
    args = ["serve", "--certs-dir", str(tmp_path / "certs"), "--port", str(free_port())]
    if source == "--kubeconfig":
        args += ["--kubeconfig", str(missing)]
    else:
        environ["KUBECONFIG"] = str(missing)
    status, lines = run_cli(*args, cwd=tmp_path, environ=environ)
    error = the_one_error(lines)
    assert status == 2
    assert error == (
        f"stszone serve: {source} {missing}: not found; give a kubeconfig that exists, or run "
        "without a cluster (--offline, or --cluster FILE)"
    )


def test_a_kubeconfig_list_needs_one_file_that_exists(tmp_path: Path) -> None:
    """``$KUBECONFIG`` may list several files: the missing ones are skipped (as kubectl and the
    loader do), and only a list of which none exists is refused."""
    there = write_kubeconfig(tmp_path / "there", server="https://127.0.0.1:1", token="t")
    gone = tmp_path / "gone"
    require_kubeconfig((str(gone), str(there)), named="$KUBECONFIG")
    with pytest.raises(ConfigError, match="none of these files is found"):
        require_kubeconfig((str(gone), str(tmp_path / "gone-too")), named="$KUBECONFIG")


def test_files_the_readme_session_writes_are_ignored_by_git() -> None:
    """Every file the README's session writes in the clone (``tee FILE``, ``open("FILE",
    "w")``) is ignored by git, so following the README leaves ``git status`` clean."""
    written = set(re.findall(r"\btee (\S+)", README_TEXT))
    written |= set(re.findall(r"open\(\"([^\"]+)\", \"w\"\)", README_TEXT))
    assert {"answer.json", "again.json"} <= written, written
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", "--verbose", "--non-matching", *sorted(written)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode in (0, 1), f"git check-ignore failed (a git checkout?): {done.stderr}"
    unmatched = [line.split("\t")[-1] for line in done.stdout.splitlines() if line.startswith("::")]
    assert unmatched == [], f"not ignored by git: {unmatched}"
