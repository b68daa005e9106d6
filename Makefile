# Set-up and everyday commands. `make demo` and `make test` install what they need into
# .venv first. CPU machines pin a CPU build of torch here, outside the package's own
# dependencies (TORCH_PIN= to skip the pin, e.g. on a GPU machine with its own torch).
PYTHON ?= python3.11
VENV ?= .venv
TORCH_PIN ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast lint format bench clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(if $(TORCH_PIN),$(BIN)/python -m pip install --quiet "$(TORCH_PIN)")
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# The main job on its CPU-sized default: both readers (one seed), evaluated on seen and
# unseen lengths, then the report (report/index.html).
demo: $(STAMP)
	$(BIN)/attnlab sweep lengths seed=0
	$(BIN)/attnlab report

# `make test` runs everything, as CI does (.ci/run): ruff, then the whole suite with one
# pytest-xdist worker per usable CPU, a test module's tests on one worker (its module
# fixtures run once; pytest 9's node ids leave xdist's loadgroup inert). `make test-fast`
# leaves out the tests marked slow (trainings, sweeps, the browser, the wheel: pyproject's
# markers, tests/conftest.py's SLOW_FIXTURES). The 10 slowest tests are printed at the end.
PYTEST_ARGS ?= -n auto --dist loadfile --durations=10

test: $(STAMP)
	$(BIN)/ruff check attnlab tests scripts hydra_plugins
	$(BIN)/ruff format --check attnlab tests scripts hydra_plugins
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(BIN)/ruff check attnlab tests scripts hydra_plugins
	$(BIN)/ruff format --check attnlab tests scripts hydra_plugins
	$(BIN)/python -m pytest -q $(PYTEST_ARGS) -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check attnlab tests scripts hydra_plugins

format: $(STAMP)
	$(BIN)/ruff format attnlab tests scripts hydra_plugins
	$(BIN)/ruff check --fix attnlab tests scripts hydra_plugins

bench: $(STAMP)
	$(BIN)/python scripts/bench.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
