"""One step of the ``--manage-certs`` planner (:mod:`webhook.install.rotation`): a Secret
write, configurations patched, or a wait; and the Secret write, planned from one version of the
Secret so that two leaders never act on the same version. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from webhook.install.tlssecret import Contents, build

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Decision:
    """One step: write the Secret, or patch configurations to these objects, or wait."""

    #: The Secret to write: created when it carries no resourceVersion, else updated.
    secret: JSON | None = None
    #: Configurations to patch, each the whole object as it should become.
    configs: tuple[JSON, ...] = ()
    #: What the write does, for the log.
    done: str = ""
    #: Why nothing can be done (logged once while it lasts).
    problem: str = ""
    #: Seconds after which the plan changes even if nothing else does (inf: never).
    wait: float = math.inf


@dataclass(frozen=True, slots=True)
class Writer:
    """A Secret write planned from one version of it."""

    #: The Secret's name and namespace.
    name: str
    namespace: str
    contents: Contents
    version: str | None
    #: The Secret's metadata as read, written back with it (see ``tlssecret.build``).
    metadata: Mapping[str, Any]

    @property
    def paired(self) -> bool:
        """Whether the Secret holds a usable pair, so a write may keep it as it is.

        A ``kubernetes.io/tls`` Secret must hold ``tls.crt`` and ``tls.key`` (the API server
        answers 422 to a write without them), so while the pair is unusable the only writes
        are those that issue one (the renewal, the switch to a staged CA), and they carry the
        bundle's repair too: the bundle's write and the staging wait for the pair. (Retiring
        waits for it anyway: it needs a pair from the CA.)"""
        return self.contents.serving is not None

    def secret(self, done: str, **changes: Any) -> Decision:
        contents = replace(self.contents, problems=(), **changes)
        secret = build(
            contents,
            name=self.name,
            namespace=self.namespace,
            resource_version=self.version,
            metadata=self.metadata,
        )
        return Decision(secret=secret, done=f"Secret {self.namespace}/{self.name} {done}")
