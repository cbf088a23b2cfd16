"""API discovery for the fake API server, for the tests that run kubectl against it.

kubectl resolves ``statefulset/db`` through discovery before it asks for the object: the
legacy documents (``/api``, ``/apis``, and each group version's resource list), which kubectl
reads when the server does not answer its request for the aggregated form. Served only when a
test turns it on (``FakeApi.discovery``): the live view asks discovery whether OpenKruise's
CRD is served, and the other tests count on it not being.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from tests.fakestate import RESOURCES

JSON = dict[str, Any]


def _versions() -> dict[str, list[JSON]]:
    """group version -> its resources, from the fake's own table."""
    found: dict[str, list[JSON]] = {}
    for plural_key, (path, kind, api_version, namespaced) in RESOURCES.items():
        plural = path.rsplit("/", 1)[1]
        entry = {
            "name": plural,
            "singularName": kind.lower(),
            "namespaced": namespaced,
            "kind": kind,
            "verbs": ["get", "list", "watch"],
        }
        if plural_key == "pods":
            found.setdefault(api_version, []).append(
                {**entry, "name": "pods/eviction", "kind": "Eviction", "verbs": ["create"]}
            )
        found.setdefault(api_version, []).append(entry)
    return found


def _builtin_first(group_version: str) -> tuple[bool, str]:
    """A real server lists its own groups before the CRDs' (kubectl resolves ``statefulset``
    by that order: to ``apps``, not to OpenKruise's ``apps.kruise.io``)."""
    group = group_version.split("/")[0]
    return (group != "apps" and not group.endswith(".k8s.io"), group_version)


def answer(path: str) -> web.Response | None:
    """The discovery document at ``path``, or None when ``path`` is not a discovery path."""
    versions = _versions()
    path = path.rstrip("/")
    if path == "/api":
        return web.json_response({"kind": "APIVersions", "versions": ["v1"]})
    if path == "/apis":
        groups = [
            {
                "name": gv.split("/")[0],
                "versions": [{"groupVersion": gv, "version": gv.split("/")[1]}],
                "preferredVersion": {"groupVersion": gv, "version": gv.split("/")[1]},
            }
            for gv in sorted(versions, key=_builtin_first)
            if "/" in gv
        ]
        return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    version = path.removeprefix("/api/").removeprefix("/apis/")
    if path.startswith(("/api/", "/apis/")) and version in versions:
        return web.json_response(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": version,
                "resources": versions[version],
            }
        )
    return None
