# Two commands on a fresh machine (python3, make and a C compiler):
#   make run    set up .venv and start `folio standalone`
#   make test   set up .venv and run every check
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.folio-installed

.PHONY: run test check-stubs lint typecheck imports pytest stubs bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/folio standalone

test: $(STAMP) check-stubs lint typecheck imports pytest

check-stubs: $(STAMP)
	$(BIN)/python scripts/gen_protos.py --check

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

# pytest exits 5 when it collected no test: that is a failure here.
pytest: $(STAMP)
	@command -v prometheus >/dev/null || echo "make test: prometheus is not on PATH:" \
		"the real-Prometheus test (tests/observability/test_prometheus.py) is skipped;" \
		"apt-get install prometheus (.ci/run does)" >&2
	@command -v promtool >/dev/null || echo "make test: promtool is not on PATH:" \
		"deploy/prometheus is not checked (Debian package prometheus)" >&2
	@$(BIN)/python -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest ran no tests" >&2; exit 1; fi; exit $$rc

stubs: $(STAMP)
	$(BIN)/python scripts/gen_protos.py

bench: $(STAMP)
	$(BIN)/python -m bench.ledger_bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
