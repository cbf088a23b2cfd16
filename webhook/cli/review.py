"""``stszone review FILE``: answer one AdmissionReview with no server."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from webhook.cli.options import (
    add_own_namespace_flag,
    add_view_flags,
    command_parser,
    settings_from,
)
from webhook.cluster.clusterfile import STDIN
from webhook.cluster.live import live_store
from webhook.cluster.view import choose_view, offline_store
from webhook.config import Defaults, Settings
from webhook.errors import BadObject, BadRequest, ConfigError
from webhook.model import objects
from webhook.model.annotations import SKIP
from webhook.model.objects import JSON
from webhook.model.store import Store
from webhook.rules.admission import Endpoint, Request
from webhook.rules.decision import allow
from webhook.rules.explain_sizes import namespace_refusal
from webhook.rules.plan import skipped
from webhook.wire import review

HELP = "answer one AdmissionReview from a file, no server"
EXAMPLES = """\
examples:
  stszone review --zones a,b,c tests/fixtures/admission/003-Pod-CREATE.json
  stszone review --cluster cluster.yaml --endpoint validate review.json
  stszone review --zones a,b,c - < tests/fixtures/admission/035-Pod-CREATE.json    from stdin
  stszone review --kubeconfig ~/.kube/config review.json    answer from the cluster (one list)
exit status: 0 answered (allowed or denied), 2 the file is not an AdmissionReview or is over
the 7 MiB request body cap that stszone serve answers with 413
"""


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """The ``review`` sub-parser."""
    parser = command_parser(
        commands,
        "review",
        help=HELP,
        description=(
            "Answer one AdmissionReview as the API server would experience it: the "
            "mutating webhook, then the validating webhook on the mutated object. Prints the "
            "response AdmissionReview as JSON. A request the webhook configurations never "
            "send (a namespace not opted in, kube-system, stszone's own namespace, an object "
            "labelled stszone.io/skip=true) is allowed unchanged, as the API server allows it, "
            "and standard error says why. The view is offline (--zones, --cluster) unless "
            "--kubeconfig or --context names a cluster, which is then listed once; $KUBECONFIG "
            "alone never makes review contact a cluster."
        ),
        epilog=EXAMPLES,
        run=run,
    )
    parser.add_argument("file", help="AdmissionReview JSON file, or - for stdin")
    parser.add_argument(
        "--endpoint",
        choices=("chain", "mutate", "validate"),
        default="chain",
        help="answer as one endpoint alone (default: chain = mutate then validate)",
    )
    add_view_flags(parser, operands="review.json")
    add_own_namespace_flag(parser, "--stszone-namespace")
    return parser


def run(args: argparse.Namespace) -> int:
    """``stszone review``."""
    return run_review(settings_from(args), path=args.file, endpoint=args.endpoint)


def load_view(settings: Settings) -> Store:
    """Offline unless ``--kubeconfig``/``--context`` is given: then one list of that cluster.

    The environment is not consulted (``$KUBECONFIG``, a pod's service account): the same
    command answers the same way on every machine unless it names a cluster itself.
    """
    if goes_live(settings):
        return asyncio.run(live_store(settings))
    return offline_store(settings)


def goes_live(settings: Settings) -> bool:
    """Whether the review is answered from a cluster: one it names, or the pod's service
    account when ``kubectl stszone`` aimed it there."""
    if settings.in_cluster and not (settings.offline or settings.cluster_file):
        return True
    return choose_view(settings, environ={}).live


def not_sent(request: Request, *, store: Store, defaults: Defaults) -> str:
    """Why the API server would never send ``request`` to stszone ("" when it would): the
    webhook configurations' namespaceSelector (an opted-in namespace, never kube-system or
    stszone's own) and objectSelector (``stszone.io/skip`` NotIn ``[true]``, matched by the
    API server against the object and the old object: either matching sends the request)."""
    if request.namespace:  # a cluster-scoped object has no namespace to select by
        excluded = defaults.excluded_namespaces
        if why := namespace_refusal(store, request.namespace, excluded=excluded):
            return why
    sent = [obj for obj in (request.object, request.old_object) if obj]
    if sent and all(_skipped(obj) for obj in sent):
        return f"the {request.kind} is labelled {SKIP}=true"
    return ""


def _skipped(obj: JSON) -> bool:
    try:
        return skipped(objects.str_map(objects.mapping(obj, "metadata"), "labels"))
    except BadObject:
        return False  # unreadable labels: the rules name the problem


def run_review(settings: Settings, *, path: str, endpoint: str) -> int:
    """Print the response AdmissionReview for the review in ``path`` (``-`` = stdin)."""
    if path == STDIN and str(settings.cluster_file) == STDIN:
        raise ConfigError(
            "the review FILE and --cluster are both - (standard input), which holds one of "
            "them; give the other as a file"
        )
    stdin = path == STDIN
    name = f"{path} (standard input)" if stdin else path
    try:
        body = sys.stdin.buffer.read() if stdin else Path(path).read_bytes()
    except OSError as err:
        raise ConfigError(f"cannot read {name}: {err.strerror}") from None
    if len(body) > settings.max_body:
        # The server's cap (aiohttp's client_max_size): answering offline what `serve` refuses
        # would tell the user a review passes that the API server gets a 413 for.
        raise ConfigError(
            f"{name} is {len(body)} bytes, over the {settings.max_body} byte "
            f"({settings.max_body / 2**20:g} MiB) request body cap: stszone serve answers it "
            "413 Request Entity Too Large without reading it, and the API server treats that "
            "as the webhook failing (failurePolicy decides); send a smaller object"
        )
    try:
        parsed = review.parse(body)
    except BadRequest as err:
        raise ConfigError(f"{name}: {err.message}") from None
    store = load_view(settings)
    defaults = settings.defaults()
    passed_by = not_sent(parsed.request, store=store, defaults=defaults)
    if passed_by:
        # The API server answers such a request without calling stszone: allowed, unchanged.
        print(f"stszone review: not sent to stszone: {passed_by}", file=sys.stderr)
        answered = review.Answer(allow(), [], parsed.request.object)
    elif endpoint == "chain":
        answered = review.chain(parsed, store=store, defaults=defaults)
    else:
        which: Endpoint = "mutate" if endpoint == "mutate" else "validate"
        answered = review.answer(which, parsed, store=store, defaults=defaults)
    print(json.dumps(review.response(parsed, answered), indent=2))
    return 0
