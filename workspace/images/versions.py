"""What an image reports of itself: a script run by the image's own Python that prints its versions as JSON.

The offline builder (workspace/setup/images.py) labels the site's images with it, and users'
image builds (workspace/images/builds.py) print it at their end; it lives here, with the images,
so the runtime never imports the setup tooling.
"""

VERSIONS = """
import json, platform, importlib.metadata as m
def v(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return None
out = {"python": platform.python_version()}
for name in ("jupyterlab", "numpy", "pandas", "scikit-learn", "matplotlib", "torch", "torchvision", "tensorboard",
             "tensorflow", "paddlepaddle", "paddlepaddle-gpu"):
    if v(name):
        out[name] = v(name)
cuda = v("nvidia-cuda-runtime") or v("nvidia-cuda-runtime-cu12") or v("nvidia-cuda-runtime-cu11")
if cuda:
    out["cuda"] = cuda
print(json.dumps(out, separators=(",", ":")))
"""
