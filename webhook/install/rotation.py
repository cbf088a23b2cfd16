"""What the leader writes next: the Secret's CA and serving pair, and the caBundle, in an order
that never breaks a handshake. Pure: objects and a time in, one step out.

The rule behind every step: *a replica may serve a pair only from a CA the API server has
trusted for a while, and a CA leaves the caBundle only once no replica can be serving a pair
from it.* "A while" is ``Policy.settle``: long enough for every API server to see a changed
webhook configuration and every replica to see a changed Secret (both are watches, so it is
seconds; the margin is for a slow watch re-opening). So a rotation goes:

1. the caBundle of both configurations is made to hold what the Secret's bundle says;
2. a staged next CA, once trusted for ``settle``, becomes the CA: the serving pair is re-issued
   from it in the same write (the old CA stays in the bundle);
3. a CA two thirds into its life gets a successor staged beside it (bundle: old + new);
4. a serving pair two thirds into its life (or missing, not valid yet, for other names, from
   another CA) is re-issued from the CA; one that is missing or does not read comes before the
   Secret writes of steps 1 and 3 (see ``rotationstep.Writer.paired``);
5. a CA that no longer signs the served pair leaves the bundle ``settle`` after the switch was
   seen, and step 1 then takes it out of the configurations.

A missing Secret (or one whose CA is unusable: expired, or not valid yet) gets a new CA; when
the configurations already trust another CA (replicas may be serving from it), the new one is
added to them first and the Secret is written only once it has been trusted for ``settle``.

What the leader has seen (since when a CA is trusted, since when the pair comes from the
current CA) is kept by the :class:`Rotation`, one per leadership term: a new leader has seen
nothing yet, so it waits ``settle`` again before relying on trust. That only delays a step; it
never hurries one. Those waits are measured on an elapsed clock (``decide``'s ``elapsed``), not
on ``now``: a step of the wall clock (NTP) must neither cut ``settle`` short nor stretch it;
``now`` decides what certificates are valid, as the API servers' own clocks do. Two leaders
never act on the same Secret version: each write carries the version it was planned from.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cryptography import x509

from webhook.install import cabundle
from webhook.install.issuing import (
    DUE,
    Policy,
    authority,
    issued_by,
    renewal_reason,
    serials,
    serving_pair,
    usable_ca,
)
from webhook.install.rotationstep import Decision, Writer
from webhook.install.tlssecret import (
    MANAGED_BY,
    MANAGER,
    Contents,
    Keyed,
    fingerprint,
    is_managed,
    read,
)


@dataclass(slots=True)
class Rotation:
    """The planner of one leadership term: :meth:`decide` is called with what the API holds."""

    policy: Policy
    name: str
    namespace: str
    #: CA fingerprint -> when every configuration was first seen holding it (this term).
    _trusted_since: dict[str, float] = field(default_factory=dict)
    #: (CA fingerprint, when the Secret's pair was first seen coming from it).
    _serving_since: tuple[str, float] | None = None
    #: A CA made for a Secret not written yet (it must be trusted first).
    _pending: Keyed | None = None
    #: The elapsed clock's reading of the current ``decide``.
    _elapsed: float = 0.0

    def decide(
        self,
        secret: Mapping[str, Any] | None,
        *,
        configs: Sequence[Mapping[str, Any]],
        now: dt.datetime,
        elapsed: float | None = None,
    ) -> Decision:
        """The next step, given the Secret (None: absent) and the configurations that exist.

        ``now`` is the wall clock, for certificates; ``elapsed`` a monotonic clock in seconds,
        for ``settle`` (``now``'s timestamp when not given: one clock for both)."""
        self._elapsed = now.timestamp() if elapsed is None else elapsed
        trusted = cabundle.trusted(configs)
        for fp in set(self._trusted_since) - trusted:
            del self._trusted_since[fp]
        for fp in trusted:
            self._trusted_since.setdefault(fp, self._elapsed)
        if secret is not None and not is_managed(secret):
            if read(secret).serving is None:
                # Every replica already says it cannot serve it, why, and what to do.
                return Decision()
            return Decision(
                problem=f"Secret {self.namespace}/{self.name} was not created by stszone (no "
                f"label {MANAGED_BY}={MANAGER}): stszone serves its pair when it is usable and "
                "leaves it and the caBundle alone; delete it to have stszone create and rotate "
                "its own, or run without --manage-certs and give --cert/--key"
            )
        contents = read(secret) if secret is not None else Contents()
        metadata = (secret or {}).get("metadata") or {}
        version = str(metadata.get("resourceVersion") or "") or None
        ca = usable_ca(contents.ca, now=now)
        # Something verifies against the configurations: a replica may be serving from it.
        guarded = bool(cabundle.carried(configs, now=now))
        if ca is None:
            return self._new_authority(
                contents,
                version=version,
                metadata=metadata,
                configs=configs,
                now=now,
                guarded=guarded,
            )
        if self._pending is not None and self._pending.fingerprint == ca.fingerprint:
            self._pending = None
        served = contents.serving
        if served is None or not issued_by(served.cert, ca=ca.cert):
            self._serving_since = None
        elif self._serving_since is None or self._serving_since[0] != ca.fingerprint:
            self._serving_since = (ca.fingerprint, self._elapsed)
        keep = {ca.fingerprint} | ({contents.next_ca.fingerprint} if contents.next_ca else set())
        bundle = [c for c in contents.bundle if c.not_valid_after_utc > now]
        for needed in (ca, contents.next_ca):
            if needed is not None and needed.fingerprint not in {fingerprint(c) for c in bundle}:
                bundle.append(needed.cert)
        write = Writer(
            name=self.name,
            namespace=self.namespace,
            contents=replace(contents, ca=ca, bundle=tuple(bundle)),
            version=version,
            metadata=metadata,
        )
        changed = [fingerprint(c) for c in bundle] != [fingerprint(c) for c in contents.bundle]
        if changed and write.paired:
            return write.secret(f"the bundle now holds CAs {serials(bundle)}")
        stale = [c for c in configs if not cabundle.holds_exactly(c, bundle=bundle)]
        if stale:
            names = ", ".join(cabundle.name_of(c) for c in stale)
            return Decision(
                configs=tuple(cabundle.with_bundle(c, bundle=bundle) for c in stale),
                done=f"caBundle of {names} set to CAs {serials(bundle)}",
            )
        waits: list[float] = []
        step = (
            self._switch(write, staged=contents.next_ca, now=now, guarded=guarded, waits=waits)
            or self._stage(write, ca=ca, staged=contents.next_ca, now=now, waits=waits)
            or self._renew(write, ca=ca, contents=contents, now=now, guarded=guarded, waits=waits)
            or self._retire(write, ca=ca, bundle=bundle, keep=keep, now=now, waits=waits)
        )
        return step or Decision(wait=min(waits, default=math.inf))

    # --- the steps ----------------------------------------------------------------------------

    def _new_authority(
        self,
        contents: Contents,
        *,
        version: str | None,
        metadata: Mapping[str, Any],
        configs: Sequence[Mapping[str, Any]],
        now: dt.datetime,
        guarded: bool,
    ) -> Decision:
        if self._pending is None or self._pending.cert.not_valid_after_utc <= now:
            self._pending = authority(self.policy, namespace=self.namespace, now=now)
        new = self._pending
        kept = [c for c in contents.bundle if c.not_valid_after_utc > now]
        bundle = list(
            {
                fingerprint(c): c for c in [*kept, *cabundle.carried(configs, now=now), new.cert]
            }.values()
        )
        if guarded:
            if new.fingerprint not in self._trusted_since:
                names = ", ".join(cabundle.name_of(c) for c in configs)
                return Decision(
                    configs=tuple(cabundle.with_bundle(c, bundle=bundle) for c in configs),
                    done=f"caBundle of {names} given the new CA {new.serial:x} beside the CAs "
                    "it already trusts; the Secret follows once it has been trusted for "
                    f"{self.policy.settle.total_seconds():g}s",
                )
            left = self._settle_left(new.fingerprint)
            if left > 0:
                return Decision(wait=left)
        serving = serving_pair(self.policy, new, now=now)
        contents = Contents(ca=new, serving=serving, bundle=tuple(bundle))
        what = "created" if version is None else "replaced (its CA was unusable)"
        write = Writer(
            name=self.name,
            namespace=self.namespace,
            contents=contents,
            version=version,
            metadata=metadata,
        )
        return write.secret(
            f"{what}: CA {new.serial:x} until {new.cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S}, "
            f"serving pair {serving.serial:x} until "
            f"{serving.cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S}"
        )

    def _switch(
        self,
        write: Writer,
        *,
        staged: Keyed | None,
        now: dt.datetime,
        guarded: bool,
        waits: list[float],
    ) -> Decision | None:
        staged = usable_ca(staged, now=now)
        if staged is None:
            return None
        left = self._settle_left(staged.fingerprint) if guarded else 0.0
        if left > 0:
            waits.append(left)
            return None
        serving = serving_pair(self.policy, staged, now=now)
        return write.secret(
            f"switched to CA {staged.serial:x} (trusted beside the old one): serving pair "
            f"{serving.serial:x} until {serving.cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S}",
            ca=staged,
            serving=serving,
            next_ca=None,
        )

    def _stage(
        self,
        write: Writer,
        *,
        ca: Keyed,
        staged: Keyed | None,
        now: dt.datetime,
        waits: list[float],
    ) -> Decision | None:
        if staged is not None or not write.paired:
            return None
        due = ca.renew_at()
        if now < due:
            waits.append((due - now).total_seconds())
            return None
        new = authority(self.policy, namespace=self.namespace, now=now)
        return write.secret(
            f"staged CA {new.serial:x} beside CA {ca.serial:x} (expires "
            f"{ca.cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S}): trusted first, signing after",
            next_ca=new,
            bundle=(*write.contents.bundle, new.cert),
        )

    def _renew(
        self,
        write: Writer,
        *,
        ca: Keyed,
        contents: Contents,
        now: dt.datetime,
        guarded: bool,
        waits: list[float],
    ) -> Decision | None:
        serving = contents.serving
        reason = renewal_reason(ca, serving=serving, policy=self.policy, now=now, waits=waits)
        if not reason:
            return None
        staged = usable_ca(contents.next_ca, now=now)
        if staged is not None and serving is not None and reason == DUE:
            # The switch to the staged CA re-issues the pair within ``settle``: renewing it
            # from the old CA meanwhile would be a write for nothing, while it has life left.
            left = (serving.cert.not_valid_after_utc - now - 2 * self.policy.settle).total_seconds()
            if left > 0:
                waits.append(min(left, self._settle_left(staged.fingerprint)))
                return None
        left = self._settle_left(ca.fingerprint) if guarded else 0.0
        if left > 0:
            waits.append(left)
            return None
        new = serving_pair(self.policy, ca, now=now)
        was = f" (was {serving.serial:x})" if serving is not None else ""
        return write.secret(
            f"serving pair {new.serial:x}{was} issued by CA {ca.serial:x} until "
            f"{new.cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S}: {reason}",
            serving=new,
        )

    def _retire(
        self,
        write: Writer,
        *,
        ca: Keyed,
        bundle: Sequence[x509.Certificate],
        keep: set[str],
        now: dt.datetime,
        waits: list[float],
    ) -> Decision | None:
        leaving = [c for c in bundle if fingerprint(c) not in keep]
        if not leaving or self._serving_since is None:
            return None  # nothing to retire, or the pair does not come from the CA yet
        left = self._serving_since[1] + self.policy.settle.total_seconds() - self._elapsed
        if left > 0:
            waits.append(left)
            return None
        return write.secret(
            f"retired CA {serials(leaving)} from the bundle: the pair comes from CA {ca.serial:x}",
            bundle=tuple(c for c in bundle if fingerprint(c) in keep),
        )

    # --- helpers ------------------------------------------------------------------------------

    def _settle_left(self, fp: str) -> float:
        settle = self.policy.settle.total_seconds()
        since = self._trusted_since.get(fp)
        return settle if since is None else since + settle - self._elapsed
