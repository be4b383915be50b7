# Developer entry points. Everything runs from the project's virtual environment in .venv.
#
#   make venv    create .venv and install the project with its dev extras (re-run when
#                pyproject.toml changes; otherwise a no-op)
#   make test    run the test suite on 2 workers; extra pytest arguments: PYTEST_ARGS='-k adder'
#   make quick   the tests that need no simulator (about a minute)
#   make lint    ruff check (pyflakes, pycodestyle, import order, bugbear, pyupgrade) and ruff format
#                --check (tests, bench, docs; pyproject.toml says why not hw/verif/sim)
#   make docs    the Sphinx manual into build/docs/html (warnings are errors)
#   make soak    the same as test with the long randomized soak tests enabled
#   make demo    run `mxu demo`
#   make clean   remove build products and caches (keeps .venv)

PYTHON ?= python3
VENV := .venv
VENV_PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: venv test quick lint docs soak demo clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(VENV_PY) || $(PYTHON) -m venv $(VENV)
	$(VENV_PY) -m pip install -e '.[dev]'
	touch $@

test: venv
	$(VENV_PY) -m pytest -n 2 tests/ $(PYTEST_ARGS)

quick: venv
	$(VENV_PY) -m pytest -n 2 --quick tests/ $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

docs: venv
	$(VENV_PY) -m sphinx -W --keep-going -q -b html docs build/docs/html

soak: venv
	$(VENV_PY) -m pytest -n 2 --soak tests/ $(PYTEST_ARGS)

demo: venv
	$(VENV)/bin/mxu demo

clean:
	rm -rf build .pytest_cache .hypothesis .ruff_cache *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
