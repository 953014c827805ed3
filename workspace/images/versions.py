"""What an image reports of itself: a script run by the image's own Python that prints its versions as JSON.

The offline builder (workspace/setup/images.py) labels the site's images with it, and users'
image builds (workspace/images/builds.py) print it at their end; it lives here, with the images,
so the runtime never imports the setup tooling.
"""

VERSIONS = """
import glob, json, platform, importlib.metadata as m
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
# tools with a venv of their own (the labelling image's Label Studio, #36)
for name, site in (("label-studio", "/opt/label-studio/lib"),):
    found = [d.version for d in m.distributions(name=name, path=glob.glob(site + "/python3*/site-packages"))]
    if found:
        out[name] = found[0]
cuda = v("nvidia-cuda-runtime") or v("nvidia-cuda-runtime-cu12") or v("nvidia-cuda-runtime-cu11")
if cuda:
    out["cuda"] = cuda
print(json.dumps(out, separators=(",", ":")))
"""
