"""What a new user meets first: README command (a), ``stszone`` alone, ``--version``, the view line.

README command (a) must behave the same on every machine: on a workstation where ``KUBECONFIG``
names a cluster (most Kubernetes users) it still serves the offline answer the README shows.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kubeconfig import write_kubeconfig
from tests.process import clean_environ, free_port, start_serve
from webhook import __version__, cli
from webhook.cli import COMMANDS, build_parser, settings_from
from webhook.cluster.view import choose_view

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The review the README's offline session sends: pod db-1 as the StatefulSet controller made it.
README_REVIEW = ROOT / "tests" / "fixtures" / "admission" / "007-Pod-CREATE.json"


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


@pytest.mark.parametrize(
    ("argv", "environ", "live", "why"),
    [
        (["--offline", "--zones", "a"], {"KUBECONFIG": "/k"}, False, "--offline was given"),
        (["--cluster", "c.yaml"], {"KUBECONFIG": "/k"}, False, "--cluster c.yaml was given"),
        (["--kubeconfig", "/x"], {}, True, "--kubeconfig /x was given"),
        ([], {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBECONFIG": "/k"}, True, "in a pod"),
        ([], {"KUBECONFIG": "/k"}, True, "$KUBECONFIG is /k"),
        (["--zones", "a"], {}, False, "no --kubeconfig, no $KUBECONFIG and not in a pod"),
    ],
)
def test_the_view_line_says_which_view_and_why(
    argv: list[str], environ: dict[str, str], live: bool, why: str
) -> None:
    """One line: live or offline, the reason (flag, environment, pod), and the other way."""
    settings = settings_from(build_parser().parse_args(["serve", *argv]), environ=environ)
    choice = choose_view(settings, environ=environ)
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
