"""The live view's KafkaNodePools: a CRD not served is an empty, listed table; once served
(installed after start), the next list fills it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from tests import poolsim as sim
from webhook.cluster.api import Api, ApiError
from webhook.cluster.reflector import Reflector
from webhook.cluster.resources import resources
from webhook.config import Settings
from webhook.model.store import Store


class CrdLater:
    """An API server answering 404 for kafkanodepools until ``installed``."""

    def __init__(self) -> None:
        self.installed = False
        self.gets = 0

    async def get(self, path: str, *, params: Mapping[str, str], **_: Any) -> bytes:
        self.gets += 1
        if not self.installed:
            raise ApiError(404, message="the server could not find the requested resource")
        pool = sim.pool_object("broker", replicas=3, node_ids=[0, 1, 2])
        body = {"kind": "KafkaNodePoolList", "metadata": {"resourceVersion": "7"}, "items": [pool]}
        return json.dumps(body).encode()


async def test_a_crd_installed_after_start_is_listed_by_the_next_look() -> None:
    (pools,) = [r for r in resources(Settings()) if r.table == "nodepools"]
    api = CrdLater()
    store = Store(live=True)
    reflector = Reflector(pools, api=cast(Api, api), store=store)
    await reflector.list()
    assert reflector.absent and "nodepools" in store.loaded and not store.nodepools
    assert reflector.status().synced and reflector.status().restarts == 0
    api.installed = True
    await reflector.list()
    assert not reflector.absent
    info = store.nodepool("kafka", "broker")
    assert info is not None and info.node_ids == (0, 1, 2) and info.cluster == "my-cluster"
