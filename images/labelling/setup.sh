#!/bin/bash
# The labelling image's setup (#36): runs inside its root filesystem (a chroot of the base image's system
# stage) with a clean environment. Label Studio goes into a venv of its own, /opt/label-studio: its pins
# (Django 5.2, numpy<3, pyarrow 24, pytz<2023, setuptools>=83) stay out of the users' /opt/venv. The server
# proxy in /opt/venv starts it by its absolute path (/etc/jupyter/web_tools/label_studio.py).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8
# Its whole dependency set is frozen in requirements-label-studio.txt (copied to /tmp by the builder).
python3 -m venv /opt/label-studio
/opt/label-studio/bin/pip install --no-cache-dir --disable-pip-version-check -q --upgrade pip
/opt/label-studio/bin/pip install --no-cache-dir --disable-pip-version-check -q -r /tmp/requirements-label-studio.txt
/opt/label-studio/bin/label-studio version >/dev/null
# An empty database with every migration applied, which a new home starts from (workspace-label-studio):
# making it takes half a minute of CPU, which each student's first opening would pay otherwise. It holds
# the schema alone: no user, no key (Label Studio makes its secret key in each home on its first start).
mkdir -p /opt/label-studio/template
env LABEL_STUDIO_BASE_DATA_DIR=/tmp/label-studio-template LABEL_STUDIO_SENTRY_DSN= LABEL_STUDIO_CI=false \
  LABEL_STUDIO_COLLECT_ANALYTICS=false LABEL_STUDIO_LATEST_VERSION_CHECK=false DJANGO_SETTINGS_MODULE=core.settings.label_studio \
  /opt/label-studio/bin/python /opt/label-studio/lib/python3.11/site-packages/label_studio/manage.py migrate -v0
cp /tmp/label-studio-template/label_studio.sqlite3 /opt/label-studio/template/
rm -rf /tmp/label-studio-template
du -sh /opt/label-studio
rm -rf /root/.cache
