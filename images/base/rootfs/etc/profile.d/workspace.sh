# Login shells (terminals) get the image's Python and the user's own installs.
# /etc/profile resets PATH, so it is set again here.
PYTHONUSERBASE="${PYTHONUSERBASE:-/openbayes/home/.local}"
export PYTHONUSERBASE
PATH="$PYTHONUSERBASE/bin:/opt/venv/bin:$PATH"
export PATH
export SHELL=/bin/bash
