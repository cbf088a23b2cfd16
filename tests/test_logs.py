"""Decision logs: one structured debug line per admission decision, no object, no credentials."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from tests import builders as b
from tests.conftest import ServeFactory
from webhook.config import Settings
from webhook.model.store import Store
from webhook.server import logs
from webhook.server.runtime import Runtime

SECRET = "hunter2-s3cr3t-value"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """The root logger as ``stszone serve --log-format json --log-level debug`` sets it up."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    stream = io.StringIO()
    logs.setup(fmt="json", level="debug")
    root.handlers[0].setStream(stream)  # type: ignore[attr-defined]
    yield stream
    root.handlers[:], _ = saved
    root.setLevel(saved[1])


def secret_pod() -> dict[str, object]:
    """A StatefulSet pod carrying a secret in an env var and an annotation."""
    pod = b.sts_pod("db", 1, namespace="shop", annotations={"example.com/token": SECRET})
    pod["spec"]["containers"][0]["env"] = [{"name": "PASSWORD", "value": SECRET}]
    return pod


def logged_runtime() -> Runtime:
    settings = Settings(host="127.0.0.1", port=0)
    runtime = Runtime(
        store=Store(zones=("a", "b", "c")), defaults=settings.defaults(), settings=settings
    )
    runtime.observers.append(logs.log_decision)
    return runtime


async def test_one_debug_line_per_decision(serve: ServeFactory, captured: io.StringIO) -> None:
    """uid, kind, namespace/name, operation, decision, zone and duration; never the object."""
    served = await serve(runtime=logged_runtime())
    review = b.review(secret_pod(), uid="uid-1", dry_run=True)
    review["request"]["userInfo"] = {"username": "alice", "extra": {"token": [SECRET]}}
    status, _ = await served.post_json("/mutate", review)
    assert status == 200
    unpinned = b.sts_pod("db", 0, namespace="shop")  # /validate without the mutation: denied
    await served.post_json("/validate", b.review(unpinned, uid="uid-2"))
    await served.post_raw("/mutate", b"[]")

    text = captured.getvalue()
    assert SECRET not in text and "alice" not in text
    lines = [json.loads(line) for line in text.splitlines()]
    decisions = [line for line in lines if line["logger"] == "stszone.decision"]
    assert len(decisions) == 3
    first, second, third = decisions
    assert first["level"] == "debug"
    assert {k: first[k] for k in ("uid", "kind", "namespace", "object", "operation")} == {
        "uid": "uid-1",
        "kind": "Pod",
        "namespace": "shop",
        "object": "db-1",
        "operation": "CREATE",
    }
    assert first["decision"] == "patched" and first["zone"] == "b" and first["dry_run"] is True
    assert first["duration_ms"] >= 0 and "shop/db-1" in first["message"]
    assert second["decision"] == "denied" and second["reason"] == "ZoneRequirementMissing"
    assert third["decision"] == "error" and third["http_status"] == 400


async def test_nothing_at_info(serve: ServeFactory, captured: io.StringIO) -> None:
    """At the default level, answering requests writes no line at all."""
    logging.getLogger().setLevel(logging.INFO)
    served = await serve(runtime=logged_runtime())
    started = len(captured.getvalue())  # the start-up lines (certificate serial) come before
    for _ in range(3):
        await served.post_json("/mutate", b.review(secret_pod()))
    await served.post_raw("/mutate", b"{")
    assert captured.getvalue()[started:] == ""


async def test_request_strings_cannot_forge_lines(
    serve: ServeFactory, captured: io.StringIO
) -> None:
    """Text format: a name with a newline stays on one line, escaped; long names are cut."""
    logs.setup(fmt="text", level="debug")
    logging.getLogger().handlers[0].setStream(captured)  # type: ignore[attr-defined]
    served = await serve(runtime=logged_runtime())
    review = b.review(b.plain_pod(), namespace="ns")
    review["request"]["name"] = "evil\nINFO forged line" + "x" * 5000
    await served.post_json("/mutate", review)
    lines = [line for line in captured.getvalue().splitlines() if "stszone.decision" in line]
    assert len(lines) == 1 and "evil\\nINFO forged line" in lines[0]
    assert len(lines[0]) < 1000


def test_decisions_are_logged_at_debug_only() -> None:
    """``stszone serve`` adds the decision log to its observers only when it writes."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        logs.setup(level="debug")
        assert logs.decisions_logged()
        logs.setup(level="info")
        assert not logs.decisions_logged()
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
