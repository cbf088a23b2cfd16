"""bench/objective.py: the request path's objective, met or missed, from measured latencies.

Each case builds latencies by hand whose p99 is known (a hundred answers: the p99 is the second
slowest) and checks the verdicts at the edges of the limits: 1.5x the floor's p99, 0.7x its
requests/s, and no failed request.
"""

from __future__ import annotations

import pytest

from bench.objective import Figures, met, summary, verdicts

RATES = [200.0, 1000.0]


def answers(p99: float) -> list[float]:
    """A hundred latencies in ms whose nearest-rank p99 is ``p99``."""
    return [0.5] * 98 + [p99, p99 + 100]


def figures(*, p99: dict[str, float], rps: dict[str, list[float]]) -> Figures:
    made = Figures(servers=list(p99), rates=RATES)
    for server, value in p99.items():
        for rate in RATES:
            for mode in ("alone", "together"):
                made.latencies[(server, mode, rate)] = answers(value)
        made.rps[server] = rps[server]
    return made


def test_exactly_one_and_a_half_times_the_floors_p99_is_met() -> None:
    made = figures(p99={"floor": 2.0, "stszone": 3.0}, rps={"floor": [100], "stszone": [70]})
    found = verdicts(made)
    assert [v.what for v in found] == [
        "p99 at 200/s, alone",
        "p99 at 200/s, together",
        "p99 at 1,000/s, alone",
        "p99 at 1,000/s, together",
        "requests/s",
    ]
    assert [v.ratio for v in found] == pytest.approx([1.5, 1.5, 1.5, 1.5, 0.7])
    assert all(v.met for v in found)
    assert met(made)


def test_a_p99_over_the_limit_at_one_rate_and_mode_misses_the_objective() -> None:
    made = figures(p99={"floor": 2.0, "stszone": 2.0}, rps={"floor": [100], "stszone": [100]})
    made.latencies[("stszone", "together", 1000.0)] = answers(3.1)
    found = {v.what: v.met for v in verdicts(made)}
    assert found.pop("p99 at 1,000/s, together") is False
    assert all(found.values())
    assert not met(made)
    assert "objective: MISSED (1 of 6)" in summary(made, heading="h")


def test_requests_per_second_is_the_median_of_the_rounds_and_guarded_at_07() -> None:
    made = figures(
        p99={"floor": 1.0, "stszone": 1.0},
        rps={"floor": [100, 1000, 90], "stszone": [60, 69, 1]},  # medians 100 and 60
    )
    (rps,) = [v for v in verdicts(made) if v.what == "requests/s"]
    assert rps.ratio == pytest.approx(0.6)
    assert not rps.met


def test_a_failed_request_misses_the_objective_however_fast_the_rest() -> None:
    made = figures(p99={"floor": 2.0, "stszone": 1.0}, rps={"floor": [100], "stszone": [100]})
    made.failed["stszone"] = 1
    assert all(v.met for v in verdicts(made))
    assert not met(made)
    assert "objective: no failed request: MISSED" in summary(made, heading="h")


def test_the_baseline_is_shown_against_the_floor_but_judged_by_nobody() -> None:
    made = figures(
        p99={"floor": 1.0, "stszone": 1.0, "baseline": 9.0},
        rps={"floor": [100], "stszone": [100], "baseline": [10]},
    )
    text = summary(made, heading="h")
    assert met(made)
    assert "9.00x" in text  # the baseline's p99 over the floor's
    assert text.splitlines()[-2] == "objective: met"


def test_cpu_per_request_and_the_busy_core_are_the_medians_of_the_rounds() -> None:
    """What each server's requests cost it, per measurement, and how busy the server core was
    with every server at once: the figures that tell a queue from a slow answer."""
    made = figures(p99={"floor": 1.0, "stszone": 1.0}, rps={"floor": [100], "stszone": [100]})
    made.cpu_per_request[("floor", "wrk")] = [100.0, 300.0, 120.0]
    made.cpu_per_request[("stszone", "wrk")] = [200.0, 210.0, 900.0]
    made.cpu_per_request[("stszone", "1,000/s together")] = [560.0]
    made.core_busy[1000.0] = [0.8, 0.95, 0.9]
    lines = summary(made, heading="h").splitlines()
    at = lines.index("server CPU per request, µs (median of the rounds):")
    assert lines[at + 1 : at + 3] == [
        "  wrk: floor 120, stszone 210",
        "  1,000/s together: stszone 560",
    ]
    assert (
        lines[at + 3]
        == "server core busy with every server at once (median of the rounds): 1,000/s 90%"
    )
