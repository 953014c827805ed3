#!/bin/bash
# Runs inside the image's root filesystem (chroot) with a clean environment.
# Arguments: none. Reads /tmp/requirements.txt. Prints what it does.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8

# The user every container runs as. uid/gid 1000 own the bind-mounted home.
groupadd --gid 1000 jovyan
useradd --uid 1000 --gid 1000 --shell /bin/bash --home-dir /openbayes/home --no-create-home jovyan
mkdir -p /openbayes/home && chown 1000:1000 /openbayes/home

# --system-site-packages keeps the user site enabled: `pip install --user`
# lands under $PYTHONUSERBASE (in the persistent home) instead of failing.
python3 -m venv --system-site-packages /opt/venv
/opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check -q --upgrade pip
/opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check -q -r /tmp/requirements.txt
# jsonschema imports rfc3987-syntax whenever it is installed (jupyter-events asks for it), only to check the
# "iri" string format, and that import builds an Earley parser: 1.1 s of CPU in every server's start, half
# of the whole (measured with -X importtime, #30), paid again by each of a class's hundred starts. Nothing
# in a workspace's server validates IRIs; without the package jsonschema skips that one format.
/opt/venv/bin/pip uninstall -y -q rfc3987-syntax

# sshd runs as the workspace's user with the workspace's own host key (#16,
# /usr/local/bin/workspace-start): no build-time host key may ship, and its
# files go to /run/workspace, this user's.
rm -f /etc/ssh/ssh_host_*
mkdir -p /run/workspace && chown 1000:1000 /run/workspace && chmod 700 /run/workspace

sed -i 's/^# *en_US.UTF-8/en_US.UTF-8/' /etc/locale.gen && locale-gen >/dev/null
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /tmp/requirements.txt /root/.cache
