# workspace: the two commands are `make up` and `make test` (see README.md).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# parallel test workers (pytest-xdist); 0 runs the suite in this process
TEST_WORKERS ?= 3

.PHONY: up upgrade down images test unit venv bench lint format cluster-up cluster-down messages docs translations

# The venv is (re)built when the package definition changes.
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "error: Python 3.11 or newer is needed as $(PYTHON); set PYTHON=/path/to/python3.11")'
	@echo "[venv] creating $(VENV) and installing the package (log: $(VENV).log)"
	@$(PYTHON) -m venv $(VENV) > $(VENV).log 2>&1 || { echo "error: creating the virtual environment failed; read $(VENV).log"; exit 1; }
	@$(VENV)/bin/pip install -e '.[test]' >> $(VENV).log 2>&1 || { echo "error: installing the Python packages failed (is PyPI reachable?); read $(VENV).log"; exit 1; }
	@touch $@

venv: $(STAMP)

## make up: set everything up and run the hub on http://127.0.0.1:8000
up: $(STAMP)
	@$(PY) -m workspace.setup.manual build --no-check \
	  || echo "warning: the manual (Help) was not built: the hub runs without it; \`make docs\` says why"
	@$(PY) -m workspace.setup.deploy up

## make upgrade: after `git pull`, the deployment onto the new release in place, its running workspaces
## kept running (BACKUP=/backups/workspace backs up first; docs/upgrade.md)
upgrade: $(STAMP)
	@$(PY) -m workspace.setup.upgrade $(if $(BACKUP),--backup $(BACKUP))

## make down: stop the hub and its containers; all data is kept
down: $(STAMP)
	@$(PY) -m workspace.setup.deploy down

## make images: build the single-user images whose definition changed
images: $(STAMP)
	@$(PY) -m workspace.setup.deploy images

## make cluster-up: a Docker Swarm of NODES (default 3) namespaced engines on this machine (root);
## GPUS="node2=0,1 node3=0,1,2,3" labels nodes with GPU IDs (workspace/setup/cluster.py);
## USERNS="node4" runs those nodes' containers in a user namespace, for root-allowed types (workspace/setup/userns.py)
NODES ?= 3
GPUS  ?=
USERNS ?=
cluster-up: $(STAMP)
	@$(PY) -m workspace.setup.deploy images
	@$(PY) -m workspace.setup.cluster up --nodes $(NODES) $(foreach g,$(GPUS),--gpus $(g)) $(foreach u,$(USERNS),--userns $(u))

## make cluster-down: stop the cluster's engines, remove its network and mounts (its data stays; PURGE=1 deletes it)
cluster-down: $(STAMP)
	@$(PY) -m workspace.setup.cluster down $(if $(PURGE),--purge)

## make test: set up (engine, proxy, images) and run the whole suite
test: $(STAMP) lint docs
	@$(PY) -m workspace.setup.deploy prepare
	$(PY) -m pytest $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile) $(PYTEST_ARGS)
	@$(PY) -m workspace.setup.manual build --no-check  # again, with the pictures the browser tests took

## make lint: ruff's linter and formatter check, then the walls between the subsystems (import-linter's
## contracts; both configured in pyproject.toml, the walls drawn in docs/architecture.md); `make format` fixes ruff's
lint: $(STAMP)
	@$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . > /dev/null \
	  || { echo "error: ruff found the above; run \`make format\` (and fix what it cannot), then try again"; exit 1; }
	@$(VENV)/bin/lint-imports --no-cache --no-logo \
	  || { echo "error: an import crosses a wall between subsystems (above); docs/architecture.md says which layer owns what"; exit 1; }

## make docs: the manual (docs/, Sphinx and MyST) into docs/_build/html/<language>/, served at
## /services/workspace/docs/; a warning (a broken link between pages, a missing section) fails it, and so
## does a guide's sentence with no Chinese (make translations, then fill in docs/locales/zh_CN/)
docs: $(STAMP)
	@$(PY) -m workspace.setup.manual build

translations: $(STAMP)
	@$(PY) -m workspace.setup.manual translations

format: $(STAMP)
	@$(VENV)/bin/ruff check --fix . ; $(VENV)/bin/ruff format .

## make bench: set up, run every benchmark, print each one's last line (its ratio against its baseline)
BENCHMARKS := homes datasets culler replication backup starts burst ssh download
bench: $(STAMP)
	@$(PY) -m workspace.setup.deploy prepare
	@mkdir -p data/logs
	@for b in $(BENCHMARKS); do \
	  echo "[bench] benchmarks/$$b.py (log: data/logs/bench-$$b.log)"; \
	  $(PY) benchmarks/$$b.py > data/logs/bench-$$b.log 2>&1 || { echo "error: benchmarks/$$b.py failed; read data/logs/bench-$$b.log"; exit 1; }; \
	  tail -n 1 data/logs/bench-$$b.log; \
	done

## make messages: extract the messages (Babel) into workspace/locale/workspace.pot and add new ones to each
## language's .po for a translator (workspace/i18n.py)
messages: $(STAMP)
	@$(PY) -m workspace.setup.messages

## make unit: only the tests that need no Docker engine
unit: $(STAMP)
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)
