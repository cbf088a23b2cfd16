"""Where stszone's credentials come from, chosen as client-go chooses, and loaded once.

``--kubeconfig`` when given; else, in a pod, its service account (:func:`uses_service_account`);
else ``$KUBECONFIG``'s files, merged as kubectl merges them. A kubeconfig is read
where the ``kubernetes`` loader reads it unlike kubectl (:mod:`webhook.cluster.kubeconfig`,
:mod:`webhook.cluster.kubecontext`) before the loader fills the ``Configuration``; the
:class:`~webhook.cluster.credentials.Credentials` it gives are loaded once right away, so a
broken kubeconfig stops a command at start, and reloaded as they expire.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from webhook.cluster.credentials import Credentials, Loaded
from webhook.cluster.kubeconfig import (
    KUBECONFIG_ENV,
    cluster_entry,
    impersonation_headers,
    kubeconfig_files,
    merged_config,
    not_found,
    read_as_client_go,
    refuse_insecure_with_ca,
    require_kubeconfig,
    shown,
    unsent_credentials,
    user_credentials,
    user_entry,
    user_token_file,
)
from webhook.cluster.kubecontext import chosen_context
from webhook.errors import ConfigError

#: Where the kubelet mounts the service account (token, ca.crt, namespace).
SERVICE_ACCOUNT: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: Set by the kubelet in every pod whose service account token is mounted.
IN_CLUSTER_ENV: Final = "KUBERNETES_SERVICE_HOST"
IN_CLUSTER_PORT_ENV: Final = "KUBERNETES_SERVICE_PORT"

log = logging.getLogger("stszone.credentials")


def in_cluster_possible(
    environ: Mapping[str, str], service_account: Path = SERVICE_ACCOUNT
) -> bool:
    """client-go's test for its in-cluster config (``inClusterClientConfig.Possible``): in a
    pod (``$KUBERNETES_SERVICE_HOST`` and ``_PORT``) whose service-account token is mounted."""
    in_a_pod = environ.get(IN_CLUSTER_ENV) and environ.get(IN_CLUSTER_PORT_ENV)
    return bool(in_a_pod and (service_account / "token").is_file())


def uses_service_account(
    environ: Mapping[str, str], service_account: Path = SERVICE_ACCOUNT
) -> bool:
    """Whether a command given no ``--kubeconfig``/``--context`` talks as the pod's service
    account: in a pod, unless its token is not mounted (automountServiceAccountToken: false)
    and ``$KUBECONFIG`` names another way in (a pod without the token and without it is told
    the token is missing)."""
    if not environ.get(IN_CLUSTER_ENV):
        return False
    return in_cluster_possible(environ, service_account) or not environ.get(KUBECONFIG_ENV)


def load_credentials(
    kubeconfig: str | None = None,
    *,
    context: str | None = None,
    environ: Mapping[str, str] = os.environ,
    service_account: Path = SERVICE_ACCOUNT,
) -> Credentials:
    """``--kubeconfig`` if given, else the pod's service account, else ``$KUBECONFIG``.

    ``context`` picks a kubeconfig context other than its current-context (and so rules out
    the service account).

    Loads once right away (blocking: call it off the loop) so that a broken kubeconfig stops
    ``stszone serve`` at start-up with a :class:`ConfigError` instead of failing every watch.
    """
    from kubernetes import client, config

    # The package is only partly annotated; treat it as Any rather than sprinkle ignores.
    kube_client: Any = client
    kube_config: Any = config
    if kubeconfig is None and context is None and uses_service_account(environ, service_account):
        loader = kube_config.incluster_config.InClusterConfigLoader(
            token_filename=str(service_account / "token"),
            cert_filename=str(service_account / "ca.crt"),
            environ=environ,
        )

        def in_cluster() -> Loaded:
            configuration = kube_client.Configuration()
            loader.load_and_set(configuration)
            return Loaded(configuration)

        credentials = Credentials(in_cluster, source="in-cluster service account")
    else:
        # --kubeconfig names one file; $KUBECONFIG may list several, merged as kubectl merges them.
        listed = None if kubeconfig else environ.get(KUBECONFIG_ENV)
        if not (kubeconfig or listed) and context:
            raise ConfigError(
                f"--context {context} names a kubeconfig context, but no kubeconfig is given: "
                "pass --kubeconfig PATH or set $KUBECONFIG (stszone reads ~/.kube/config only "
                "when named, or as `kubectl stszone`)"
            )
        if not (kubeconfig or listed):
            raise ConfigError(
                "no cluster to talk to: not in a pod (no KUBERNETES_SERVICE_HOST), no --kubeconfig "
                "and no $KUBECONFIG; give one, or run offline with --zones or --cluster FILE"
            )
        files = kubeconfig_files(listed, listed=True) if listed else (str(kubeconfig),)
        require_kubeconfig(files, named=f"${KUBECONFIG_ENV}" if listed else "--kubeconfig")
        # Named to the loader, which would take the last file's current-context.
        chosen = chosen_context(files, context)

        named = f" (context {context})" if context else ""
        source = f"kubeconfig {shown(files)}{named}"
        warned: list[tuple[str, ...]] = [()]

        def from_file() -> Loaded:
            configuration = kube_client.Configuration()
            # Merged here: the loader would split a --kubeconfig path holding ":" into files.
            merged = merged_config(files)
            if merged is None:
                # require_kubeconfig refuses a missing file at start only: one removed while
                # stszone runs is not found, not empty.
                if not any(os.path.exists(os.path.expanduser(f)) for f in files):
                    raise ValueError(
                        f"{not_found(files)}; put it back, and the next request reads it"
                    )
                raise ValueError("it holds no configuration (an empty file)")
            cluster = cluster_entry(merged, context=chosen)
            refuse_insecure_with_ca(cluster)
            user = user_entry(merged, context=chosen)
            loaded = Loaded(
                configuration,
                token_file=user_token_file(user),
                impersonation=impersonation_headers(user),
                unsent=unsent_credentials(cluster, user),
                identified=bool(user_credentials(user)),
            )
            if loaded.unsent and cluster is not None and loaded.unsent != warned[0]:
                # kubectl says nothing; a server that then answers 401 would leave one guessing.
                log.warning(
                    "%s: cluster %r is not served over https, so the user's credentials (%s) "
                    "are not sent to it, as kubectl does not send them; give it an https server "
                    "to authenticate",
                    source,
                    cluster[0],
                    ", ".join(loaded.unsent),
                )
            warned[0] = loaded.unsent
            read_as_client_go(merged, chosen)
            kube_config.load_kube_config_from_dict(
                merged,
                context=chosen,
                client_configuration=configuration,
                persist_config=False,
            )
            return loaded

        credentials = Credentials(from_file, source=source)
    credentials.target_now()
    return credentials
