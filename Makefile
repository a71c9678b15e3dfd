# Set-up and everyday commands. Each target installs what it needs into .venv.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
# torch is pinned to the CPU build that pip finds locally; an unpinned torch pulls a multi-GB CUDA build.
TORCH  ?= torch==2.13.0

# the suite in two processes (pytest-xdist, in the test extra), an idle one taking tests from the other's share:
# much of its time is processes starting, engines and waits, so on 2 cores it takes 2/3 of the one-process time
# (README); WORKERS=0 runs it in one process
WORKERS ?= 2
PYTEST  = $(PY) -m pytest -q -n $(WORKERS) --dist worksteal

.PHONY: install demo test test-fast test-faults fuzz clean

# the core install (what `make demo` needs); the suite's extras on top (every integration's tool: the test extra)
$(VENV)/.core: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "setuptools>=77"  # builds the wheel offline in tests/test_packaging.py
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed: $(VENV)/.core
	$(PY) -m pip install -q -e ".[test]"
	touch $@

install: $(VENV)/.installed

# --force: a rerun replaces the demo's own two files in runs/demo (and nothing else there)
demo: $(VENV)/.core
	$(VENV)/bin/elmo demo --output-dir runs/demo --force

test: install
	$(PYTEST)

# the everyday loop: everything but the long end-to-end runs, the real engines and the oracles (pyproject.toml's
# markers say which is which); `make test` runs them all, as CI does
test-fast: install
	$(PYTEST) -m "not slow and not engine and not oracle"

# the fault suite alone (kills, full disk, bad input and files, numerical faults): docs/reliability.md
test-faults: install
	$(PYTEST) -m faults

# every reader against mutated files, longer than CI's 40 examples per format, new examples each run
# (tests/faults/test_fuzz_readers.py; a failure prints the example and how to reproduce it)
FUZZ_EXAMPLES ?= 2000
fuzz: install
	ELMO_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PYTEST) tests/faults/test_fuzz_readers.py

clean:
	rm -rf $(VENV) build dist *.egg-info src/*.egg-info .pytest_cache
