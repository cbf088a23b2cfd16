"""Which kubeconfig files, cluster and credentials a command takes, against kubectl's choice
(client-go's ClientConfigLoadingRules): ``--kubeconfig`` names one file, ``$KUBECONFIG`` a list.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.kubeconfig import write_kubeconfig
from webhook.cli import build_parser, plugin
from webhook.cluster.credentials import load_credentials


def test_a_kubeconfig_flag_holding_a_colon_names_one_file(tmp_path: Path) -> None:
    """``--kubeconfig DIR/a:b`` is the file ``a:b``, as kubectl reads its flag (one explicit
    path); only ``$KUBECONFIG`` is split at ``:``. Split, it named ``DIR/a`` (another cluster
    here) and ``b``, or "none of these files is found" when ``DIR/a`` does not exist."""
    colon = write_kubeconfig(tmp_path / "a:b", server="https://127.0.0.1:1/colon", token="t")
    write_kubeconfig(tmp_path / "a", server="https://127.0.0.1:1/other", token="t")
    credentials = load_credentials(str(colon), environ={})
    assert credentials.target_now().base == "https://127.0.0.1:1/colon"
    assert credentials.source == f"kubeconfig {colon}"

    config = yaml.safe_load(colon.read_text())
    config["contexts"][0]["name"] = config["current-context"] = "colon"
    colon.write_text(yaml.safe_dump(config))
    args = build_parser(prog=plugin.PROG).parse_args(["audit", "--kubeconfig", str(colon)])
    aimed = plugin.aim(args, environ={"KUBECONFIG": str(tmp_path / "a")})
    assert (aimed.kubeconfig, aimed.context) == (str(colon), "colon")
