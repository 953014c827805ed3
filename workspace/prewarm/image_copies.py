"""A course's image loaded into a node's own engine: `docker save | docker load`, streamed engine to engine.

Starts on a swarm refer to an image by ID (spawner/swarm_spawner.py), so a node must hold that very
image before a start lands there: where nodes have no registry to pull from (`make cluster-up`'s),
the image is copied into the engines whose URL the node's `workspace.engine` label gives, as
workspace/setup/cluster.py does at set-up. The archive passes through this process a chunk at a
time (counted: the progress's bytes), never whole in memory or on disk. On a site with a registry the
nodes carry no such label and pull the image themselves (docs/swarm.md).
"""

from __future__ import annotations

from typing import Callable, Iterator

import docker

CHUNK = 1 << 20
TIMEOUT = 600  # seconds one call may wait for its engine (a load of gigabytes takes a while)


class ImageCopyError(RuntimeError):
    """An image could not be loaded into a node; the sentence says why and what to do."""


def image_id(source: docker.APIClient, image: str) -> str:
    """The ID of `image` in the engine starts resolve it in (the swarm's manager)."""
    try:
        return source.inspect_image(image)["Id"]
    except docker.errors.ImageNotFound:
        raise ImageCopyError(
            f"the image {image} is not in the swarm manager's engine: build or pull it there first"
        ) from None


def copy(
    source: docker.APIClient, image: str, wanted: str, engine: str, progress: Callable[[int], None] | None = None
) -> str:
    """Load `image` (ID `wanted`) from `source` into the engine at `engine` unless it holds it: "present"
    (it did) or "copied"; ImageCopyError when the engine does not load it."""
    node = docker.APIClient(base_url=engine, version="auto", timeout=TIMEOUT)
    try:
        if _holds(node, wanted):
            return "present"
        archive = _counted(source.get_image(image, chunk_size=CHUNK), progress)
        for line in node.load_image(archive):
            if isinstance(line, dict) and line.get("error"):
                raise ImageCopyError(f"the engine at {engine} refused {image}: {line['error']}")
        if not _holds(node, wanted):
            raise ImageCopyError(
                f"the engine at {engine} loaded {image} but not its ID {wanted[:19]}: was it rebuilt meanwhile? "
                "pre-warm again"
            )
        return "copied"
    except docker.errors.DockerException as e:
        raise ImageCopyError(f"loading {image} into the engine at {engine} failed: {e}") from e
    finally:
        node.close()


def _holds(client: docker.APIClient, wanted: str) -> bool:
    try:
        client.inspect_image(wanted)
        return True
    except docker.errors.ImageNotFound:
        return False


def _counted(chunks: Iterator[bytes], progress: Callable[[int], None] | None) -> Iterator[bytes]:
    """The archive's chunks as they pass, their total told to `progress`."""
    sent = 0
    for chunk in chunks:
        sent += len(chunk)
        if progress is not None:
            progress(sent)
        yield chunk
