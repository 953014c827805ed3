"""The default resource type: the one a start gets when it chooses none."""

from workspace.limits.resource_types import ResourceType, choose, default_name

TYPES = [ResourceType.from_config({"name": "small"}), ResourceType.from_config({"name": "gpu", "gpus": 1})]


def test_the_default_is_the_configured_one_else_the_first_type():
    assert default_name(TYPES, "gpu") == "gpu"
    assert default_name(TYPES, None) == "small"
    assert default_name([], None) is None
    assert choose(TYPES, None, None, []).name == "small" and choose(TYPES, None, "gpu", []).name == "gpu"
