#!/bin/bash
# The setup of an image that extends another (workspace/setup/images.py): runs inside its root filesystem
# (a chroot of the parent image's system stage) with a clean
# environment: adds /tmp/packages.txt (Debian) and /tmp/requirements.txt (Python) to what is there.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8
packages=$(sed 's/#.*//' /tmp/packages.txt | xargs)
if [ -n "$packages" ]; then
  apt-get update -q
  # shellcheck disable=SC2086
  apt-get install -y --no-install-recommends $packages
  apt-get clean
  rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
fi
/opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check -q -r /tmp/requirements.txt
rm -rf /root/.cache
