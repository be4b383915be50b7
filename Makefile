# Developer entry points. Everything runs from the project's virtual environment in .venv.
#
#   make venv    create .venv and install the project with its dev extras (re-run when
#                pyproject.toml changes; otherwise a no-op)
#   make test    run the test suite on 2 workers, one test file per worker; extra pytest
#                arguments: PYTEST_ARGS='-k adder'
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
# Two workers, each test file on one of them: a file's tests share simulator builds and the Verilog
# that sim.runner and hw.generate cache per process (the HBM controller, the JEDEC checkers), which
# the default per-test distribution converted again in the other worker or made it wait for a build
# lock. Measured on fresh clones, 2 cores, two runs each: 12:15 and 13:41 instead of 14:00 and 14:11.
XDIST ?= -n 2 --dist loadfile

.PHONY: venv test quick lint docs soak demo clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(VENV_PY) || $(PYTHON) -m venv $(VENV)
	$(VENV_PY) -m pip install -e '.[dev]'
	touch $@

test: venv
	$(VENV_PY) -m pytest $(XDIST) tests/ $(PYTEST_ARGS)

quick: venv
	$(VENV_PY) -m pytest $(XDIST) --quick tests/ $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

docs: venv
	$(VENV_PY) -m sphinx -W --keep-going -q -b html docs build/docs/html

soak: venv
	$(VENV_PY) -m pytest $(XDIST) --soak tests/ $(PYTEST_ARGS)

demo: venv
	$(VENV)/bin/mxu demo

clean:
	rm -rf build .pytest_cache .hypothesis .ruff_cache *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
