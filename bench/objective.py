"""The request path's objective, and the summary ``bench/run.py`` prints against it.

The objective: stszone's p99 latency within 1.5x the bare aiohttp floor's, at 200 and at 1,000
requests/s (open loop), measured with each server alone and with all of them at once; and its
requests/s (wrk's closed loop) at least 0.7x the floor's, a guard against regressions rather
than a target; and no request failed. Every figure is a ratio to the floor measured in the
same run, on the same machine: on a shared machine absolute figures move by tens of percent
between runs, ratios much less.

A p99 is taken over every answer of every round pooled (the rounds of one rate and mode); a
requests/s figure is the median of the rounds'.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Final

from bench.openloop import percentile

#: stszone's p99 over the floor's, at every rate, alone and together: at most this.
P99_LIMIT: Final = 1.5
#: stszone's requests/s over the floor's: at least this (a regression guard, not a target).
RPS_FLOOR: Final = 0.7
#: Open-loop modes: each server measured on its own, or every server at once.
MODES: Final = ("alone", "together")


@dataclass
class Figures:
    """What a run measured, server by server; ``floor`` and ``stszone`` always among them."""

    servers: list[str]
    rates: list[float]
    #: (server, mode, rate) -> the latency of every answer of every round, in ms.
    latencies: dict[tuple[str, str, float], list[float]] = field(
        default_factory=lambda: defaultdict(list)
    )
    #: server -> wrk's requests/s, round by round.
    rps: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    #: server -> requests that failed (wrk's errors and the open loop's failures).
    failed: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    #: generator -> the largest share of its core it used in any measurement.
    generator_cpu: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    #: (server, measurement) -> the server's CPU time per request in µs, round by round;
    #: measurements are "wrk", "200/s alone", "1,000/s together" and the like.
    cpu_per_request: dict[tuple[str, str], list[float]] = field(
        default_factory=lambda: defaultdict(list)
    )
    #: rate -> the share of the server core busy while every server ran at it, round by round.
    core_busy: dict[float, list[float]] = field(default_factory=lambda: defaultdict(list))

    def p99(self, server: str, mode: str, rate: float) -> float:
        return percentile(self.latencies[(server, mode, rate)], 99)

    def requests_per_second(self, server: str) -> float:
        return statistics.median(self.rps[server])

    def busy(self, generator: str, share: float) -> None:
        self.generator_cpu[generator] = max(self.generator_cpu[generator], share)


@dataclass(frozen=True)
class Verdict:
    """One line of the objective: stszone's figure over the floor's, and whether it holds."""

    what: str
    ratio: float
    limit: float
    met: bool

    def line(self) -> str:
        bound = "<=" if self.what.startswith("p99") else ">="
        state = "met" if self.met else "MISSED"
        return f"{self.what}: {self.ratio:.2f}x the floor's ({bound} {self.limit:g}x) {state}"


def _rate(rate: float) -> str:
    return f"{rate:,.0f}/s"


def verdicts(figures: Figures, server: str = "stszone") -> list[Verdict]:
    """Each part of the objective for ``server``, in the order the summary prints them."""
    out = []
    for rate in figures.rates:
        for mode in MODES:
            ratio = figures.p99(server, mode, rate) / figures.p99("floor", mode, rate)
            out.append(
                Verdict(f"p99 at {_rate(rate)}, {mode}", ratio, P99_LIMIT, ratio <= P99_LIMIT)
            )
    ratio = figures.requests_per_second(server) / figures.requests_per_second("floor")
    out.append(Verdict("requests/s", ratio, RPS_FLOOR, ratio >= RPS_FLOOR))
    return out


def met(figures: Figures) -> bool:
    """Whether stszone met every part of the objective, no failed request included."""
    return figures.failed["stszone"] == 0 and all(v.met for v in verdicts(figures))


def summary(figures: Figures, *, heading: str) -> str:
    """The block to paste: every server's figures, their ratios to the floor, the verdicts."""
    names = [n for n in ("floor", "stszone", "baseline") if n in figures.servers]
    others = [n for n in names if n != "floor"]
    rows: list[tuple[str, list[float]]] = []
    for rate in figures.rates:
        for mode in MODES:
            values = [figures.p99(n, mode, rate) for n in names]
            rows.append((f"p99 ms at {_rate(rate)}, {mode}", values))
    rows.append(("requests/s (wrk)", [figures.requests_per_second(n) for n in names]))
    width = max(len(label) for label, _ in rows)
    head = f"{'':{width}s}" + "".join(f"{n:>10s}" for n in names)
    head += "  |" + "".join(f"{n + '/floor':>16s}" for n in others)
    lines = [heading, head]
    for label, values in rows:
        digits = 0 if label.startswith("requests") else 2
        line = f"{label:{width}s}" + "".join(f"{v:10.{digits}f}" for v in values) + "  |"
        line += "".join(f"{v / values[0]:15.2f}x" for v in values[1:])
        lines.append(line)
    lines.append("failed requests: " + ", ".join(f"{n} {figures.failed[n]}" for n in names))
    spread = [s / f for s, f in zip(figures.rps["stszone"], figures.rps["floor"], strict=True)]
    lines.append("stszone/floor requests/s round by round: " + " ".join(f"{x:.2f}" for x in spread))
    found = verdicts(figures)
    lines += [f"objective: {v.line()}" for v in found]
    clean = figures.failed["stszone"] == 0
    lines.append(f"objective: no failed request: {'met' if clean else 'MISSED'}")
    missed = sum(not v.met for v in found) + (not clean)
    lines.append(
        "objective: " + ("met" if not missed else f"MISSED ({missed} of {len(found) + 1})")
    )
    lines.append(
        "generators, most of their core used: "
        + ", ".join(f"{g} {100 * s:.0f}%" for g, s in figures.generator_cpu.items())
    )
    if figures.cpu_per_request:
        measurements = dict.fromkeys(m for _, m in figures.cpu_per_request)
        lines.append("server CPU per request, µs (median of the rounds):")
        for measurement in measurements:
            each = [
                f"{n} {statistics.median(figures.cpu_per_request[(n, measurement)]):.0f}"
                for n in names
                if (n, measurement) in figures.cpu_per_request
            ]
            lines.append(f"  {measurement}: " + ", ".join(each))
    if figures.core_busy:
        lines.append(
            "server core busy with every server at once (median of the rounds): "
            + ", ".join(
                f"{_rate(rate)} {100 * statistics.median(shares):.0f}%"
                for rate, shares in figures.core_busy.items()
            )
        )
    return "\n".join(lines)


def as_json(figures: Figures) -> dict[str, Any]:
    """The figures without the raw latencies: p50/p99/max of each series, rounds' requests/s."""
    series = {
        f"{server} {mode} {rate:g}/s": {
            "answers": len(values),
            "p50_ms": percentile(values, 50),
            "p99_ms": percentile(values, 99),
            "max_ms": max(values, default=float("nan")),
        }
        for (server, mode, rate), values in figures.latencies.items()
    }
    return {
        "latency": series,
        "rps_by_round": dict(figures.rps),
        "failed": dict(figures.failed),
        "generator_cpu": dict(figures.generator_cpu),
        "cpu_per_request_us": {f"{n} {m}": v for (n, m), v in figures.cpu_per_request.items()},
        "core_busy": {f"{rate:g}/s": v for rate, v in figures.core_busy.items()},
        "objective": [v.__dict__ for v in verdicts(figures)],
    }
