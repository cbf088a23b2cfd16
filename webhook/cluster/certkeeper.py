"""The leader's certificate work: read the Secret and the two webhook configurations, ask the
planner for one step, carry it out, repeat.

The planner (``webhook.install.rotation``, handed in by ``stszone serve``: this layer does not
import the install layer) is pure; this module is its I/O. Each turn reads fresh copies (the
leader plans from the latest versions, never from a cache), and each write carries the version
it was planned from: the Secret is updated with its ``resourceVersion`` and a configuration is
patched with a JSON Patch (``jsonpatch.make_patch`` of the object as read and as planned) that
first sets ``metadata.resourceVersion`` to the version read, so the API server refuses it with
``409 Conflict`` if the object changed in between. A conflict is not a failure: the next turn
reads again. Nothing is written while the Lease is not held.

What goes wrong is logged once per cause while it lasts, saying what to do: a configuration
that is missing (404), RBAC refusing a read or a write (403), a Secret stszone will not touch;
credentials that do not load or are refused (401) by where they come from only, their cause
being said once for every client (:mod:`webhook.cluster.refusals`).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, NoReturn, Protocol

import aiohttp
import jsonpatch

from webhook.cluster.api import Api, ApiError, credentials_refused
from webhook.cluster.secretwatch import SecretWatch, granted_by

log = logging.getLogger("stszone.certs")

JSON = dict[str, Any]
_CONFIGS: Final = "/apis/admissionregistration.k8s.io/v1"
KINDS: Final = (
    ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
    ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
)
_JSON_PATCH: Final = "application/json-patch+json"


class Step(Protocol):
    """One step of the planner (``webhook.install.rotationstep.Decision`` fits)."""

    @property
    def secret(self) -> JSON | None: ...
    @property
    def configs(self) -> tuple[JSON, ...]: ...
    @property
    def done(self) -> str: ...
    @property
    def problem(self) -> str: ...
    @property
    def wait(self) -> float: ...


class Decide(Protocol):
    """The planner of one leadership term: (Secret or None, configurations, now) -> a step.
    ``now`` is the wall clock (certificates' validity), ``elapsed`` a monotonic clock in
    seconds (the waits between steps)."""

    def __call__(
        self, secret: JSON | None, /, *, configs: Sequence[JSON], now: dt.datetime, elapsed: float
    ) -> Step: ...


@dataclass(slots=True)
class Outcome:
    """What the certificate work has come to, for ``/metrics``."""

    #: Unix time the leader last found, or left, the Secret and both caBundles in order.
    last_success: float | None = None
    #: Steps that failed: API errors other than conflicts, a Secret stszone leaves alone.
    failures: int = 0


class Keeper:
    """Runs the planner's steps while :attr:`leading` says the Lease is held."""

    def __init__(
        self,
        *,
        api: Api,
        secrets: SecretWatch,
        config_name: str,
        planner: Callable[[], Decide],
        leading: Callable[[], bool],
        resync: float = 30.0,
        retry: float = 2.0,
        wall: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.secrets = secrets
        self.config_name = config_name
        self.planner = planner
        self.leading = leading
        self.resync = resync
        self.retry = retry
        self._wall = wall
        self._clock = clock
        self.outcome = Outcome()
        self._secret_path = f"/api/v1/namespaces/{secrets.namespace}/secrets/{secrets.name}"
        self._said: dict[str, str] = {}

    async def lead(self) -> None:
        """The leader's loop (``Elector.run``'s ``lead``): a fresh planner, then turns."""
        decide = self.planner()
        while True:
            wait = await self.turn(decide)
            # A change of the Secret (ours or anyone's) is worth a look at once.
            await self.secrets.changed(max(0.0, min(wait, self.resync)))

    async def turn(self, decide: Decide) -> float:
        """Read, plan, write at most one step; the seconds until the next turn."""
        try:
            configs = await self._configs()
            secret = await self._get(self._secret_path, topic="secret")
        except _Refused:
            return self.retry
        now = dt.datetime.fromtimestamp(self._wall(), dt.UTC)
        step = decide(
            secret, configs=[config for _, config in configs], now=now, elapsed=self._clock()
        )
        if step.problem:
            self._fail("plan", message=step.problem)
            return self.resync
        self._clear("plan")
        if step.secret is None and not step.configs:
            if len(configs) == len(KINDS):  # a missing configuration is not "in order"
                self.outcome.last_success = self._wall()
            return step.wait
        if not self.leading():
            return self.retry
        try:
            if step.secret is not None:
                await self._write_secret(step.secret)
            else:
                read = dict(configs)
                for planned in step.configs:
                    await self._patch(planned, read=read)
        except _Refused:
            return self.retry
        except _Conflict as err:
            log.debug("%s changed since it was read; reading again", err)
            return 0.0
        log.info("%s", step.done)
        return 0.0

    async def _configs(self) -> list[tuple[str, JSON]]:
        found = []
        for kind, plural in KINDS:
            config = await self._get(f"{_CONFIGS}/{plural}/{self.config_name}", topic=kind)
            if config is not None:
                found.append((kind, config))
        return found

    async def _get(self, path: str, *, topic: str) -> JSON | None:
        try:
            found = await self.api.call("GET", path)
        except ApiError as err:
            if err.status == 404:
                if topic != "secret":
                    missing = (
                        f"{topic} {self.config_name} not found: stszone cannot give it its CA; "
                        "apply the manifests (`kubectl apply -k deploy/`, or `stszone manifests "
                        "| kubectl apply -f -`), or name yours with --webhook-config-name"
                    )
                    self._fail(topic, message=missing)
                return None
            self._refused(topic, verb="read", err=err)
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as err:
            self._fail(topic, message=f"cannot read {self._what(topic)}: {_said(err)}; retrying")
            raise _Refused from None
        self._clear(topic)
        return found

    async def _write_secret(self, secret: JSON) -> None:
        version = secret["metadata"].get("resourceVersion")
        method, path = (
            ("PUT", self._secret_path) if version else ("POST", self._secret_path.rsplit("/", 1)[0])
        )
        try:
            await self.api.call(method, path, body=secret)
        except ApiError as err:
            if err.status == 409:
                raise _Conflict(self._what("secret")) from None
            verb = "create" if method == "POST" else "update"
            self._refused("secret", verb=verb, err=err, topic="secret write")
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as err:
            what = self._what("secret")
            self._fail("secret write", message=f"cannot write {what}: {_said(err)}; retrying")
            raise _Refused from None
        self._clear("secret write")

    async def _patch(self, planned: JSON, *, read: dict[str, JSON]) -> None:
        kind = str(planned.get("kind"))
        original = read[kind]
        plural = dict(KINDS)[kind]
        version = original["metadata"]["resourceVersion"]
        operations = [
            {"op": "replace", "path": "/metadata/resourceVersion", "value": version},
            *jsonpatch.make_patch(original, planned).patch,
        ]
        try:
            await self.api.call(
                "PATCH",
                f"{_CONFIGS}/{plural}/{self.config_name}",
                body=operations,
                content_type=_JSON_PATCH,
            )
        except ApiError as err:
            if err.status == 409:
                raise _Conflict(f"{kind} {self.config_name}") from None
            self._refused(kind, verb="patch", err=err, topic=f"{kind} patch")
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as err:
            what = f"{kind} {self.config_name}"
            self._fail(f"{kind} patch", message=f"cannot patch {what}: {_said(err)}; retrying")
            raise _Refused from None
        self._clear(f"{kind} patch")

    # --- saying what went wrong, once -----------------------------------------------------

    def _what(self, topic: str) -> str:
        """What a topic ("secret", "secret write", a kind, "KIND patch") is about."""
        topic = topic.removesuffix(" write").removesuffix(" patch")
        if topic == "secret":
            return f"Secret {self.secrets.namespace}/{self.secrets.name}"
        if topic == "plan":
            return "certificates"
        return f"{topic} {self.config_name}"

    def _refused(
        self, subject: str, *, verb: str, err: ApiError, topic: str | None = None
    ) -> NoReturn:
        what = self._what(subject)
        topic = topic or subject
        if err.status == 403:
            kind = "Role" if subject == "secret" else "ClusterRole"
            message = (
                f"RBAC refuses to {verb} {what} ({err.message}); grant the ServiceAccount "
                f"get/{verb} on it ({granted_by(kind, self.secrets.role)})"
            )
        else:
            message = f"cannot {verb} {what}: {_said(err)}; retrying"
        self._fail(topic, message=message)
        raise _Refused from None

    def _fail(self, topic: str, *, message: str) -> None:
        self.outcome.failures += 1
        if self._said.get(topic) != message:
            self._said[topic] = message
            log.error("%s", message)

    def _clear(self, topic: str) -> None:
        if self._said.pop(topic, None) is not None:
            log.info("%s: resolved", self._what(topic))


def _said(err: Exception) -> str:
    """``err`` for a log line: credentials that do not load or are refused (401) by where they
    come from only, as their cause is said once for every client (webhook.cluster.refusals)."""
    return credentials_refused(err) or str(err)


class _Refused(Exception):
    """A request failed in a way already logged; the turn ends."""


class _Conflict(Exception):
    """The object changed since it was read (409): read again, no harm done."""
