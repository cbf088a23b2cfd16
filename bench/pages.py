"""What one list page costs the live view: decoded whole, or decoded to what the records read.

    python bench/pages.py               # pages of the generated pods, PVs and claims

Builds one page of each big collection from the objects ``bench/cache_scale.py`` serves (a
recorded object with its managedFields, about 5 KB a pod, 1.9 KB a PV, 1.3 KB a claim), sized
as the reflector sizes them (about 1 MiB, at most 500 objects), and reports milliseconds per
page for:

* ``codec.loads``: the whole page into Python objects, and freed (how pages were read before);
* ``read_page``: the page decoded to the shape of its table (``webhook/cluster/pages.py``);
* ``+ records``: either one, and the records built from its items by the extractors.

The garbage collector is off while timing, as the reflector holds it off while a page folds.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cache_scale import ZONES, _templates, _uid
from webhook.cluster import pages
from webhook.model.records import EXTRACTORS, Table
from webhook.wire import codec

#: table -> (template, objects per page as the reflector would size them)
PAGES: dict[Table, tuple[str, int]] = {"pods": ("pods", 200), "volumes": ("pvs", 500)}
PAGES["claims"] = ("pvcs", 500)


def page(table: Table) -> bytes:
    """One list page of ``table``, as the fake API server sends it."""
    template, count = PAGES[table]
    fill = _templates()[template].fill
    items = []
    for n in range(count):
        fields = {"NS": "ns-001", "STS": "set-00001", "IDX": str(n), "ZONE": ZONES[n % 3]}
        fields["OWNER"] = _uid(2, 1)
        if table == "pods":
            items.append(fill(**fields, UID=_uid(3, n), NODE=f"node-{n:05d}"))
        elif table == "volumes":
            items.append(fill(**fields, NAME=f"pv-{n:06d}", UID=_uid(4, n), CLAIM=_uid(5, n)))
        else:
            items.append(fill(**fields, PV=f"pv-{n:06d}", CLAIM=_uid(5, n)))
    head = b'{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"7","continue":"x"},'
    return head + b'"items":[' + b",".join(items) + b"]}"


def per_call(work: Callable[[], Any], *, rounds: int = 50) -> float:
    """Milliseconds per call (the result freed inside the timing), best of three runs."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(rounds):
            result = work()
            del result
        best = min(best, (time.perf_counter() - started) / rounds * 1e3)
    return best


def row(table: Table) -> str:
    """One line of the report: ``table``'s page, each way."""
    body, extract = page(table), EXTRACTORS[table]
    whole = per_call(lambda: codec.loads(body))
    whole_records = per_call(lambda: [extract(i) for i in codec.loads(body)["items"]])
    shaped = per_call(lambda: pages.read_page(body, table=table))
    shaped_records = per_call(lambda: [extract(i) for i in pages.read_page(body, table=table)[0]])
    return (
        f"{table:>8} {len(body) / 1e6:6.2f} {whole:10.2f}ms {whole_records:8.2f}ms "
        f"{shaped:8.2f}ms {shaped_records:8.2f}ms"
    )


def main() -> int:
    gc.disable()
    head = ("page", "MB", "codec.loads", "+ records", "read_page", "+ records")
    print("{:>8} {:>6} {:>12} {:>10} {:>10} {:>10}".format(*head))
    for table in PAGES:
        print(row(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
