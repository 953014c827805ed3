"""What each image a user may choose holds: its size and its versions (Python, JupyterLab, numpy, torch,
CUDA ...), read from the engine (the builder labels every image with `workspace.versions`,
workspace/setup/images.py). For the spawn forms and `GET /api/images`: students ask which CUDA an image has.
"""

from __future__ import annotations

import json
import threading
import time

import docker

from workspace import i18n
from workspace.images import cuda

CACHE_SECONDS = 60.0
# what a form's label names, in this order, where the image has it
SHOWN = (
    "python",
    "cuda",
    "torch",
    "torchvision",
    "tensorflow",
    "paddlepaddle",
    "paddlepaddle-gpu",
    "numpy",
    "pandas",
    "scikit-learn",
    "jupyterlab",
)
_cache: dict[str, tuple[float, dict]] = {}
_lock = threading.Lock()


def describe(client, names: list[str], now=time.monotonic) -> list[dict]:
    """[{name, available, size, created, versions}] of `names` (blocking; each cached a minute).
    `client`: a docker APIClient of the engine that runs the workspaces."""
    out = []
    for name in names:
        with _lock:
            hit = _cache.get(name)
        if hit is not None and now() - hit[0] < CACHE_SECONDS:
            out.append(hit[1])
            continue
        try:
            attrs = client.inspect_image(name)
        except docker.errors.NotFound:
            info = {"name": name, "available": False, "size": None, "created": None, "versions": {}}
        else:
            labels = (attrs.get("Config") or {}).get("Labels") or {}
            try:
                versions = json.loads(labels.get("workspace.versions") or "{}")
            except ValueError:
                versions = {}
            info = {
                "name": name,
                "available": True,
                "size": attrs.get("Size"),
                "created": attrs.get("Created"),
                "versions": versions if isinstance(versions, dict) else {},
            }
        with _lock:
            _cache[name] = (now(), info)
        out.append(info)
    return out


def label(info: dict, locale: str = "en") -> str:
    """One line for a form: `workspace-pytorch:latest · 6.1 GB · Python 3.11.2, CUDA 12.4.127, torch 2.5.1`
    (in `locale`: only an image that is not installed has words to translate)."""
    parts = [info["name"]]
    if not info["available"]:
        return i18n.translate(locale, "{image} (not installed on this server)", image=info["name"])
    if info.get("size"):
        parts.append(f"{info['size'] / 1e9:.1f} GB")
    versions = info.get("versions") or {}
    names = {
        "python": "Python",
        "cuda": "CUDA",
        "jupyterlab": "JupyterLab",
        "tensorflow": "TensorFlow",
        "paddlepaddle": "PaddlePaddle",
        "paddlepaddle-gpu": "PaddlePaddle",
    }
    shown = [f"{names.get(k, k)} {versions[k]}" for k in SHOWN if versions.get(k)]
    if shown:
        parts.append(", ".join(shown))
    return " · ".join(parts)


def labels(describe, names: list[str], refs: dict[str, str], locale: str = "en", drivers=None) -> dict[str, str]:
    """{name: label} of the images a form offers; `refs` maps a name to its engine image where they differ
    (a user's image, “alice/nlp”, is `<deployment>-user-7:2` to the engine); `drivers` (cuda.drivers_by_type):
    an image a GPU type's nodes cannot run is marked (blocking)."""
    described = describe([refs.get(n, n) for n in names])
    out = {}
    for name, info in zip(names, described):
        out[name] = label({**info, "name": name}, locale)
        mark = cuda.form_mark((info.get("versions") or {}).get("cuda"), drivers or {}, locale)
        if mark:
            out[name] += f" · {mark}"
    return out
