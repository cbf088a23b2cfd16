"""``stszone manifests``: the installation as YAML, ready for ``kubectl apply -f -``.

Three outputs from the same objects (:mod:`~webhook.install.deploybase`,
:mod:`~webhook.install.registration`), laid out as deploy/ lays them out
(:mod:`~webhook.install.deployfiles`):

- printed, without ``--ca``: the base, whose Deployment runs ``stszone serve --manage-certs``
  (it makes, injects and rotates its own certificates; the write RBAC comes with it).
- printed, with ``--ca``: the base with provided certificates instead -- the caBundle set, a
  ``kubernetes.io/tls`` Secret with the serving pair, the pair mounted, no write RBAC. The pair
  is checked first (it chains to the CA, the key matches, it names
  ``stszone.<namespace>.svc``), because with ``failurePolicy: Fail`` a wrong certificate means
  every pod create in an opted-in namespace is refused.
- ``--kustomize-dir DIR``: the base as kustomize files with no certificate material. That is how
  ``deploy/`` is made, and how a pip-installed stszone gives you a base to patch; the
  components (``--component NAME``) are made the same way, ``provided-certs`` as the patches
  that turn the base into the provided form above.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import TextIO

from webhook import __version__
from webhook.config import DEFAULT_NAMESPACE, SECRET_NAME
from webhook.errors import ConfigError
from webhook.install.basefile import fill_ca_bundle, read_base
from webhook.install.deploybase import IMAGE, NAME, SELECTOR, Install, Obj
from webhook.install.deployfiles import (
    COMPONENTS,
    PATCH_COMPONENTS,
    base_objects,
    dump,
    write_kustomize_dir,
)
from webhook.install.pemcheck import (
    check_ca_bundle,
    check_serving_pair,
    pem_files,
    read_named,
    read_pair,
)
from webhook.install.registration import ALL_KINDS, Kinds
from webhook.model.names import is_dns_label


def tls_secret(namespace: str, *, cert_pem: bytes, key_pem: bytes) -> Obj:
    """The Secret the Deployment mounts, holding the serving pair."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": SECRET_NAME, "namespace": namespace, "labels": dict(SELECTOR)},
        "data": {
            "tls.crt": base64.b64encode(cert_pem).decode(),
            "tls.key": base64.b64encode(key_pem).decode(),
        },
    }


def check_dns_label(value: str, *, flag: str, what: str, example: str) -> None:
    """ConfigError unless ``value``, given with ``flag``, is a DNS-1123 label, as a namespace
    or Service name must be: it becomes a label of the name the API server dials."""
    if not is_dns_label(value):
        raise ConfigError(
            f"{flag} {value!r} is not a {what} (lowercase letters, digits and '-', at most 63 "
            f"characters, e.g. {example})"
        )


def _check_install(*, namespace: str, image: str) -> None:
    check_dns_label(namespace, flag="--namespace", what="namespace name", example=DEFAULT_NAMESPACE)
    if not image or any(char.isspace() for char in image):
        raise ConfigError(f"--image {image!r} is not an image reference (e.g. stszone:0.1.0)")


def _objects(
    *,
    namespace: str | None,
    image: str | None,
    base: Path | None,
    ca: Path,
    ca_pem: bytes,
    match_conditions: bool,
    kinds: Kinds = ALL_KINDS,
) -> tuple[list[Obj], str]:
    ca_bundle = base64.b64encode(ca_pem).decode()
    if base is None:
        namespace = DEFAULT_NAMESPACE if namespace is None else namespace
        image = IMAGE if image is None else image
        _check_install(namespace=namespace, image=image)
        install = Install(
            namespace=namespace,
            image=image,
            ca_bundle=ca_bundle,
            match_conditions=match_conditions,
            certs="provided",
            kinds=kinds,
        )
        return base_objects(install), namespace
    if namespace is not None or image is not None:
        raise ConfigError("--base takes the namespace and image from the file; drop them")
    if not match_conditions:
        raise ConfigError(
            "--base takes the webhooks from the file; drop --no-match-conditions and add the "
            "component deploy/components/no-match-conditions to the overlay instead"
        )
    objects, source = read_base(base, ca=ca)
    return objects, fill_ca_bundle(objects, ca_bundle=ca_bundle, source=source)


def run_manifests(
    *,
    ca: Path | None,
    cert: Path | None = None,
    key: Path | None = None,
    secret: bool = True,
    namespace: str | None = None,
    image: str | None = None,
    base: Path | None = None,
    kustomize_dir: Path | None = None,
    match_conditions: bool = True,
    component: str | None = None,
    out: TextIO | None = None,
    kinds: Kinds = ALL_KINDS,
) -> int:
    """Print the installation (or write the kustomize base); exit status 0, or ConfigError.

    With ``component``, the optional component instead: printed, or written as kustomize files.
    """
    if component is not None:
        return _run_component(component, namespace=namespace, kustomize_dir=kustomize_dir, out=out)
    if kustomize_dir is not None:
        if ca or cert or key or base:
            raise ConfigError(
                "--kustomize-dir writes the base without certificate material; drop "
                "--ca/--cert/--key/--base (use the cert-manager overlay, or print with --ca)"
            )
        install = Install(
            namespace=DEFAULT_NAMESPACE if namespace is None else namespace,
            image=IMAGE if image is None else image,
            match_conditions=match_conditions,
            kinds=kinds,
        )
        _check_install(namespace=install.namespace, image=install.image)
        for path in write_kustomize_dir(kustomize_dir, install):
            print(f"wrote {path}", file=sys.stderr)
        return 0
    if ca is None:
        if cert or key or base or not secret:
            raise ConfigError(
                "--cert/--key/--base/--no-secret go with --ca (provided certificates); without "
                "--ca the base runs `stszone serve --manage-certs`, which makes its own"
            )
        return _print_managed(
            namespace=namespace,
            image=image,
            match_conditions=match_conditions,
            out=out,
            kinds=kinds,
        )
    files = pem_files(ca, cert=cert, key=key, base=base)
    ca_pem = read_named(ca, files.ca)
    check_ca_bundle(ca_pem, files=files)
    objects, namespace = _objects(
        namespace=namespace,
        image=image,
        base=base,
        ca=ca,
        ca_pem=ca_pem,
        match_conditions=match_conditions,
        kinds=kinds,
    )
    if secret:
        cert_pem, key_pem = read_pair(ca, cert=cert, key=key, files=files)
        for warning in check_serving_pair(
            ca_pem=ca_pem,
            cert_pem=cert_pem,
            key_pem=key_pem,
            host=f"{NAME}.{namespace}.svc",
            files=files,
            namespace=namespace,
        ):
            print(f"stszone manifests: warning: {warning}", file=sys.stderr)
        # After the Namespace and RBAC, before the Service and the Deployment that mounts it.
        at = next((i for i, obj in enumerate(objects) if obj["kind"] == "Service"), len(objects))
        objects.insert(at, tls_secret(namespace, cert_pem=cert_pem, key_pem=key_pem))
    out = out or sys.stdout
    out.write(f"# stszone {__version__} in namespace {namespace}: kubectl apply -f -\n")
    out.write(dump(objects))
    return 0


def _print_managed(
    *,
    namespace: str | None,
    image: str | None,
    match_conditions: bool,
    out: TextIO | None,
    kinds: Kinds = ALL_KINDS,
) -> int:
    install = Install(
        namespace=DEFAULT_NAMESPACE if namespace is None else namespace,
        image=IMAGE if image is None else image,
        match_conditions=match_conditions,
        kinds=kinds,
    )
    _check_install(namespace=install.namespace, image=install.image)
    out = out or sys.stdout
    out.write(
        f"# stszone {__version__} in namespace {install.namespace}, self-managed certificates: "
        "kubectl apply -f -\n"
    )
    out.write(dump(base_objects(install)))
    return 0


def _run_component(
    name: str, *, namespace: str | None, kustomize_dir: Path | None, out: TextIO | None
) -> int:
    install = Install(namespace=DEFAULT_NAMESPACE if namespace is None else namespace)
    _check_install(namespace=install.namespace, image=install.image)
    if kustomize_dir is not None:
        for path in write_kustomize_dir(kustomize_dir, install, component=name):
            print(f"wrote {path}", file=sys.stderr)
        return 0
    if name in PATCH_COMPONENTS:
        raise ConfigError(
            f"--component {name} is a kustomize component of patches, not objects to apply: "
            f"write it with --kustomize-dir, or print the installation it makes with --ca"
        )
    out = out or sys.stdout
    out.write(f"# stszone {__version__}: optional component {name}: kubectl apply -f -\n")
    out.write(dump(COMPONENTS[name][1](install)))
    return 0
