# Two commands do all the set-up: `make run` and `make test` (see README).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
DATA_DIR ?= $(or $(IPINTEL_DATA_DIR),data)

.PHONY: run test lint fmt bench geoip clean

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

## test: install the dev dependencies and run the whole suite
test: $(DEV_STAMP)
	$(PY) -m pytest

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

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
