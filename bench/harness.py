"""Processes the bench scripts start: stszone, the floor, the fake API server, the generators.

Every process is started pinned to a core (``taskset``), bound to 127.0.0.1, and stopped by
its pid when the script ends (``Harness`` is a context manager). CPU time, RSS and open file
descriptors are read from ``/proc`` so the scripts can show who was busy and that nothing grows.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
PYTHON: Final = sys.executable
_TICKS: Final = os.sysconf("SC_CLK_TCK")
_PAGE: Final = os.sysconf("SC_PAGE_SIZE")

sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def pinned(cmd: list[str], core: int | None) -> list[str]:
    return cmd if core is None else ["taskset", "-c", str(core), *cmd]


@dataclass
class Proc:
    """A started process and what /proc says about it."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS

    def rss_bytes(self) -> int:
        return int(Path(f"/proc/{self.pid}/statm").read_text().split()[1]) * _PAGE

    def peak_rss_bytes(self) -> int:
        """The most the process has been resident (``VmHWM``)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no VmHWM for {self.name}")

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, *, timeout: float = 30.0) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return self.popen.returncode


@dataclass
class Harness:
    """Starts processes into ``workdir`` and stops every one of them on exit."""

    workdir: Path
    procs: list[Proc] = field(default_factory=list)

    def __enter__(self) -> Harness:
        self.workdir.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in reversed(self.procs):
            proc.stop(timeout=10)

    def start(
        self,
        name: str,
        cmd: list[str],
        *,
        core: int | None,
        env: dict[str, str] | None = None,
        cwd: Path = ROOT,
    ) -> Proc:
        log = self.workdir / f"{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                pinned(cmd, core), stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env
            )
        proc = Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    # --- the servers -------------------------------------------------------------------------

    def certs(self) -> Any:
        from webhook.install.certfiles import ensure_dev_certs

        return ensure_dev_certs(self.workdir / "certs")

    def fakeapi(self, *, core: int | None, extra: Sequence[str] = ()) -> tuple[Proc, str]:
        proc = self.start("fakeapi", [PYTHON, "bench/fakeapi_serve.py", *extra], core=core)
        deadline = time.monotonic() + 300  # 305,050 objects to make on a busy core
        while time.monotonic() < deadline:
            for line in proc.log.read_text().splitlines():
                if line.startswith("URL "):
                    return proc, line.split()[1]
            if not proc.alive():
                break
            time.sleep(0.2)
        raise RuntimeError(f"fake API server did not start: {proc.log.read_text()[-2000:]}")

    def kubeconfig(self, url: str) -> Path:
        from tests.kubeconfig import write_kubeconfig

        return write_kubeconfig(self.workdir / "kubeconfig", server=url)

    def stszone(
        self,
        *,
        port: int,
        core: int | None,
        certs: Any,
        view: list[str],
        extra: Sequence[str] = (),
        name: str = "stszone",
        root: Path = ROOT,
    ) -> Proc:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
        }
        cmd = [PYTHON, "-m", "webhook", "serve", "--host", "127.0.0.1", "--port", str(port)]
        cmd += ["--cert", str(certs.cert), "--key", str(certs.key), *view, *extra]
        return self.start(name, cmd, core=core, env=env, cwd=root)

    def floor(self, *, port: int, core: int | None, certs: Any, loop: str = "asyncio") -> Proc:
        cmd = [PYTHON, "bench/floor.py", "--port", str(port), "--loop", loop]
        cmd += ["--cert", str(certs.cert), "--key", str(certs.key)]
        return self.start("floor", cmd, core=core)


def core_times(core: int) -> tuple[float, float]:
    """Seconds CPU ``core`` has been busy and has been counted at all since boot (/proc/stat)."""
    for line in Path("/proc/stat").read_text().splitlines():
        name, *ticks = line.split()
        if name == f"cpu{core}":
            values = [int(t) for t in ticks[:8]]  # user nice system idle iowait irq softirq steal
            idle = values[3] + values[4]
            return (sum(values) - idle) / _TICKS, sum(values) / _TICKS
    raise RuntimeError(f"no cpu{core} in /proc/stat")


def get(port: int, path: str, *, ca: Path, timeout: float = 5.0) -> tuple[int, str]:
    ctx = ssl.create_default_context(cafile=str(ca))
    try:
        with urllib.request.urlopen(
            f"https://127.0.0.1:{port}{path}", context=ctx, timeout=timeout
        ) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def wait_ready(proc: Proc, port: int, *, ca: Path, path: str, timeout: float) -> float:
    """Poll ``path`` until it answers 200; returns the seconds taken."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited: {proc.log.read_text()[-3000:]}")
        try:
            if get(port, path, ca=ca, timeout=2)[0] == 200:
                return time.monotonic() - started
        except (OSError, ssl.SSLError):
            pass
        time.sleep(0.25)
    raise RuntimeError(f"{proc.name} not ready on {path} after {timeout}s")


#: The gauge a server exports once every StatefulSet has figures (its first zone-risk pass).
LAST_PASS: Final = "stszone_zone_risk_last_pass_timestamp_seconds "


def first_pass(port: int, *, ca: Path, timeout: float = 600.0) -> float:
    """Seconds until the server's first zone-risk pass is done: measurements of the steady
    state start after it, not during the one pass over every set a start pays."""
    started = time.monotonic()
    while LAST_PASS not in get(port, "/metrics", ca=ca)[1]:
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"no zone-risk pass after {timeout}s")
        time.sleep(0.5)
    return time.monotonic() - started


def post(port: int, path: str, body: bytes, *, ca: Path) -> tuple[int, Any]:
    ctx = ssl.create_default_context(cafile=str(ca))
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}{path}",
        data=body,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, context=ctx, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def run_measured(cmd: list[str], *, core: int | None, timeout: float) -> tuple[str, float]:
    """Run a generator to completion; (stdout, CPU seconds it used, from wait4's rusage).

    Its output goes to a file, not a pipe: the open loop prints every latency, more than a
    pipe holds, and would block on a full pipe that is only read once it has exited."""
    with tempfile.TemporaryFile() as stdout:
        popen = subprocess.Popen(pinned(cmd, core), stdout=stdout, cwd=ROOT)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(popen.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                popen.kill()
                popen.wait()
                raise RuntimeError(f"{cmd[0]} did not finish in {timeout}s")
            time.sleep(0.05)
        stdout.seek(0)
        out = stdout.read().decode()
    popen.returncode = os.waitstatus_to_exitcode(status)
    if popen.returncode != 0:
        raise RuntimeError(f"{cmd} exited {popen.returncode}: {out[-2000:]}")
    return out, usage.ru_utime + usage.ru_stime


def wrk(
    port: int, index: Path, *, duration: float, connections: int, core: int | None
) -> dict[str, Any]:
    """Closed loop: wrk (one thread) through the corpus; requests/s and its own CPU share."""
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{duration:g}s", "--timeout", "10s"]
    cmd += ["-s", str(ROOT / "bench" / "corpus.lua"), f"https://127.0.0.1:{port}", "--", str(index)]
    out, cpu = run_measured(cmd, core=core, timeout=duration + 60)
    line = next(x for x in out.splitlines() if x.startswith("{"))
    data: dict[str, Any] = json.loads(line)
    seconds = data["duration_us"] / 1e6
    data["rps"] = data["requests"] / seconds
    data["generator_cpu"] = cpu / seconds
    data["errors"] = sum(data[k] for k in ("connect", "read", "write", "status", "timeout"))
    return data


def openloop(
    ports: list[int],
    index: Path,
    *,
    ca: Path,
    rate: float,
    duration: float,
    connections: int,
    core: int | None,
) -> list[dict[str, Any]]:
    """Open loop at ``rate`` (bench/openloop.py in its own process) on every port at once,
    their schedules interleaved; one summary per port."""
    cmd = [PYTHON, "bench/openloop.py", "--ca", str(ca), "--corpus", str(index)]
    cmd += ["--rate", f"{rate:g}", "--duration", f"{duration:g}"]
    cmd += ["--connections", str(connections)]
    for port in ports:
        cmd += ["--port", str(port)]
    out, _ = run_measured(cmd, core=core, timeout=duration + 60)
    lines = out.strip().splitlines()[-len(ports) :]
    return [json.loads(line) for line in lines]
