"""``stszone review FILE``: answer one AdmissionReview with no server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from webhook.cluster.view import offline_store
from webhook.config import Settings
from webhook.errors import BadRequest, ConfigError
from webhook.rules import admission
from webhook.wire import review


def run_review(settings: Settings, *, path: str, endpoint: str) -> int:
    """Print the response AdmissionReview for the review in ``path`` (``-`` = stdin)."""
    try:
        body = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror}") from None
    try:
        request = review.parse(body)
    except BadRequest as err:
        raise ConfigError(f"{path}: {err.message}") from None
    store = offline_store(settings)
    defaults = settings.defaults()
    if endpoint == "chain":
        outcome = admission.chain(request, store=store, defaults=defaults)
    else:
        outcome = admission.ANSWER["mutate" if endpoint == "mutate" else "validate"](
            request, store=store, defaults=defaults
        )
    print(json.dumps(review.response(request, outcome), indent=2))
    return 0
