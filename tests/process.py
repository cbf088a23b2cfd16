"""``python -m webhook serve`` as a subprocess on 127.0.0.1, for tests of the real process.

The server gets a free port, development certificates in the test's directory and an
environment without ``KUBECONFIG`` or ``KUBERNETES_SERVICE_HOST`` (unless the test gives one), and
is killed by the ``stopper`` fixture (conftest) if a test leaves it running.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

FIXTURE = Path(__file__).parent / "fixtures" / "admission" / "003-Pod-CREATE.json"
#: Seconds a starting server may take to answer /healthz before the test fails (a hang guard).
START_TIMEOUT = 30.0


def free_port() -> int:
    """A port nobody listens on right now at 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def clean_environ() -> dict[str, str]:
    """This process's environment without anything that names a cluster."""
    return {
        k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    }


@dataclass
class Webhook:
    """A ``stszone serve`` subprocess on 127.0.0.1 with development certificates."""

    proc: subprocess.Popen[bytes]
    port: int
    ctx: ssl.SSLContext
    log: Path
    terminated_at: float = field(default=0.0)

    def get(self, path: str) -> int:
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=5)
        try:
            conn.request("GET", path)
            return conn.getresponse().status
        finally:
            conn.close()

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """POST a JSON body on a fresh connection: (status, body)."""
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=5)
        try:
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def post_review(self) -> tuple[int, str | None]:
        """POST the recorded review on a keep-alive connection: (status, Connection header)."""
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=5)
        try:
            headers = {"Content-Type": "application/json", "Connection": "keep-alive"}
            conn.request("POST", "/mutate", body=FIXTURE.read_bytes(), headers=headers)
            response = conn.getresponse()
            response.read()
            return response.status, response.getheader("Connection")
        finally:
            conn.close()

    def terminate(self) -> None:
        self.terminated_at = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)


def start_serve(
    tmp_path: Path, *args: str, environ: Mapping[str, str] | None = None, cwd: Path | None = None
) -> Webhook:
    """``python -m webhook serve ARGS --host 127.0.0.1 --port FREE --certs-dir TMP/certs``,
    returned once it answers /healthz (the later flags win over any in ``args``)."""
    port = free_port()
    log = tmp_path / "serve.log"
    certs = tmp_path / "certs"
    cmd = [sys.executable, "-m", "webhook", "serve", *args]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--certs-dir", str(certs)]
    env = dict(clean_environ() if environ is None else environ)
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        assert proc.poll() is None, log.read_text()
        ca = certs / "ca.crt"
        if ca.exists():
            server = Webhook(proc, port, ssl.create_default_context(cafile=str(ca)), log)
            try:
                if server.get("/healthz") == 200:
                    return server
            except (OSError, ssl.SSLError):
                pass
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"server did not answer /healthz:\n{log.read_text()}")
        time.sleep(0.1)
