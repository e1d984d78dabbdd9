# Two commands do everything on a fresh machine (see README.md):
#   make run    venv + install + the whole chain offline on the bundled sample
#   make test   venv + install + the test suite
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export DAGSTER_HOME := $(CURDIR)/.eval_state/dagster_home
export DEEPEVAL_TELEMETRY_OPT_OUT := 1
export DEEPEVAL_DISABLE_DOTENV := 1

.PHONY: install run test lint format bench clean

$(STAMP): pyproject.toml scripts/install-system-deps.sh
	bash scripts/install-system-deps.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/eval-pipeline run

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check eval_pipeline eval_pipeline_tests benchmarks
	$(BIN)/ruff format --check eval_pipeline eval_pipeline_tests benchmarks

format: $(STAMP)
	$(BIN)/ruff format eval_pipeline eval_pipeline_tests benchmarks
	$(BIN)/ruff check --fix eval_pipeline eval_pipeline_tests benchmarks

# Each benchmark prints its own ratios measured side by side in one run; the full-scale
# inputs are generated once and cached under .eval_state/bench/.
bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench_corpus
	$(BIN)/python -m benchmarks.bench_inject
	$(BIN)/python -m benchmarks.bench_reconcile
	$(BIN)/python -m benchmarks.bench_retrieval
	$(BIN)/python -m benchmarks.bench_llm_layer

clean:
	rm -rf $(VENV) .eval_state
