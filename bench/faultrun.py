"""One fault run of ``bench/faults.py``: the fake API, ``stszone serve``, the corpus and the
open-loop load, and how each run reports its figures and checks."""

from __future__ import annotations

import argparse
import asyncio
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bench import harness, openloop
from bench.corpus import chained, corpus, write


class Run:
    """One fault run: the fake API, stszone, the corpus, and the figures collected."""

    def __init__(self, h: harness.Harness, args: argparse.Namespace, *, fakeapi: list[str]) -> None:
        self.h, self.args = h, args
        self.certs = h.certs()
        _, url = h.fakeapi(core=args.client_core, extra=["--churn", str(args.churn), *fakeapi])
        self.port = harness.free_port()
        view = ["--kubeconfig", str(h.kubeconfig(url)), "--log-level", "info"]
        self.server = h.stszone(port=self.port, core=args.server_core, certs=self.certs, view=view)
        self.ready_after = harness.wait_ready(
            self.server, self.port, ca=self.certs.ca, path="/readyz", timeout=600
        )
        # The steady state, as bench/run.py measures it, not the one pass over every set (and
        # the collection after it) that a start pays once.
        self.first_pass_after = harness.first_pass(self.port, ca=self.certs.ca)
        items = chained(
            corpus(), lambda body: harness.post(self.port, "/mutate", body, ca=self.certs.ca)[1]
        )
        self.requests = openloop.load_corpus(write(h.workdir / "corpus", items))
        self.ctx = ssl.create_default_context(cafile=str(self.certs.ca))

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        _, text = harness.get(self.port, "/metrics", ca=self.certs.ca)
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    async def load(
        self,
        seconds: float,
        *,
        reconnect_every: int = 0,
        during: Callable[[openloop.Result], Awaitable[dict[str, Any]]] | None = None,
    ) -> tuple[openloop.Result, dict[str, Any]]:
        """Open-loop load for ``seconds``; ``during`` runs beside it and returns its figures."""
        result = openloop.Result()
        load = asyncio.create_task(
            openloop.together(
                host="127.0.0.1",
                ports=[self.port],
                ctx=self.ctx,
                requests=self.requests,
                rate=self.args.rate,
                duration=seconds,
                connections=self.args.connections,
                reconnect_every=reconnect_every,
                results=[result],
            )
        )
        extra = await during(result) if during is not None else {}
        await load
        return result, extra


def tail(result: openloop.Result) -> dict[str, Any]:
    lat = result.latencies
    return {
        "sent": result.sent,
        "answered": len(lat),
        "failed": result.failed,
        "errors": result.errors,
        "p50_ms": round(openloop.percentile(lat, 50) * 1e3, 2),
        "p99_ms": round(openloop.percentile(lat, 99) * 1e3, 2),
        "p999_ms": round(openloop.percentile(lat, 99.9) * 1e3, 2),
        "max_ms": round(max(lat) * 1e3, 2) if lat else None,
    }


def report(name: str, figures: dict[str, Any], checks: dict[str, bool]) -> dict[str, Any]:
    ok = all(checks.values())
    print(f"\n== {name}: {'PASS' if ok else 'FAIL'}")
    for key, value in figures.items():
        print(f"  {key}: {value}")
    for check, passed in checks.items():
        print(f"  [{'ok' if passed else 'FAILED'}] {check}")
    return {"name": name, "pass": ok, "figures": figures, "checks": checks}


# --- the runs -----------------------------------------------------------------------------
