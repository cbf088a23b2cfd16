"""Graceful shutdown of the real process: ``python -m webhook serve`` and SIGTERM.

The order users rely on (issue 5): readiness fails at once so the Service stops routing here;
the listener stays open for ``shutdown_delay`` (2 s) while endpoints propagate, then closes;
requests already in flight -- even one whose body is still being uploaded -- finish; the
process exits 0 within ``shutdown_delay + --shutdown-grace``.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.process import FIXTURE, Webhook, start_serve

SHUTDOWN_DELAY = 2.0  # Settings.shutdown_delay: readiness off, listener still open


def start(tmp_path: Path, *extra: str) -> Webhook:
    return start_serve(tmp_path, "--zones", "a,b,c", "--offline", *extra)


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def big_review() -> bytes:
    """The recorded Pod CREATE with a 3 MB annotation: a large but valid object."""
    review = json.loads(FIXTURE.read_bytes())
    review["request"]["object"]["metadata"].setdefault("annotations", {})["example.com/blob"] = (
        "x" * 3_000_000
    )
    return json.dumps(review).encode()


class SlowUpload(threading.Thread):
    """POST /mutate with the body sent in chunks over ``seconds``; keeps the answer."""

    def __init__(self, server: Webhook, body: bytes, *, seconds: float) -> None:
        super().__init__(daemon=True)
        self.server, self.body, self.seconds = server, body, seconds
        self.started = threading.Event()
        self.finished_sending = 0.0
        self.status = 0
        self.answer: dict[str, object] = {}
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            raw = socket.create_connection(("127.0.0.1", self.server.port), timeout=30)
            with self.server.ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                head = f"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len(self.body)}\r\n\r\n"
                tls.sendall(head.encode())
                chunks = [self.body[i : i + 64 * 1024] for i in range(0, len(self.body), 64 * 1024)]
                for chunk in chunks:
                    tls.sendall(chunk)
                    self.started.set()
                    time.sleep(self.seconds / len(chunks))
                self.finished_sending = time.monotonic()
                response = http.client.HTTPResponse(tls)
                response.begin()
                self.status = response.status
                self.answer = json.loads(response.read())
        except BaseException as err:
            self.error = err
            self.started.set()


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_sigterm_drains_in_flight_and_exits_0(
    tmp_path: Path, stopper: list[subprocess.Popen[bytes]], loop: str
) -> None:
    """readyz 503 at once; listener closes after the delay; a slow 3 MB upload still gets its
    AdmissionReview; the process exits 0. On both event loops ``--loop`` offers."""
    server = start(tmp_path, "--shutdown-grace", "10", "--loop", loop)
    stopper.append(server.proc)
    assert server.get("/readyz") == 200
    assert server.post_review() == (200, None)  # keep-alive while serving
    body = big_review()
    upload = SlowUpload(server, body, seconds=SHUTDOWN_DELAY + 2.0)
    upload.start()
    assert upload.started.wait(10)
    time.sleep(0.3)
    server.terminate()

    # Readiness fails first, while the listener still accepts (the Service needs to see it).
    status = 0
    while status != 503:
        status = server.get("/readyz")
        assert time.monotonic() - server.terminated_at < 1.0, "readyz did not fail within 1 s"
    not_ready_after = time.monotonic() - server.terminated_at
    assert server.get("/healthz") == 200
    # Answers during the delay close their connection: clients reconnect to a ready replica.
    assert server.post_review() == (200, "close")

    # Then the listener closes: new connections are refused.
    while not refused(server.port):
        assert time.monotonic() - server.terminated_at < SHUTDOWN_DELAY + 2, "listener still open"
        time.sleep(0.05)
    closed_after = time.monotonic() - server.terminated_at
    assert closed_after >= SHUTDOWN_DELAY - 0.5

    # The upload was still going when the listener closed, and it completes.
    upload.join(30)
    assert upload.error is None, repr(upload.error)
    assert upload.finished_sending - server.terminated_at > closed_after
    assert upload.status == 200
    response = upload.answer["response"]
    assert isinstance(response, dict)
    assert response["uid"] == json.loads(body)["request"]["uid"] and response["allowed"] is True

    code = server.proc.wait(timeout=15)
    exited_after = time.monotonic() - server.terminated_at
    text = server.log.read_text()
    assert code == 0, text
    assert "Traceback" not in text and "stopped" in text
    assert f"event loop: {loop}" in text
    print(
        f"readyz 503 after {not_ready_after:.2f}s, refused after {closed_after:.2f}s, "
        f"upload done {upload.finished_sending - server.terminated_at:.2f}s, exit 0 after {exited_after:.2f}s"
    )


def test_stuck_request_does_not_hold_shutdown(
    tmp_path: Path, stopper: list[subprocess.Popen[bytes]]
) -> None:
    """A client that stops sending mid-body is cut off after --shutdown-grace; exit is 0."""
    server = start(tmp_path, "--shutdown-grace", "1")
    stopper.append(server.proc)
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    with server.ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(
            b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
        )
        time.sleep(0.3)
        server.terminate()
        code = server.proc.wait(timeout=SHUTDOWN_DELAY + 1 + 5)
        exited_after = time.monotonic() - server.terminated_at
    assert code == 0, server.log.read_text()
    assert exited_after < SHUTDOWN_DELAY + 1 + 2
    print(f"stuck upload: exit 0 after {exited_after:.2f}s (delay 2 s + grace 1 s)")


def test_a_request_on_an_open_connection_just_after_the_close_is_answered(
    tmp_path: Path, stopper: list[subprocess.Popen[bytes]]
) -> None:
    """Once the listener has closed, a request arriving on a connection accepted before (the last
    reconnects race the close) is still answered, with Connection: close: open connections are
    served until they go quiet (Settings.shutdown_linger, 0.5 s), not cut at once."""
    server = start(tmp_path)
    stopper.append(server.proc)
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=server.ctx, timeout=5)
    headers = {"Content-Type": "application/json", "Connection": "keep-alive"}
    try:
        conn.connect()  # accepted while serving; no request on it yet
        server.terminate()
        while not refused(server.port):
            assert time.monotonic() - server.terminated_at < SHUTDOWN_DELAY + 2, "still open"
            time.sleep(0.02)
        conn.request("POST", "/mutate", body=FIXTURE.read_bytes(), headers=headers)
        response = conn.getresponse()
        assert response.status == 200
        assert response.getheader("Connection") == "close"
        assert json.loads(response.read())["response"]["allowed"] is True
    finally:
        conn.close()
    assert server.proc.wait(timeout=15) == 0, server.log.read_text()
