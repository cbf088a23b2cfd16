"""Run ``python -m webhook serve`` against the cluster, as the API server will reach it.

The process logs to a file (attached to failing tests' reports), is Ready only once its
caches have synced, and is always stopped: SIGTERM first (the graceful path), SIGKILL after a
bounded wait.
"""

from __future__ import annotations

import ipaddress
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Seconds the server may take to list the cluster and become Ready.
READY_TIMEOUT = 120.0
#: Seconds the server may take to stop after SIGTERM (its drain is 20 s by default).
STOP_TIMEOUT = 40.0


def is_ip(host: str) -> bool:
    """True for an IPv4/IPv6 literal (the certificate then needs an IP SAN)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def url_host(host: str) -> str:
    """``host`` as it appears in a URL (IPv6 literals in brackets)."""
    return f"[{host}]" if ":" in host else host


def free_port(bind: str) -> int:
    """A port nobody listens on right now at ``bind``."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((bind, 0))
        port: int = sock.getsockname()[1]
        return port


def tail(path: Path, lines: int = 60) -> str:
    """The last ``lines`` lines of a log file, or a note when there is none."""
    if not path.exists():
        return f"(no log at {path})"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _ready(url: str, context: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/readyz", context=context, timeout=2) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def serving(
    *,
    host: str,
    bind: str,
    kubeconfig: str,
    certs: Path,
    zones: Sequence[str],
    log: Path,
) -> Iterator[str]:
    """Start the webhook, wait until /readyz answers 200, yield its base URL, then stop it."""
    port = free_port(bind)
    command = [
        sys.executable, "-m", "webhook", "serve",
        "--kubeconfig", kubeconfig,
        "--host", bind,
        "--port", str(port),
        "--cert", str(certs / "tls.crt"),
        "--key", str(certs / "tls.key"),
        "--zones", ",".join(zones),
        "--log-level", "debug",
    ]  # fmt: skip
    url = f"https://{url_host(host)}:{port}"
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        try:
            deadline = time.monotonic() + READY_TIMEOUT
            while not _ready(url, context):
                if process.poll() is not None:
                    raise AssertionError(
                        f"the webhook exited with status {process.returncode}:\n{tail(log)}"
                    )
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"{url}/readyz was not 200 within {READY_TIMEOUT:.0f}s:\n{tail(log)}"
                    )
                time.sleep(0.5)
            yield url
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)
