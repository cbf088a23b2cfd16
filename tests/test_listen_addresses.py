"""Where ``stszone serve`` listens: ``--host`` left out is every address, IPv4 and IPv6, on one
port (webhook/server/listeners.py), so that an IPv6-only cluster's API server reaches it."""

from __future__ import annotations

import dataclasses
import socket
import ssl
import subprocess
from pathlib import Path

import pytest

from tests.process import start_serve
from webhook.cli import build_parser, settings_from
from webhook.server.listeners import bind, listen


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


IPV6 = pytest.mark.skipif(not _has_ipv6_loopback(), reason="this machine has no IPv6 loopback")


def test_serve_without_host_listens_on_every_address() -> None:
    settings = settings_from(build_parser().parse_args(["serve", "--zones", "a"]), environ={})
    assert settings.host == ""
    sockets = bind(settings.host, 0)
    try:
        families = {sock.family for sock in sockets}
        assert socket.AF_INET in families
        assert len({sock.getsockname()[1] for sock in sockets}) == 1, "one port for all"
        assert all(sock.getsockname()[0] in ("0.0.0.0", "::") for sock in sockets)
    finally:
        for sock in sockets:
            sock.close()


@IPV6
def test_the_webhook_answers_over_ipv4_and_ipv6_when_host_is_left_out(
    tmp_path: Path, stopper: list[subprocess.Popen[bytes]]
) -> None:
    """An IPv6-only cluster (EKS's, for one) calls the webhook on the pod's IPv6 address."""
    server = start_serve(tmp_path, "--offline", "--zones", "a,b,c", bind="", host="127.0.0.1")
    stopper.append(server.proc)
    assert server.get("/readyz") == 200
    unchecked = ssl.create_default_context(cafile=tmp_path / "certs" / "ca.crt")
    unchecked.check_hostname = False  # the development certificate names 127.0.0.1 only
    assert dataclasses.replace(server, host="::1", ctx=unchecked).get("/readyz") == 200
    server.terminate()
    assert server.proc.wait(timeout=30) == 0
    port = server.port
    assert f"serving https://0.0.0.0:{port}, https://[::]:{port} (" in server.log.read_text()


@IPV6
def test_a_port_in_use_on_one_family_is_still_an_error() -> None:
    with socket.create_server(("::", 0), family=socket.AF_INET6) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match="in use"):
            bind("", port)


def test_a_family_the_machine_lacks_is_left_out_of_the_wildcard_only() -> None:
    """2001:db8::/32 is for documentation: on no machine (EADDRNOTAVAIL, or EAFNOSUPPORT
    where there is no IPv6), as the IPv6 wildcard is on a machine without IPv6."""
    addresses = [
        (socket.AF_INET, ("127.0.0.1", 0)),
        (socket.AF_INET6, ("2001:db8::1", 0, 0, 0)),
    ]
    sockets = listen(addresses, wildcard=True)
    try:
        assert [sock.family for sock in sockets] == [socket.AF_INET]
    finally:
        for sock in sockets:
            sock.close()
    lacking = "assign requested address|family not supported"
    with pytest.raises(OSError, match=lacking):
        listen(addresses, wildcard=False)
    with pytest.raises(OSError, match=lacking):
        listen(addresses[1:], wildcard=True)  # nothing bound at all is an error
