"""The GPU check of the framework images (#18, #32), for a machine with an NVIDIA GPU, its driver and Docker
with the NVIDIA runtime (not part of `make test`: this project's machines have no GPU).

    .venv/bin/python tests/device/check_gpu.py [--image workspace-pytorch:latest ...] [--device 0]

For each image given (default: every framework image built here), in a container given the GPU by a
device request (as the spawner gives it): the framework sees CUDA, a matmul runs on the GPU for a few
seconds; meanwhile the hub's own NVML reading (workspace/usage.py, what the pages and the culler show) sees
that GPU busy. First, the driver as the hub reads it (workspace/images/cuda.py) and whether it runs each
image's CUDA runtime. Prints one line per check and exits non-zero on failure.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

import docker

from workspace.images import cuda
from workspace.usage import gpu_usage

FRAMEWORKS = ("workspace-pytorch:latest", "workspace-tensorflow:latest", "workspace-paddle:latest")
BUSY = {
    "workspace-pytorch:latest": """
import time, torch
assert torch.cuda.is_available(), "torch does not see CUDA"
x = torch.randn(4096, 4096, device="cuda")
print("cuda", torch.version.cuda, torch.cuda.get_device_name(0), flush=True)
end = time.time() + 15
while time.time() < end:
    y = x @ x
torch.cuda.synchronize()
print("matmul ok", float(y[0, 0]) == float(y[0, 0]), flush=True)
""",
    "workspace-tensorflow:latest": """
import time, tensorflow as tf
gpus = tf.config.list_physical_devices("GPU")
assert gpus, "tensorflow does not see CUDA"
print("cuda", tf.sysconfig.get_build_info().get("cuda_version"), gpus[0].name, flush=True)
with tf.device("/GPU:0"):
    x = tf.random.normal((4096, 4096))
    end = time.time() + 15
    while time.time() < end:
        y = tf.matmul(x, x)
    v = float(y[0, 0])
print("matmul ok", v == v, flush=True)
""",
    "workspace-paddle:latest": """
import time, paddle
assert paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count(), "paddle does not see CUDA"
paddle.set_device("gpu:0")
print("cuda", paddle.version.cuda(), paddle.device.cuda.get_device_name(0), flush=True)
x = paddle.randn([4096, 4096])
end = time.time() + 15
while time.time() < end:
    y = paddle.matmul(x, x)
v = float(y[0, 0])
print("matmul ok", v == v, flush=True)
""",
}


def check(client, image: str, device: str, driver) -> bool:
    labels = client.images.get(image).labels
    image_cuda = json.loads(labels.get("workspace.versions") or "{}").get("cuda")
    runs = cuda.runs_on(image_cuda, driver)
    print(f"{image}: CUDA runtime {image_cuda}; the driver runs it: {runs}")
    seen: list[float] = []

    def watch():
        for _ in range(12):
            time.sleep(1)
            usage = gpu_usage()
            seen.extend(g["utilization_percent"] for g in usage.get("gpus", []) if g.get("utilization_percent"))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        out = client.containers.run(
            image,
            ["python", "-c", BUSY[image]],
            remove=True,
            user="1000",
            device_requests=[docker.types.DeviceRequest(device_ids=[device], capabilities=[["gpu"]])],
        ).decode()
    except docker.errors.ContainerError as e:
        out = (e.stderr or b"").decode(errors="replace")
    watcher.join()
    print(out.strip())
    ok = "matmul ok True" in out
    print(f"{image}: NVML from the host: peak utilization {max(seen, default=0):.0f} %")
    # an image the driver cannot run is expected to fail: the hub refuses its GPU starts before this
    return (ok and max(seen, default=0) > 0) if runs else not ok


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--image", action="append", help="an image to check (default: every framework image here)")
    p.add_argument("--device", default="0")
    args = p.parse_args()
    client = docker.from_env()
    driver = cuda.read_driver()
    print(f"NVML: driver {driver.version if driver else None}, up to CUDA {driver.cuda if driver else None}")
    images = args.image or [i for i in FRAMEWORKS if client.images.list(name=i)]
    results = {image: check(client, image, args.device, driver) for image in images if image in BUSY}
    ok = bool(driver) and bool(results) and all(results.values())
    print("GPU check passed" if ok else f"GPU check FAILED: {results}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
