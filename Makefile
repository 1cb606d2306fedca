# Two commands for a newcomer: `make run` and `make test`. Everything else is optional.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
HOST ?= 127.0.0.1
PORT ?= 8080
DB ?= .kb/local.db
SAM_VENV := .venv-sam
SAM_STAMP := $(SAM_VENV)/.installed

.PHONY: run test lint typecheck unit venv opensearch clean sam-validate sam-build

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

## Serve examples/bucket over the HTTP API on localhost, with the embedded store.
run: $(STAMP)
	@mkdir -p $(dir $(DB))
	@echo "Serving examples/bucket on http://$(HOST):$(PORT) (Ctrl-C to stop). Try:"
	@echo "  curl -s http://$(HOST):$(PORT)/v1/health"
	@echo "  curl -s -X POST http://$(HOST):$(PORT)/v1/agents/ops-bot/contexts/runbooks/search -H 'content-type: application/json' -d '{\"query\": \"how do I roll back a release\", \"max_results\": 3}'"
	@echo "  curl -s -X POST http://$(HOST):$(PORT)/v1/agents/ops-bot/search -H 'content-type: application/json' -d '{\"query\": \"배포실패\", \"mode\": \"keyword\"}'"
	@echo "  curl -s -X POST http://$(HOST):$(PORT)/v1/agents/support-bot/contexts/faq/search -H 'content-type: application/json' -d '{\"query\": \"refund\", \"metadata\": {\"team\": \"payments\"}}'"
	@echo "  curl -s http://$(HOST):$(PORT)/v1/agents/ops-bot/contexts/runbooks/status"
	$(BIN)/kb serve examples/bucket --host $(HOST) --port $(PORT) --db $(DB)

## Everything: lint, types, unit, contract and integration tests (starts its own OpenSearch node).
test: $(STAMP) $(SAM_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit tests/contract -m "not opensearch"

## A real single-node OpenSearch on 127.0.0.1:9200 for local use (needs Java 17 and Maven).
opensearch:
	tools/opensearch-local/run.sh --port 9200

clean:
	rm -rf $(VENV) $(SAM_VENV) .kb .pytest_cache .mypy_cache .ruff_cache .aws-sam

## --- AWS SAM (template.yaml) ------------------------------------------------------------
# The SAM CLI lives in its own venv: its pinned dependencies conflict with ours. `make test`
# runs `sam validate --lint` and `sam build` through tests/integration/test_sam.py.
$(SAM_STAMP): tools/sam-cli/requirements.txt
	$(PYTHON) tests/integration/sam_cli.py install

## Lint the SAM template (no AWS account needed).
sam-validate: $(SAM_STAMP)
	$(PYTHON) tests/integration/sam_cli.py validate

## Build the layer and functions into .aws-sam/build (needs python3.12: pyenv or PATH).
sam-build: $(SAM_STAMP)
	$(PYTHON) tests/integration/sam_cli.py build

## --- Benchmarks (bench/; results in bench/results, report in bench/REPORT.md) -----------
# Their own venv (.venv-bench: torch, sentence-transformers, matplotlib) and the man pages
# come from bench/setup.sh. Each target starts its own OpenSearch node when it needs one.
BENCH_PY := .venv-bench/bin/python

.PHONY: bench bench-setup bench-quality bench-questions bench-indexing bench-latency bench-coldstart bench-memory bench-report

bench-setup:
	bash bench/setup.sh

## Every benchmark, then bench/REPORT.md (about half an hour on 2 cores, once the caches are warm).
bench: bench-quality bench-questions bench-indexing bench-latency bench-coldstart bench-memory bench-report

bench-quality: bench-setup
	$(BENCH_PY) -m bench quality --limit 300 --embedder hashing
	$(BENCH_PY) -m bench quality --limit 300 --embedder minilm
	$(BENCH_PY) -m bench quality --limit 0 --embedder hashing

## Questions in English and Korean from Debian's FAQ packages (bench/faq.py), with baselines.
bench-questions: bench-setup
	$(BENCH_PY) -m bench quality --corpus faq-en --embedder hashing
	$(BENCH_PY) -m bench quality --corpus faq-en --embedder minilm
	$(BENCH_PY) -m bench quality --corpus faq-ko --embedder hashing
	$(BENCH_PY) -m bench quality --corpus faq-ko --embedder minilm

bench-indexing: bench-setup
	$(BENCH_PY) -m bench indexing --limit 0 --repeat 3

bench-latency: bench-setup
	$(BENCH_PY) -m bench latency --limit 0 --iterations 600 --warmup 100

bench-coldstart: bench-setup
	$(BENCH_PY) -m bench coldstart --runs 20 --warmup 2

bench-memory: bench-setup
	$(BENCH_PY) -m bench memory --sizes 5,12.5,25,50 --files 100

bench-report: bench-setup
	$(BENCH_PY) -m bench report
