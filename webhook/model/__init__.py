"""The cluster as stszone sees it: the ``stszone.io/*`` annotations, object access, records, the
Store. Pure: no I/O, no aiohttp, no kubernetes client; imports only ``config``/``errors``."""
