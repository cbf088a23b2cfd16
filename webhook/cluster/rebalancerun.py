"""A rebalance run from the command line (``stszone rebalance --apply``): the credentials, the
API client for the run, and Ctrl-C.

The credentials load off the event loop (a kubeconfig's exec plugin may run). The first Ctrl-C
sets the :class:`~webhook.cluster.rebalance.Rebalancer`'s ``stop``, so the run ends after the
step in progress and never leaves one half done; a second cancels the run at once, and the
step's last word says what it left half done.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

from webhook.cluster.api import Api
from webhook.cluster.credentials import Credentials
from webhook.cluster.credsource import load_credentials
from webhook.cluster.moves import Event, Outcome, Timing
from webhook.cluster.rebalance import Rebalancer
from webhook.rules.rebalance_plan import Plan


async def apply(
    plan: Plan,
    *,
    kubeconfig: str | None,
    context: str | None = None,
    timing: Timing,
    report: Callable[[Event], None],
    credentials: Credentials | None = None,
) -> Outcome:
    """Run ``plan`` against the cluster; the first Ctrl-C stops after the current step, a second
    one aborts it (KeyboardInterrupt)."""
    if credentials is None:
        credentials = await asyncio.to_thread(load_credentials, kubeconfig, context=context)
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    stop = asyncio.Event()

    def interrupted() -> None:
        if stop.is_set() and task is not None:
            task.cancel()
            return
        stop.set()
        report(Event("stopped", "", "", "Ctrl-C: stopping after the current step (again: now)"))

    try:
        loop.add_signal_handler(signal.SIGINT, interrupted)
        handled = True
    except (ValueError, RuntimeError, NotImplementedError):
        handled = False  # not the main thread (or no signals here): Ctrl-C aborts as usual
    try:
        async with Api(credentials, quiet=True) as api:
            return await Rebalancer(api, timing=timing, report=report, stop=stop).run(plan)
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None
    finally:
        if handled:
            loop.remove_signal_handler(signal.SIGINT)
