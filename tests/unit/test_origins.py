"""Where the culler finds a workspace past the proxy, from the hub's own proxy table."""

from workspace.origins import server_address


def test_a_server_on_its_own_origin_is_found_under_the_hubs_host_route():
    # JupyterHub's GET /hub/api/proxy with host routing: keys without a leading slash, hosts without
    # the port (#28: a key of the proxy's own form found none, and every workspace was culled as idle)
    routes = {"ada.localhost/user/ada/thesis/": {"target": "http://10.213.0.2:8888"}}
    url = "http://ada.localhost:8000/user/ada/thesis/"
    assert server_address(url, routes) == "http://10.213.0.2:8888/user/ada/thesis/"
    # the proxy's own form (CHP's table) too
    assert server_address(url, {"/ada.localhost/user/ada/thesis": {"target": "http://10.213.0.2:8888/"}}) == (
        "http://10.213.0.2:8888/user/ada/thesis/"
    )


def test_a_server_on_the_hubs_origin_and_one_without_a_route():
    routes = {"/user/ada/thesis/": {"target": "http://10.213.0.2:8888"}}
    assert server_address("/user/ada/thesis/", routes) == "http://10.213.0.2:8888/user/ada/thesis/"
    assert server_address("/user/bob/thesis/", routes) is None
    assert server_address("http://bob.localhost:8000/user/bob/thesis/", routes) is None
    # another user's host never matches a path route of the same path
    assert server_address("http://eve.localhost:8000/user/ada/thesis/", routes) is None
