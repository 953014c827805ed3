"""What an SSH gateway login names (workspace/gateway/login.py)."""

import pytest

from workspace.errors import UserError
from workspace.gateway.login import Login, parse


def test_owner_workspace_and_the_start_flag():
    assert parse("ada+thesis") == Login("ada", "thesis")
    assert parse("ada+thesis+start") == Login("ada", "thesis", start=True)
    # a user name may hold a + (an e-mail address); the workspace is the last part
    assert parse("ada+lab@uni.edu+thesis") == Login("ada+lab@uni.edu", "thesis")
    assert parse("ada+lab@uni.edu+thesis+start") == Login("ada+lab@uni.edu", "thesis", start=True)
    # a workspace called start
    assert parse("ada+start") == Login("ada", "start")


@pytest.mark.parametrize(
    "bad", ["ada", "+thesis", "ada+", "ada+the sis", "ada+../x", "a\x00+b", "x" * 600, None, "ada++start"]
)
def test_a_login_the_gateway_cannot_read_says_how_to_write_it(bad):
    with pytest.raises(UserError) as e:
        parse(bad)
    assert "ada+thesis" in e.value.jupyterhub_message
