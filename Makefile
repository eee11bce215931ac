# Two commands do all the set-up: `make run` and `make test` (see README).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
DATA_DIR ?= $(or $(IPINTEL_DATA_DIR),data)

.PHONY: run test lint fmt bench geoip clean k8s-validate image fuzz soak

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

$(DEV_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@ $(STAMP)

## run: install, fetch the default GeoIP database when none is configured, serve on 127.0.0.1:8080
run: $(STAMP)
	@if [ -z "$$IPINTEL_GEOIP_CITY_DB" ]; then $(PY) scripts/fetch-geoip "$(DATA_DIR)"; fi
	$(PY) -m ipintel

## geoip: (re)fetch the default GeoIP database into the data directory
geoip: $(STAMP)
	$(PY) scripts/fetch-geoip --force "$(DATA_DIR)"

INSPECTOR_STAMP := $(VENV)/inspector/.installed
INSPECTOR_VERSION := 2.12.0

# The MCP Inspector CLI, for the interoperability test of SPEC 8. It comes from the
# npm registry; without npm (or the registry) that one test is skipped, not failed.
$(INSPECTOR_STAMP): | $(PY)
	@mkdir -p $(VENV)/inspector
	@if command -v npm >/dev/null 2>&1 && (cd $(VENV)/inspector && timeout 90 npm install --silent --no-audit --no-fund \
		@modelcontextprotocol/inspector@$(INSPECTOR_VERSION) >/dev/null 2>&1); then touch $@; \
	else echo "npm or its registry unavailable: the MCP Inspector test will be skipped"; fi

## test: install the dev dependencies and run the whole suite
test: $(DEV_STAMP) $(INSPECTOR_STAMP)
	$(PY) -m pytest

## fuzz: the contract fuzzing of tests/test_fuzz.py, with many more (random) examples per operation
fuzz: $(DEV_STAMP)
	IPINTEL_FUZZ_EXAMPLES=$${IPINTEL_FUZZ_EXAMPLES:-300} IPINTEL_FUZZ_RANDOM=1 $(PY) -m pytest -s tests/test_fuzz.py

## soak: mixed traffic over every route and tool while the fake upstreams fail in turn (SOAK_SECONDS, default 120)
soak: $(DEV_STAMP)
	$(PY) scripts/soak.py

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

fmt: $(DEV_STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

## bench: throughput and latency figures, ratios against a bare handler
bench: $(DEV_STAMP)
	@command -v wrk >/dev/null || { [ "$$(id -u)" = 0 ] && (apt-get install -y -qq wrk >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq wrk >/dev/null 2>&1)) || echo "wrk unavailable: using the slower aiohttp load generator"; }
	$(PY) bench/run.py

## k8s-validate: render k8s/ (kubectl kustomize, else a built-in renderer) and validate it offline against the Kubernetes schemas
k8s-validate: $(DEV_STAMP)
	$(PY) scripts/k8s-validate

## image: build the service image and the resolver sidecar image with docker or podman (IMAGE, RESOLVER_IMAGE, VERSION;
## IMAGE_BUILD_ARGS passes more options, e.g. --build-arg PYTHON_IMAGE=... for a mirrored base image).
## podman builds in docker format: the OCI format has no HEALTHCHECK.
VERSION        ?= $(shell $(PYTHON) -c "import re; print(re.search(r'__version__ = \"(.+)\"', open('ipintel/__init__.py').read()).group(1))")
IMAGE          ?= ipintel:$(VERSION)
RESOLVER_IMAGE ?= ipintel-resolver:$(VERSION)
image:
	@engine=""; \
	for candidate in $${CONTAINER_ENGINE:-docker podman}; do \
	  if command -v $$candidate >/dev/null 2>&1 && $$candidate info >/dev/null 2>&1; then engine=$$candidate; break; fi; \
	done; \
	if [ -z "$$engine" ]; then \
	  echo "make image: no usable container engine: neither docker (with a running daemon) nor podman is available here." >&2; \
	  echo "Install one, or build elsewhere from this directory: docker build -f Containerfile -t $(IMAGE) ." >&2; \
	  exit 1; \
	fi; \
	revision=$$(git rev-parse --short HEAD 2>/dev/null || echo unknown); \
	format=""; if [ "$$engine" = podman ]; then format="--format docker"; fi; \
	echo "building $(IMAGE) and $(RESOLVER_IMAGE) with $$engine"; \
	$$engine build $$format $(IMAGE_BUILD_ARGS) -f Containerfile --build-arg VERSION=$(VERSION) --build-arg REVISION=$$revision -t $(IMAGE) . && \
	$$engine build $$format $(IMAGE_BUILD_ARGS) -f k8s/base/resolver/Containerfile --build-arg VERSION=$(VERSION) -t $(RESOLVER_IMAGE) .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
