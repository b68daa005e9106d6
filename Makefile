# Set-up and everyday commands. `make demo` and `make test` install requirements.lock into
# .venv first: every package at one version with its hashes, dev tools included, so that a
# fresh clone next year draws the same glyphs and numbers (attnlab/runs/drawn.py). `make lock`
# writes the lock again from pyproject.toml (pip-compile; `make lock LOCK_ARGS=--upgrade`
# moves every package to its newest version): see the README's "Two commands".
# CPU machines pin a CPU build of torch here, outside the package's own dependencies: the
# lock is compiled with TORCH_PIN as a constraint (this machine's pip finds the CPU build on
# its local disk). TORCH_PIN= installs the lock without torch (a GPU machine with its own).
PYTHON ?= python3.11
VENV ?= .venv
TORCH_PIN ?= torch==2.13.0
LOCK := requirements.lock
LOCK_ARGS ?=
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast lint format bench clean lock

$(STAMP): pyproject.toml $(LOCK) Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(if $(TORCH_PIN),cp $(LOCK) $(VENV)/locked.txt,awk '/^torch==/{s=1;next} /^[^ ]/{s=0} !s' $(LOCK) > $(VENV)/locked.txt)
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r $(VENV)/locked.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	@# The clone's root on sys.path too, after the current folder: a folder named attnlab
	@# there (a clone) then no longer hides the package (attnlab/shadowing.py).
	echo "$(CURDIR)" > "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/attnlab_clone.pth"
	$(BIN)/python -m pip check
	touch $(STAMP)

install: $(STAMP)

# The main job on its CPU-sized default: both readers (one seed), evaluated on seen and
# unseen lengths, then the report (report/index.html).
demo: $(STAMP)
	$(BIN)/attnlab sweep lengths seed=0
	$(BIN)/attnlab report
	@echo "To run attnlab commands yourself (README), activate the environment first: . $(BIN)/activate"

# `make test` runs everything, as CI does (.ci/run): ruff, then the whole suite with one
# pytest-xdist worker per usable CPU, a test module's tests on one worker (its module
# fixtures run once; pytest 9's node ids leave xdist's loadgroup inert). `make test-fast`
# leaves out the tests marked slow (trainings, sweeps, the browser, the wheel: pyproject's
# markers, tests/conftest.py's SLOW_FIXTURES). The 10 slowest tests are printed at the end.
PYTEST_ARGS ?= -n auto --dist loadfile --durations=10

# Both build the glyph banks in a fresh cache folder (ATTNLAB_CACHE, unless the caller set
# one), removed afterwards: a machine's old cache can never hide a bank this code draws
# differently (tests/test_lock_pins.py).
FRESH_CACHE = cache="$${ATTNLAB_CACHE:-$$(mktemp -d -t attnlab-cache-XXXXXX)}"; \
	trap '[ -n "$$ATTNLAB_CACHE" ] || rm -rf "$$cache"' EXIT; ATTNLAB_CACHE="$$cache"

# The suite lets Python write attnlab's and the tests' bytecode (__pycache__, ignored by git)
# even where the environment says not to (PYTHONDONTWRITEBYTECODE=1, as this project's
# machines set it): otherwise each of its Python processes (commands, sweep workers, SLURM
# jobs) compiled every attnlab module it imported again (1.4% of the suite's CPU, py-spy).
BYTECODE = PYTHONDONTWRITEBYTECODE=

test: $(STAMP)
	$(BIN)/ruff check attnlab tests scripts hydra_plugins
	$(BIN)/ruff format --check attnlab tests scripts hydra_plugins
	$(FRESH_CACHE) $(BYTECODE) $(BIN)/python -m pytest -q $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(BIN)/ruff check attnlab tests scripts hydra_plugins
	$(BIN)/ruff format --check attnlab tests scripts hydra_plugins
	$(FRESH_CACHE) $(BYTECODE) $(BIN)/python -m pytest -q $(PYTEST_ARGS) -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check attnlab tests scripts hydra_plugins

format: $(STAMP)
	$(BIN)/ruff format attnlab tests scripts hydra_plugins
	$(BIN)/ruff check --fix attnlab tests scripts hydra_plugins

bench: $(STAMP)
	$(BIN)/python scripts/bench.py

# requirements.lock from pyproject.toml's dependencies and its dev extra, for this Python on
# this platform (CPython 3.11, Linux x86_64: CI's machines), with hashes, pip, setuptools and
# the build's own requirements included (--all-build-deps), torch at TORCH_PIN; attnlab
# itself left out (the dev extra names attnlab[export]; it is installed with -e after).
# Existing pins are kept where pyproject still allows them.
lock:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "pip-tools>=7.4"
	echo "$(TORCH_PIN)" > $(VENV)/torch-pin.txt
	@# pip-compile's own traceback (no network, an index that refuses) becomes one line;
	@# it writes the lock whole or not at all, so the old one is left as it was.
	@CUSTOM_COMPILE_COMMAND="make lock" $(BIN)/pip-compile --quiet --generate-hashes \
	  --unsafe-package attnlab --strip-extras --all-build-deps --extra dev \
	  --no-emit-find-links --no-emit-index-url --constraint $(VENV)/torch-pin.txt \
	  $(LOCK_ARGS) --output-file $(LOCK) pyproject.toml 2>$(VENV)/lock-error.txt || { \
	  echo "make lock: pip-compile failed ($$(grep -v '^ ' $(VENV)/lock-error.txt | grep . | tail -1)); $(LOCK) left as it was (full output: $(VENV)/lock-error.txt)" >&2; exit 1; }

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
