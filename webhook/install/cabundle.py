"""The ``caBundle`` of stszone's two webhook configurations: what each trusts, and setting it.

Every webhook of a configuration gets the same bundle: the API server verifies the serving
certificate of a call against the ``caBundle`` of the webhook it calls, so a CA counts as
trusted by a configuration only when every one of its webhooks holds it.
"""

from __future__ import annotations

import base64
import binascii
import copy
import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cryptography import x509

from webhook.install.tlssecret import fingerprint, pem_bundle

JSON = dict[str, Any]


def _webhooks(config: Mapping[str, Any]) -> list[JSON]:
    hooks = config.get("webhooks") or []
    return [hook for hook in hooks if isinstance(hook, dict)]


def _certificates(encoded: object) -> list[x509.Certificate]:
    if not isinstance(encoded, str) or not encoded:
        return []
    try:
        return x509.load_pem_x509_certificates(base64.b64decode(encoded, validate=True))
    except (binascii.Error, ValueError, x509.InvalidVersion):
        return []  # a caBundle nothing verifies against trusts nothing


def held(config: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    """Per webhook, the fingerprints its caBundle holds, in order."""
    return tuple(
        tuple(
            fingerprint(cert)
            for cert in _certificates(hook.get("clientConfig", {}).get("caBundle"))
        )
        for hook in _webhooks(config)
    )


def trusted(configs: Sequence[Mapping[str, Any]]) -> set[str]:
    """Fingerprints of the CAs every webhook of every configuration given holds."""
    sets = [set(fps) for config in configs for fps in held(config)]
    return set.intersection(*sets) if sets else set()


def carried(configs: Iterable[Mapping[str, Any]], *, now: dt.datetime) -> list[x509.Certificate]:
    """The unexpired certificates any webhook holds: what must stay trusted while they may be
    what a replica serves from."""
    found = [
        cert
        for config in configs
        for hook in _webhooks(config)
        for cert in _certificates(hook.get("clientConfig", {}).get("caBundle"))
        if cert.not_valid_after_utc > now
    ]
    return list({fingerprint(cert): cert for cert in found}.values())


def holds_exactly(config: Mapping[str, Any], *, bundle: Sequence[x509.Certificate]) -> bool:
    """Whether every webhook of ``config`` holds ``bundle`` and nothing else."""
    wanted = tuple(dict.fromkeys(fingerprint(cert) for cert in bundle))
    return all(fps == wanted for fps in held(config))


def with_bundle(config: Mapping[str, Any], *, bundle: Sequence[x509.Certificate]) -> JSON:
    """A copy of ``config`` whose every webhook's caBundle is ``bundle``."""
    changed: JSON = copy.deepcopy(dict(config))
    encoded = base64.b64encode(pem_bundle(bundle)).decode()
    for hook in _webhooks(changed):
        hook.setdefault("clientConfig", {})["caBundle"] = encoded
    return changed


def name_of(config: Mapping[str, Any]) -> str:
    """``Kind/name`` of a configuration, for log lines."""
    return f"{config.get('kind', '?')}/{(config.get('metadata') or {}).get('name', '?')}"
