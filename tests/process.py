"""``python -m webhook serve`` as a subprocess: the one way tests start the real process.

By default the server listens on 127.0.0.1 at a free port with development certificates in the
test's directory, in an environment without ``KUBECONFIG`` or ``KUBERNETES_SERVICE_HOST``
(unless the test gives one); the end-to-end tests choose the address, the certificates and the
readiness they wait for. A test appends the process to the ``stopper`` fixture (conftest),
which kills it if the test leaves it running.
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
from dataclasses import dataclass
from pathlib import Path

from tests.hang import HANG_GUARD

FIXTURE = Path(__file__).parent / "fixtures" / "admission" / "003-Pod-CREATE.json"


def free_port(bind: str = "127.0.0.1") -> int:
    """A port nobody listens on right now at ``bind`` (IPv4 or IPv6)."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((bind, 0))
        port: int = sock.getsockname()[1]
        return port


def refused(port: int, *, host: str = "127.0.0.1", timeout: float = 5.0) -> bool:
    """True when nothing accepts on ``host:port`` (the connection is refused)."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except ConnectionRefusedError:
        return True
    return False


#: ``st`` of a listening socket in /proc/net/tcp and tcp6 (the kernel's ``TCP_LISTEN``).
TCP_LISTEN = "0A"


def listening(pid: int) -> set[int]:
    """The TCP ports process ``pid`` itself listens on, IPv4 or IPv6 (Linux /proc).

    A connection to a port says only that *something* accepts there, and on a machine shared
    with other tests a free port can be taken by another process meanwhile; the sockets the
    process holds (``/proc/PID/fd``, matched by inode to the rows of its network namespace's
    ``/proc/PID/net/tcp``) are its own listeners and nothing else's.
    """
    inodes: set[str] = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:  # closed since the directory was read
            continue
        if target.startswith("socket:["):
            inodes.add(target.removeprefix("socket:[").removesuffix("]"))
    ports: set[int] = set()
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():  # no IPv6 in the kernel
            continue
        for row in path.read_text().splitlines()[1:]:
            # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
            fields = row.split()
            if fields[3] == TCP_LISTEN and fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def clean_environ() -> dict[str, str]:
    """This process's environment without anything that names a cluster."""
    return {
        k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    }


def tail(path: Path, lines: int = 60) -> str:
    """The last ``lines`` lines of a log file, or a note when there is none."""
    if not path.exists():
        return f"(no log at {path})"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Webhook:
    """A running ``stszone serve`` process, and HTTPS clients that trust its certificate."""

    proc: subprocess.Popen[bytes]
    #: The name or address clients use (the certificate is checked against it).
    host: str
    port: int
    ctx: ssl.SSLContext
    log: Path

    @property
    def url(self) -> str:
        """``https://host:port`` (IPv6 literals in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}"

    def _connection(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=5)

    def fetch(self, path: str) -> tuple[int, str]:
        """GET on a fresh connection: (status, body text)."""
        conn = self._connection()
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.read().decode()
        finally:
            conn.close()

    def get(self, path: str) -> int:
        """GET on a fresh connection: the status."""
        return self.fetch(path)[0]

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """POST a JSON body on a fresh connection: (status, body)."""
        conn = self._connection()
        try:
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def post_review(self) -> tuple[int, str | None]:
        """POST the recorded review on a keep-alive connection: (status, Connection header)."""
        conn = self._connection()
        try:
            headers = {"Content-Type": "application/json", "Connection": "keep-alive"}
            conn.request("POST", "/mutate", body=FIXTURE.read_bytes(), headers=headers)
            response = conn.getresponse()
            response.read()
            return response.status, response.getheader("Connection")
        finally:
            conn.close()

    def terminate(self) -> None:
        """SIGTERM: what the kubelet sends when the pod is deleted."""
        self.proc.send_signal(signal.SIGTERM)

    def stop(self, *, grace: float) -> None:
        """SIGTERM, then SIGKILL if the process has not exited after ``grace`` seconds."""
        if self.proc.poll() is not None:
            return
        self.terminate()
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=HANG_GUARD)


def start_serve(
    tmp_path: Path,
    *args: str,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    bind: str = "127.0.0.1",
    host: str | None = None,
    ca: Path | None = None,
    ready: str = "/healthz",
    wait: float = HANG_GUARD,
    port: int | None = None,
    check_hostname: bool = True,
) -> Webhook:
    """``python -m webhook serve ARGS --host BIND --port PORT``, returned once ``ready`` answers
    200 (the later flags win over any in ``args``); its output goes to ``TMP/serve.log``.
    ``PORT`` is ``port``, else one free now.

    Without ``ca`` it serves development certificates from ``--certs-dir TMP/certs`` and clients
    trust their CA; with ``ca``, ``args`` name the certificate and clients trust ``ca``. Clients
    connect to ``host`` (default: ``bind``) at ``port`` (default: a free one), and check the
    certificate's names unless ``check_hostname`` is false (a certificate for a Service's DNS
    name, served at its ClusterIP, which nothing here resolves). ``wait`` is a hang guard: the
    seconds the server may take to answer before the test fails.
    """
    port = free_port(bind) if port is None else port
    log = tmp_path / "serve.log"
    certs = tmp_path / "certs"
    cmd = [sys.executable, "-m", "webhook", "serve", *args, "--host", bind, "--port", str(port)]
    if ca is None:
        cmd += ["--certs-dir", str(certs)]
        ca = certs / "ca.crt"
    env = dict(clean_environ() if environ is None else environ)
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    deadline = time.monotonic() + wait
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited with status {proc.returncode}:\n{tail(log)}")
        if ca.exists():
            ctx = ssl.create_default_context(cafile=ca)
            ctx.check_hostname = check_hostname
            server = Webhook(proc, host or bind, port, ctx, log)
            try:
                if server.get(ready) == 200:
                    return server
            except (OSError, ssl.SSLError, http.client.HTTPException):
                pass
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError(
                f"{' '.join(cmd[3:])}: {ready} did not answer 200 in {wait:g}s "
                f"(hang guard):\n{tail(log)}"
            )
        time.sleep(0.1)
