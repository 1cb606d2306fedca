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
# pytest worker processes for `make test` (pytest-xdist). Each worker starts its own
# OpenSearch node (1 GB heap); test files stay whole on one worker (--dist loadfile).
TEST_WORKERS ?= 2

.PHONY: run test lint typecheck unit venv opensearch clean sam-validate sam-build layer-lock checkov browser sshd console-screenshots

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
	@echo "  curl -s 'http://$(HOST):$(PORT)/v1/agents/ops-bot/contexts/runbooks/documents?limit=5'"
	$(BIN)/kb serve examples/bucket --host $(HOST) --port $(PORT) --db $(DB)

## Everything: lint, types, unit, contract and integration tests (starts its own OpenSearch node).
test: $(STAMP) $(SAM_STAMP) browser sshd
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

## Debian's Chromium and ChromeDriver for the playground's browser test (no-op once present).
browser:
	bash tools/browser/install.sh

## The console's pages (docs/local.md, "The console") as pictures in docs/images/console-*.png,
## taken by its browser test against a real kb serve (about 30 s; not part of `make test`).
console-screenshots: $(STAMP) browser
	KB_CONSOLE_SCREENSHOTS=docs/images $(BIN)/python -m pytest -q tests/integration/local/test_console_browser.py

## Debian's OpenSSH server for the SSH repository-source test (no-op once present).
sshd:
	bash tools/sshd/install.sh

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit tests/contract -m "not opensearch"

## A real single-node OpenSearch on 127.0.0.1:9200 for local use (needs Java 17 and Maven).
opensearch:
	tools/opensearch-local/run.sh --port 9200

clean:
	rm -rf $(VENV) $(SAM_VENV) .venv-checkov .kb .pytest_cache .mypy_cache .ruff_cache .aws-sam

## --- AWS SAM (template.yaml) ------------------------------------------------------------
# The SAM CLI lives in its own venv: its pinned dependencies conflict with ours. `make test`
# runs `sam validate --lint` and `sam build` through tests/integration/aws/test_sam.py.
$(SAM_STAMP): tools/sam-cli/requirements.txt
	$(PYTHON) tests/support/sam_cli.py install

## Lint the SAM template (no AWS account needed).
sam-validate: $(SAM_STAMP)
	$(PYTHON) tests/support/sam_cli.py validate

## Build the layer and functions into .aws-sam/build (needs python3.12: pyenv or PATH).
sam-build: $(SAM_STAMP)
	$(PYTHON) tests/support/sam_cli.py build

## Re-resolve the layers' whole dependency trees (layers/knowledge/requirements.in, and
## requirements-repos.in and requirements-mcp.in held to the first's versions) for the Lambda
## runtime (CPython 3.12, arm64) into requirements.txt, requirements-repos.txt and
## requirements-mcp.txt, pinned with hashes.
LAYER_LOCK_FLAGS := --python-version 3.12 --python-platform aarch64-manylinux_2_28 \
	--generate-hashes --emit-index-url --custom-compile-command "make layer-lock"
layer-lock: $(STAMP)
	$(BIN)/uv pip compile $(LAYER_LOCK_FLAGS) --quiet \
		--output-file layers/knowledge/requirements.txt layers/knowledge/requirements.in
	$(BIN)/uv pip compile $(LAYER_LOCK_FLAGS) --quiet \
		--output-file layers/knowledge/requirements-repos.txt layers/knowledge/requirements-repos.in
	$(BIN)/uv pip compile $(LAYER_LOCK_FLAGS) --quiet \
		--output-file layers/knowledge/requirements-mcp.txt layers/knowledge/requirements-mcp.in

## Security scan of template.yaml (checkov in .venv-checkov; the accepted findings are
## listed in tools/checkov/config.yaml and justified in docs/deploy.md section 12).
checkov:
	@test -x .venv-checkov/bin/checkov || { $(PYTHON) -m venv .venv-checkov && \
		.venv-checkov/bin/pip install --quiet -r tools/checkov/requirements.txt; }
	.venv-checkov/bin/checkov -f template.yaml --config-file tools/checkov/config.yaml --quiet

## --- Benchmarks (bench/; results in bench/results, report in bench/REPORT.md) -----------
# Their own venv (.venv-bench: torch, sentence-transformers, matplotlib) and the man pages
# come from bench/setup.sh. Each target starts its own OpenSearch node when it needs one.
BENCH_PY := .venv-bench/bin/python

## Mutation testing of the core modules (mutmut; not part of `make test`; 40+ minutes on 2 cores).
## Figures in bench/results/mutation.json and bench/REPORT.md.
.PHONY: mutation
mutation:
	bash tools/mutation/run.sh

.PHONY: bench bench-setup bench-quality bench-questions bench-indexing bench-latency bench-coldstart bench-memory bench-report bench-store-threads bench-concurrency bench-documents bench-embedding-pool

bench-setup:
	bash bench/setup.sh

## Every benchmark, then bench/REPORT.md (about half an hour on 2 cores, once the caches are warm).
bench: bench-quality bench-questions bench-indexing bench-latency bench-coldstart bench-memory bench-store-threads bench-concurrency bench-documents bench-embedding-pool bench-report

bench-quality: bench-setup
	$(BENCH_PY) -m bench quality --limit 300 --embedder hashing
	$(BENCH_PY) -m bench quality --limit 300 --embedder minilm
	$(BENCH_PY) -m bench quality --limit 0 --embedder hashing

## Questions in English and Korean from Debian's FAQ packages (bench/corpora/faq.py), with baselines.
bench-questions: bench-setup
	$(BENCH_PY) -m bench quality --corpus faq-en --embedder hashing
	$(BENCH_PY) -m bench quality --corpus faq-en --embedder minilm
	$(BENCH_PY) -m bench quality --corpus faq-ko --embedder hashing
	$(BENCH_PY) -m bench quality --corpus faq-ko --embedder minilm

bench-indexing: bench-setup
	$(BENCH_PY) -m bench indexing --limit 0 --repeat 3

bench-latency: bench-setup
	$(BENCH_PY) -m bench latency --limit 0 --iterations 600 --warmup 100

bench-coldstart: $(STAMP)
	nice -n 10 $(BIN)/python -m bench coldstart --runs 15 --warmup 1

bench-memory: bench-setup
	$(BENCH_PY) -m bench memory --sizes 5,12.5,25,50 --files 100

## Embedded store searches from 1 and 16 threads (vector search must not fight over BLAS threads).
bench-store-threads: bench-setup
	nice -n 10 $(BENCH_PY) -m bench store_threads --chunks 20000 --seconds 8

## kb serve under 1, 16 and 64 concurrent clients (keyword/vector/hybrid mix); needs only .venv.
bench-concurrency: $(STAMP)
	nice -n 10 $(BIN)/python -m bench concurrency --documents 1000 --duration 10

## Real documents: format parity (PDF/DOCX/HTML vs Markdown), PDF fidelity and throughput.
## BENCH_PRODUCT=<checkout>/layers/knowledge measures that checkout's `knowledge` package
## instead (a branch not merged yet); each result records which package it measured.
bench-documents: export PYTHONPATH := $(if $(BENCH_PRODUCT),$(BENCH_PRODUCT),$(PYTHONPATH))
bench-documents: bench-setup
	nice -n 10 $(BENCH_PY) -m bench formats --limit 300 --embedder hashing
	nice -n 10 $(BENCH_PY) -m bench formats --limit 100 --embedder minilm --pdf-libraries ''
	nice -n 10 $(BENCH_PY) -m bench pdf-fidelity
	nice -n 10 $(BENCH_PY) -m bench pdf-throughput --repeat 3 --pdf-pages 1000 --xlsx-rows 100000

## Concurrent embedding vs sequential: Titan-like and OpenAI-like profiles of a fake
## embedder on loopback, and a 429 rate limit (about 5 minutes); needs .venv and the man pages.
bench-embedding-pool: $(STAMP)
	nice -n 10 $(BIN)/python -m bench embedding-pool

bench-report: bench-setup
	$(BENCH_PY) -m bench report
