# Set-up and everyday commands. `make setup` then `make test` is all a fresh machine needs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Tests and the demo never reach a model hub.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: setup test demo bench lint format clean

setup: $(VENV)/.installed

# Re-run the install only when a pin or the package metadata changed.
$(VENV)/.installed: requirements/base.txt requirements/no-deps.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install -r requirements/base.txt
	$(BIN)/pip install --no-deps -r requirements/no-deps.txt
	$(BIN)/pip install --no-deps --no-build-isolation -e .
	touch $@

test: setup
	$(BIN)/python -m pytest -q

demo: setup
	$(BIN)/nrp ingest nrp/data/demo/manifest.yaml --name demo
	$(BIN)/nrp info demo

bench: setup
	$(BIN)/python scripts/bench_ingest.py
	$(BIN)/python scripts/bench_rankers.py
	$(BIN)/python scripts/bench_nrp.py

lint: setup
	$(BIN)/ruff check nrp tests scripts
	$(BIN)/ruff format --check nrp tests scripts

format: setup
	$(BIN)/ruff format nrp tests scripts
	$(BIN)/ruff check --fix nrp tests scripts

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
