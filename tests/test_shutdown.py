"""Graceful shutdown of the real process: ``python -m webhook serve`` and SIGTERM.

The order users rely on: readiness fails at once so the Service stops routing here;
the listener stays open for ``shutdown_delay`` (2 s) while endpoints propagate, then closes;
requests already in flight -- even one whose body is still being uploaded -- finish; the
process exits 0, cutting what is still in flight after ``--shutdown-grace``.

Nothing here times the process: the tests drive it through those steps and check that each
happened, in that order. The waits are hang guards (``tests.hang``).
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from tests.hang import HANG_GUARD, until
from tests.process import FIXTURE, Webhook, listening, start_serve, tail


def start(tmp_path: Path, *extra: str) -> Webhook:
    return start_serve(tmp_path, "--zones", "a,b,c", "--offline", *extra)


def closed(server: Webhook) -> bool:
    """Whether the running server has closed its listener, read from its own sockets
    (:func:`~tests.process.listening`). A refused connection would say only that nothing
    accepts on the port, and once the listener closes another process may take it (the e2e
    pass beside this one in ``.ci/run`` listens on ports picked the same way). A process
    that exited closed everything, which says nothing of the order: it fails here."""
    if server.proc.poll() is not None:
        raise AssertionError(
            f"the server exited before it was seen closing its listener:\n{tail(server.log)}"
        )
    return server.port not in listening(server.proc.pid)


def in_flight(server: Webhook) -> int:
    """The ``stszone_in_flight_requests`` gauge of the server's /metrics."""
    status, text = server.fetch("/metrics")
    assert status == 200, text
    line = next(x for x in text.splitlines() if x.startswith("stszone_in_flight_requests "))
    return int(float(line.split()[1]))


def big_review() -> bytes:
    """The recorded Pod CREATE with a 3 MB annotation: a large but valid object."""
    review = json.loads(FIXTURE.read_bytes())
    review["request"]["object"]["metadata"].setdefault("annotations", {})["example.com/blob"] = (
        "x" * 3_000_000
    )
    return json.dumps(review).encode()


def head(length: int) -> bytes:
    return (
        "POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


class HeldUpload(threading.Thread):
    """POST /mutate sending all of the body but its last chunk, then the rest once ``release``
    is set; keeps the answer."""

    def __init__(self, server: Webhook, body: bytes) -> None:
        super().__init__(daemon=True)
        self.server, self.body = server, body
        self.holding = threading.Event()
        self.release = threading.Event()
        self.status = 0
        self.answer: dict[str, object] = {}
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            raw = socket.create_connection(("127.0.0.1", self.server.port), timeout=HANG_GUARD)
            with self.server.ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                last = len(self.body) - 64 * 1024
                tls.sendall(head(len(self.body)) + self.body[:last])
                self.holding.set()
                if not self.release.wait(HANG_GUARD):
                    raise AssertionError("never released (hang guard)")
                tls.sendall(self.body[last:])
                response = http.client.HTTPResponse(tls)
                response.begin()
                self.status = response.status
                self.answer = json.loads(response.read())
        except BaseException as err:
            self.error = err
        finally:
            self.holding.set()


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_sigterm_drains_in_flight_and_exits_0(
    tmp_path: Path, stopper: list[subprocess.Popen[bytes]], loop: str
) -> None:
    """readyz 503 while the listener still accepts; then the listener closes; a 3 MB upload
    begun before SIGTERM and finished after the close still gets its AdmissionReview; the
    process exits 0. On both event loops ``--loop`` offers."""
    server = start(tmp_path, "--shutdown-grace", "10", "--loop", loop)
    stopper.append(server.proc)
    assert server.get("/readyz") == 200
    assert server.post_review() == (200, None)  # keep-alive while serving
    body = big_review()
    upload = HeldUpload(server, body)
    upload.start()
    assert upload.holding.wait(HANG_GUARD) and upload.error is None, repr(upload.error)
    until(lambda: in_flight(server) == 1, what="the upload never reached the handler")
    assert not closed(server)
    server.terminate()

    # Readiness fails first, while the listener still accepts (the Service needs to see it).
    until(lambda: server.get("/readyz") == 503, what="readyz never failed")
    assert server.get("/healthz") == 200
    # Answers during the delay close their connection: clients reconnect to a ready replica.
    assert server.post_review() == (200, "close")

    # Then the listener closes, the upload still in flight: new connections are refused.
    until(lambda: closed(server), what="the listener never closed")
    # The listener also closes once the grace period has cut what is in flight, at the end:
    # that is not the close users rely on.
    assert "still in flight" not in server.log.read_text(), "closed only after the grace period"

    # The upload, still going when the listener closed, completes.
    upload.release.set()
    upload.join(HANG_GUARD)
    assert upload.error is None, repr(upload.error)
    assert upload.status == 200
    response = upload.answer["response"]
    assert isinstance(response, dict)
    assert response["uid"] == json.loads(body)["request"]["uid"] and response["allowed"] is True

    code = server.proc.wait(timeout=HANG_GUARD)
    text = server.log.read_text()
    assert code == 0, text
    assert "Traceback" not in text and "stopped" in text
    assert "closing in 2.0s" in text and "still in flight" not in text
    assert f"event loop: {loop}" in text


def test_stuck_request_does_not_hold_shutdown(
    tmp_path: Path, stopper: list[subprocess.Popen[bytes]]
) -> None:
    """A client that stops sending mid-body is cut off after --shutdown-grace (not answered by
    the 30 s body timeout's 408); exit is 0."""
    server = start(tmp_path, "--shutdown-grace", "1")
    stopper.append(server.proc)
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=HANG_GUARD)
    with server.ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(head(1000) + b"{")
        until(lambda: in_flight(server) == 1, what="the request never reached the handler")
        server.terminate()
        code = server.proc.wait(timeout=HANG_GUARD)
        try:
            answer = tls.recv(4096)
        except OSError:  # reset
            answer = b""
    text = server.log.read_text()
    assert code == 0, text
    assert "1 requests still in flight after the grace period; cut" in text
    assert answer == b"", answer


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
        assert not closed(server)
        server.terminate()
        until(lambda: closed(server), what="the listener never closed")
        conn.request("POST", "/mutate", body=FIXTURE.read_bytes(), headers=headers)
        response = conn.getresponse()
        assert response.status == 200
        assert response.getheader("Connection") == "close"
        assert json.loads(response.read())["response"]["allowed"] is True
    finally:
        conn.close()
    assert server.proc.wait(timeout=HANG_GUARD) == 0, server.log.read_text()
