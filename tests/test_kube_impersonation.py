"""A kubeconfig user's impersonation that kubectl refuses is refused, not dropped."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.kubeconfig import write_kubeconfig
from webhook.cluster.credsource import load_credentials
from webhook.errors import ConfigError


@pytest.mark.parametrize(
    "fields",
    [
        {"as-groups": ["team-a"]},
        {"as-uid": "u-1"},
        {"as-user-extra": {"scopes": ["db"]}},
    ],
)
def test_impersonation_without_a_user_is_refused(tmp_path: Path, fields: dict[str, object]) -> None:
    """as-groups, as-uid or as-user-extra without ``as``: client-go's validation refuses the
    kubeconfig ("requesting uid, groups or user-extra for USER without impersonating a user",
    tools/clientcmd/validation.go validateAuthInfo), so kubectl never acts as the underlying
    credential with the groups left out; neither does stszone."""
    path = write_kubeconfig(tmp_path / "config", server="https://127.0.0.1:1", token="t")
    config = yaml.safe_load(path.read_text())
    config["users"][0]["user"].update(fields)
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as caught:
        load_credentials(str(path))
    assert "without impersonating a user" in caught.value.message
    assert "as:" in caught.value.message
