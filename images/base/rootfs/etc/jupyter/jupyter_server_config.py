# Server settings of the workspace base image (read by jupyterhub-singleuser).
import glob
import runpy

c = get_config()  # noqa: F821

# Terminals open bash as a login shell: /etc/profile sets PATH and enables
# completion through /etc/bash.bashrc. Plain `sh` has no completion or history.
c.ServerApp.terminado_settings = {"shell_command": ["/bin/bash", "-l"]}

# Campuses are often air-gapped: nothing in the image may call home.
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
# The extension manager would query a package index; keep it read-only.
c.LabApp.extension_manager = "readonly"

# The workspace extension (workspace/singleuser, copied into the image by the
# builder: activity for the idle culler, usage, notices before a cull) is
# enabled in jupyter_server_config.d/workspace.json, next to the others.
# The file browser shows the datasets mounted at /input0../input4 as read-only folders at the top of the
# home (workspace/singleuser/contents.py), without a link in the home.
c.ServerApp.contents_manager_class = "workspace.singleuser.contents.WorkspaceContentsManager"
# Each venv under ~/envs is a kernel of the launcher by itself (workspace/singleuser/kernels.py).
c.ServerApp.kernel_spec_manager_class = "workspace.singleuser.kernels.WorkspaceKernelSpecManager"

# jupyter-resource-usage shows memory and, with this, CPU in the status bar
# (the workspace plugin adds the GPUs).
c.ResourceUseDisplay.track_cpu_percent = True

# Web tools a workspace runs, opened from the launcher through jupyter-server-proxy, behind this server's
# own authentication (#18). TensorBoard listens on the container's loopback (workspace-tensorboard); the
# proxy strips the /tensorboard/ prefix, and TensorBoard's own links are relative.
c.ServerProxy.servers = {
    "tensorboard": {
        "command": ["workspace-tensorboard", "{port}"],
        "timeout": 60,
        "launcher_entry": {"title": "TensorBoard"},
    },
}
# An image that extends this one adds web tools of its own: each /etc/jupyter/web_tools/*.py defines
# SERVERS, more entries of the proxy (the labelling image's Label Studio, #36).
for _tool in sorted(glob.glob("/etc/jupyter/web_tools/*.py")):
    c.ServerProxy.servers.update(runpy.run_path(_tool)["SERVERS"])
