"""Framework images (#18): the scientific image in use (a notebook imports numpy, pandas and sklearn), the
images' sizes and versions on the API and the spawn form, TensorBoard through the server's proxy; the
pytorch, tensorflow and paddle images wherever they are built (a site builds them by choice; CI builds the
default `base,scientific,labelling`, so these skip there: `WORKSPACE_BUILD_IMAGES=base,scientific,tensorflow,paddle make
images`, then `pytest tests/integration/test_framework_images.py -k framework`)."""

from __future__ import annotations

import json
import time

import docker
import pytest
import requests

from .hub import Hub

SCIENTIFIC = "workspace-scientific:latest"
PYTORCH = "workspace-pytorch:latest"
TENSORFLOW = "workspace-tensorflow:latest"
PADDLE = "workspace-paddle:latest"

NOTEBOOK = {
    "cells": [
        {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {},
            "outputs": [],
            "source": "import numpy, pandas, sklearn\n"
            "frame = pandas.DataFrame({'x': numpy.arange(4)})\n"
            "print('sum', int(frame.x.sum()), 'sklearn', sklearn.__version__)",
        }
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


@pytest.fixture(scope="module")
def scientific(docker_client):
    try:
        docker_client.images.get(SCIENTIFIC)
    except docker.errors.ImageNotFound:
        pytest.skip(f"{SCIENTIFIC} is not built: run `make images` (or `make test`, which builds it)")
    return SCIENTIFIC


def test_a_notebook_in_the_scientific_image_imports_numpy_pandas_and_sklearn(hub: Hub, scientific):
    user, ws = "sci", "analysis"
    token = hub.user_token(user)
    hub.start_workspace(user, ws, token, image=scientific)
    hub.sh(user, ws, f"cat > check.ipynb <<'EOF'\n{json.dumps(NOTEBOOK)}\nEOF")
    hub.sh(user, ws, "jupyter nbconvert --to notebook --execute check.ipynb --output done.ipynb 2>&1")
    done = json.loads(hub.sh(user, ws, "cat done.ipynb"))
    texts = [o.get("text", "") for o in done["cells"][0]["outputs"]]
    text = "".join(t if isinstance(t, str) else "".join(t) for t in texts)
    assert text.startswith("sum 6 sklearn "), done["cells"][0]["outputs"]
    hub.stop_workspace(user, ws, token)


def test_the_images_are_listed_with_their_sizes_and_versions(hub: Hub, scientific):
    token = hub.user_token("lister")
    r = hub.service_call("GET", "/images", token)
    assert r.status_code == 200, r.text
    images = {i["name"]: i for i in r.json()}
    base = images["workspace-base:latest"]
    assert base["default"] and base["available"] and base["size"] > 100e6, base
    assert base["versions"]["python"].startswith("3.11") and base["versions"]["jupyterlab"], base
    sci = images[scientific]
    assert {"numpy", "pandas", "scikit-learn"} <= set(sci["versions"]) and sci["size"] > base["size"], sci
    # the hub's spawn form says the same
    browser = hub.browser_login("lister")
    page = browser.get(f"{hub.url}/hub/spawn/lister/new", timeout=60).text
    assert f"numpy {sci['versions']['numpy']}" in page and "GB" in page, page[-3000:]
    assert hub.service_call("GET", "/images", None).status_code == 403


def test_tensorboard_answers_through_the_proxy_for_the_owner_and_nobody_else(hub: Hub):
    user, ws = "tb", "train"
    token, other = hub.user_token(user), hub.user_token("tb-other")
    hub.start_workspace(user, ws, token)
    url = f"{hub.url}/user/{user}/{ws}/tensorboard/"
    deadline, r = time.monotonic() + 120, None
    while time.monotonic() < deadline:
        r = requests.get(url, headers={"Authorization": f"token {token}"}, timeout=60)
        if r.status_code == 200:
            break
        time.sleep(1)
    assert r is not None and r.status_code == 200 and "TensorBoard" in r.text, (r.status_code, r.text[:300])
    denied = requests.get(url, headers={"Authorization": f"token {other}"}, timeout=30, allow_redirects=False)
    assert denied.status_code == 403, denied.status_code
    anonymous = requests.get(url, timeout=30, allow_redirects=False)
    assert anonymous.status_code in (302, 403) and "TensorBoard" not in anonymous.text
    # it listens on the container's loopback only: the owner's other workspaces cannot reach it either
    listening = hub.sh(
        user,
        ws,
        'python -c "import psutil; print(sorted({(c.laddr.ip, c.laddr.port) for c in '
        "psutil.net_connections('tcp') if c.status == 'LISTEN'}))\"",
    )
    wide = [a for a in eval(listening) if a[0] in ("0.0.0.0", "::") and a[1] not in (8888, 2222)]  # noqa: S307
    assert not wide and "127.0.0.1" in listening, listening
    hub.stop_workspace(user, ws, token)


@pytest.mark.optional_image
def test_the_pytorch_image_runs_a_tensor_op_on_the_cpu(docker_client):
    """Wherever the pytorch image is built (WORKSPACE_BUILD_IMAGES=...,pytorch); on a GPU machine,
    tests/device/check_gpu.py is the check of the GPU."""
    try:
        docker_client.images.get(PYTORCH)
    except docker.errors.ImageNotFound:
        pytest.skip(f"{PYTORCH} is not built here (WORKSPACE_BUILD_IMAGES=base,scientific,pytorch make images)")
    out = docker_client.containers.run(
        PYTORCH,
        ["python", "-c", "import torch; x = torch.ones(64, 64); print('ok', float((x @ x).sum()), torch.version.cuda)"],
        remove=True,
        user="1000",
    ).decode()
    assert out.startswith("ok 262144.0"), out


@pytest.mark.optional_image
@pytest.mark.parametrize(
    "image, code, expected",
    [
        (
            TENSORFLOW,
            "import tensorflow as tf; x = tf.ones((64, 64)); print('ok', float(tf.reduce_sum(x @ x)))",
            "ok 262144.0",
        ),
        (
            PADDLE,
            "import paddle; x = paddle.ones([64, 64]); print('ok', float(paddle.matmul(x, x).sum()))",
            "ok 262144.0",
        ),
    ],
)
def test_a_framework_image_computes_on_the_cpu_and_says_its_versions(docker_client, image, code, expected):
    """Wherever the image is built; on a GPU machine tests/device/check_gpu.py checks the GPU."""
    try:
        found = docker_client.images.get(image)
    except docker.errors.ImageNotFound:
        pytest.skip(f"{image} is not built here (WORKSPACE_BUILD_IMAGES=...,{image.split('-')[1].split(':')[0]})")
    versions = json.loads(found.labels["workspace.versions"])
    framework = "tensorflow" if image == TENSORFLOW else "paddlepaddle"
    assert versions.get(framework) and versions.get("python"), versions  # what the forms and the API show
    out = docker_client.containers.run(image, ["python", "-c", code], remove=True, user="1000").decode()
    assert expected in out, out
