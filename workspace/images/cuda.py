"""Whether a node's NVIDIA driver runs an image's CUDA runtime (#32): checked before a GPU start restores
anything, and said on the forms.

An image's CUDA runtime is the `cuda` of its `workspace.versions` label (the version of the
`nvidia-cuda-runtime` wheel its frameworks brought, images/versions.py). A node's driver, and the highest
CUDA it supports, come from NVML on a single host (`nvmlSystemGetDriverVersion`,
`nvmlSystemGetCudaDriverVersion_v2`) and from the labels `workspace.nvidia-driver` and `workspace.cuda` on a
swarm's nodes (docs/admin/resources.md, "GPUs"). A node that says nothing (no GPU, no NVML, no label) is not judged.

The rule is CUDA's minor version compatibility: a runtime of major version M runs on any driver that
supports CUDA M.0 or later (the driver's own CUDA at least M.0), so a CUDA 12.4 image runs where the
driver supports 12.2, and a CUDA 13 image needs a driver of the 580 series. `MIN_DRIVER` says which
driver each major needs, for the sentence the student reads.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from workspace import i18n
from workspace.errors import UserError

# the Linux driver each CUDA major needs at least (NVIDIA's CUDA compatibility table)
MIN_DRIVER = {13: "580.65.06", 12: "525.60.13", 11: "450.80.02"}
CACHE_SECONDS = 300.0  # a driver changes only with an upgrade (and a reboot)


@dataclass(frozen=True)
class Driver:
    """A node's NVIDIA driver: its version ("535.104.05") and the highest CUDA it supports ("12.2")."""

    version: str
    cuda: str


def major_minor(version: str | None) -> tuple[int, int] | None:
    """(12, 4) of "12.4.127" (or "12.4", or "12"); None when it says no version."""
    parts = (version or "").strip().split(".")
    try:
        major = int(parts[0])
        minor = int(parts[1]) if len(parts) > 1 and parts[1] else 0
    except ValueError:
        return None
    return major, minor


def read_driver(nvml=None) -> Driver | None:
    """This machine's driver, from NVML (None: no NVML, no driver)."""
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
    except Exception:
        return None
    try:
        version = nvml.nvmlSystemGetDriverVersion()
        version = version.decode() if isinstance(version, bytes) else str(version)
        code = int(nvml.nvmlSystemGetCudaDriverVersion_v2())  # 12020: CUDA 12.2
        return Driver(version=version, cuda=f"{code // 1000}.{code % 1000 // 10}")
    except Exception:
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass


_cached: tuple[float, Driver | None] | None = None
_lock = threading.Lock()


def local_driver(now=time.monotonic) -> Driver | None:
    """This machine's driver, read from NVML at most every `CACHE_SECONDS` (blocking)."""
    global _cached
    with _lock:
        if _cached is None or now() - _cached[0] > CACHE_SECONDS:
            _cached = (now(), read_driver())
        return _cached[1]


def runs_on(image_cuda: str | None, driver: Driver | None) -> bool:
    """Whether an image of CUDA runtime `image_cuda` runs on `driver` (True where either says nothing)."""
    needed, supported = major_minor(image_cuda), major_minor(driver.cuda if driver else None)
    if needed is None or supported is None:
        return True
    return supported >= (needed[0], 0)


def needs(image_cuda: str) -> str:
    """The driver an image of CUDA runtime `image_cuda` needs: "580.65.06", or "one for CUDA 14"."""
    found = major_minor(image_cuda)
    major = found[0] if found else 0
    return MIN_DRIVER.get(major, f"one for CUDA {major}")


def refusal(image: str, image_cuda: str, node: str, driver: Driver) -> UserError:
    """The student's sentence for a start refused before anything was restored."""
    return UserError(
        409,
        "The image {image} carries CUDA {cuda}, which needs NVIDIA driver {needed} or newer; the GPUs of "
        "{node} have driver {driver} (up to CUDA {supported}). Choose an image with an older CUDA, or a "
        "resource type whose nodes have a newer driver, or ask your administrator to update it.",
        image=image,
        cuda=image_cuda,
        needed=needs(image_cuda),
        node=node,
        driver=driver.version,
        supported=driver.cuda,
    )


def check(image: str, image_cuda: str | None, node: str, driver: Driver | None) -> None:
    """Raise the student's 409 when `node`'s driver cannot run the image's CUDA runtime."""
    if image_cuda and driver is not None and not runs_on(image_cuda, driver):
        raise refusal(image, image_cuda, node, driver)


def too_old(image_cuda: str | None, drivers: list[Driver]) -> str | None:
    """Of the drivers of a type's GPU nodes, whether "all" or "some" cannot run an image of CUDA runtime
    `image_cuda` (None: every one can, or nothing is known): what the forms mark the image with."""
    if not image_cuda or not drivers:
        return None
    failing = [d for d in drivers if not runs_on(image_cuda, d)]
    if not failing:
        return None
    return "all" if len(failing) == len(drivers) else "some"


def drivers_by_type(types, nodes) -> dict[str, list[Driver]]:
    """{GPU type's name: the drivers of the nodes its starts may be placed on} (of the nodes that say
    theirs). `types`: resource types (name, gpus, gpu_model); `nodes`: store.nodes.Node."""
    return {
        t.name: [Driver(n.driver, n.cuda) for n in nodes if n.gpus and n.cuda and n.fits(t.gpu_model)]
        for t in types
        if t.gpus
    }


def form_mark(image_cuda: str | None, drivers: dict[str, list[Driver]], locale: str) -> str | None:
    """What a form adds to an image's label where a GPU type's nodes cannot run its CUDA runtime (None:
    nothing to say): the types it is refused on, and those where only some nodes can run it."""
    judged = {name: too_old(image_cuda, found) for name, found in drivers.items()}
    refused = [name for name, verdict in judged.items() if verdict == "all"]
    some = [name for name, verdict in judged.items() if verdict == "some"]
    if not (refused or some):
        return None
    if refused:  # the stronger word: its starts there are refused
        return i18n.translate(
            locale,
            "not with {types}: CUDA {cuda} needs NVIDIA driver {needed}",
            types=", ".join(f"“{name}”" for name in refused),
            cuda=image_cuda,
            needed=needs(image_cuda),
        )
    return i18n.translate(
        locale,
        "with {types} only on some nodes: CUDA {cuda} needs NVIDIA driver {needed}",
        types=", ".join(f"“{name}”" for name in some),
        cuda=image_cuda,
        needed=needs(image_cuda),
    )
