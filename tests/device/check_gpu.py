"""The GPU check of the pytorch image (#18), for a machine with an NVIDIA GPU, its driver and Docker with the
NVIDIA runtime (not part of `make test`: this project's machines have no GPU).

    .venv/bin/python tests/device/check_gpu.py [--image workspace-pytorch:latest] [--device 0]

In a container of the image given the GPU by a device request (as the spawner gives it): torch sees CUDA,
a matmul runs on the GPU for a few seconds; meanwhile the hub's own NVML reading (workspace/usage.py, what
the pages and the culler show) sees that GPU busy. Prints one line per check and exits non-zero on failure.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

import docker

from workspace.usage import gpu_usage

BUSY = """
import time, torch
assert torch.cuda.is_available(), "torch does not see CUDA"
x = torch.randn(4096, 4096, device="cuda")
print("cuda", torch.version.cuda, torch.cuda.get_device_name(0), flush=True)
end = time.time() + 15
while time.time() < end:
    y = x @ x
torch.cuda.synchronize()
print("matmul ok", float(y[0, 0]) == float(y[0, 0]), flush=True)
"""


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--image", default="workspace-pytorch:latest")
    p.add_argument("--device", default="0")
    args = p.parse_args()
    client = docker.from_env()
    seen: list[float] = []

    def watch():
        for _ in range(12):
            time.sleep(1)
            usage = gpu_usage()
            seen.extend(g["utilization_percent"] for g in usage.get("gpus", []) if g.get("utilization_percent"))

    watcher = threading.Thread(target=watch)
    watcher.start()
    out = client.containers.run(
        args.image,
        ["python", "-c", BUSY],
        remove=True,
        user="1000",
        device_requests=[docker.types.DeviceRequest(device_ids=[args.device], capabilities=[["gpu"]])],
    ).decode()
    watcher.join()
    print(out.strip())
    ok = "matmul ok True" in out
    print(f"NVML from the host: peak utilization {max(seen, default=0):.0f} %")
    ok = ok and max(seen, default=0) > 0
    print("GPU check passed" if ok else "GPU check FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
