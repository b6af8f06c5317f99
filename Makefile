# The two commands of the README: `make lab` and `make test`. `make check` = lint + types + tests.
PYTHON ?= python3
PIP = $(PYTHON) -m pip

.PHONY: install install-test lab demo test check lint types unit bench

install:
	$(PIP) install -q -e .

install-test:
	$(PIP) install -q -e '.[test]'

# Start the product on the embedded SQLite default (a demo run until the Jupyter issue lands).
lab: install
	$(PYTHON) -m engine.demo

demo: lab

lint:
	ruff check engine kernel_ext widgets tests bench
	ruff format --check engine kernel_ext widgets tests bench

types:
	mypy

# Everything CI runs: install, lint, types, the whole test suite (SQLite and PostgreSQL).
test: install-test lint types
	$(PYTHON) -m pytest -q -p no:cacheprovider --nbval-lax \
		--nbval-sanitize-with notebooks/nbval_sanitize.cfg tests notebooks

check: test

bench: install-test
	$(PYTHON) bench/run.py
