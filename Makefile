# The two commands of the README: `make lab` and `make test`. `make check` = lint + types + tests.
PYTHON ?= python3
PIP = $(PYTHON) -m pip

.PHONY: install install-test lab demo test check lint types unit bench

# An editable install does not copy wheel data files: put the server extension's enabling
# config where a regular `pip install durable-notebook` puts it.
ENABLE_EXT = $(PYTHON) -c "import pathlib, shutil, sys; \
	d = pathlib.Path(sys.prefix, 'etc', 'jupyter', 'jupyter_server_config.d'); \
	d.mkdir(parents=True, exist_ok=True); \
	shutil.copy('jupyter-config/jupyter_server_config.d/kernel_ext.json', d)"

install:
	$(PIP) install -q -e '.[lab]'
	$(ENABLE_EXT)

install-test:
	$(PIP) install -q -e '.[test]'
	$(ENABLE_EXT)

# JupyterLab on 127.0.0.1 with the engine inside (embedded SQLite under the repository).
# (Jupyter refuses to run as root without --allow-root: machines here log in as root.)
lab: install
	$(PYTHON) -m jupyter lab --ip=127.0.0.1 --no-browser $(if $(filter 0,$(shell id -u)),--allow-root,)

# A durable workflow from a plain script, no Jupyter.
demo:
	$(PIP) install -q -e .
	$(PYTHON) -m engine.demo

# The import contract ([tool.importlinter] in pyproject.toml; docs/architecture.md). The
# package has no `python -m` entry point, so its command is called through $(PYTHON).
LINT_IMPORTS = $(PYTHON) -c "import sys; from importlinter.cli import lint_imports_command; \
	sys.exit(lint_imports_command())" --no-cache --no-logo

lint:
	$(PYTHON) -m ruff check engine kernel_ext widgets tests bench
	$(PYTHON) -m ruff format --check engine kernel_ext widgets tests bench
	$(LINT_IMPORTS)

types:
	$(PYTHON) -m mypy

# What the suite runs (TESTS=... for a part of it, e.g. the fresh-clone check in .ci/).
TESTS ?= tests notebooks

# Everything CI runs: install, lint, types, the whole test suite (SQLite and PostgreSQL).
test: install-test lint types
	$(PYTHON) -m pytest -q -p no:cacheprovider --nbval-lax \
		--nbval-sanitize-with notebooks/nbval_sanitize.cfg $(TESTS)

check: test

bench: install-test
	$(PYTHON) bench/run.py
