# Two commands on a fresh machine (python3 >= 3.11 with venv, make and a C compiler):
#   make run    set up .venv with what the broker needs and start `folio standalone`
#   make test   set up .venv with everything (dev tools, Spark) and run every check
# and `make cluster` / `make cluster-down`: a cluster on ZooKeeper on loopback.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two stamps: the runtime (`pip install -e '.[cluster]'`: what `folio standalone`
# needs, plus kazoo so that `folio broker|bookie --metadata-url zk://...` and
# `make cluster` work from the same venv) and the full set on top of it (extras
# dev and spark: what `make test` runs).
RUNTIME_STAMP := $(VENV)/.folio-runtime
STAMP := $(VENV)/.folio-installed

# Before any rule: $(PYTHON) must be 3.11+, and a .venv another interpreter made
# (other version, dangling bin/python) is removed so the rules below rebuild it.
# At parse time, so make sees the venv as it is after the check; `make -n` only
# reports. Not for `make clean`, which needs no Python.
ifneq ($(filter-out clean,$(or $(MAKECMDGOALS),default)),)
_DRY_RUN := $(if $(findstring n,$(firstword -$(MAKEFLAGS))),--dry-run)
_PYTHON_CHECK := $(shell $(PYTHON) scripts/check_python.py $(VENV) $(_DRY_RUN) >&2; echo $$?)
ifneq ($(_PYTHON_CHECK),0)
$(error $(PYTHON) cannot set up $(VENV) (see above))
endif
endif

.PHONY: run cluster cluster-down test check-stubs lint typecheck imports pytest stubs bench clean

$(RUNTIME_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[cluster]'
	@touch $(RUNTIME_STAMP)

$(STAMP): $(RUNTIME_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	@touch $(STAMP)

run: $(RUNTIME_STAMP)
	$(BIN)/folio standalone

# A cluster on one machine (docs/cluster.md): ZooKeeper, 3 bookies and 3 brokers on
# loopback under ./folio-cluster/, left running; `make cluster-down` stops them.
# CLUSTER_FLAGS passes options to `scripts/cluster.py up` (e.g. --brokers 1 --zk-port 2182).
CLUSTER_FLAGS ?=
cluster: $(RUNTIME_STAMP)
	$(BIN)/python scripts/cluster.py up $(CLUSTER_FLAGS)

cluster-down:
	$(PYTHON) scripts/cluster.py down

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
