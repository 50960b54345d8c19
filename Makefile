# Quick start: `make run` sets up and tunes the demo suite; `make test` sets up and runs the tests
# (all but the few marked slow, which `make test-slow` runs).
SHELL := /bin/bash
VENV := .venv
# Mesa's Vulkan loader complains on every start without a runtime directory.
export XDG_RUNTIME_DIR ?= /tmp/wgtune-runtime-$(shell id -u)

.PHONY: setup setup-browser run serve test test-slow lint npm bench bench-page bench-kernels checks clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml scripts/setup.sh web/package-lock.json
	@mkdir -p -m 700 $(XDG_RUNTIME_DIR)
	bash scripts/setup.sh
	@touch $@

# What the browser tests need on top: Chromium, and pytest's wheels for the core's tests in Pyodide.
setup-browser: $(VENV)/.installed-browser

$(VENV)/.installed-browser: $(VENV)/.installed e2e/pyodide-requirements.txt
	bash scripts/setup.sh --browser
	@touch $@

# Tune the demo suite natively, then serve the tuner page (Ctrl-C stops it).
run: setup
	@mkdir -p -m 700 $(XDG_RUNTIME_DIR)
	$(VENV)/bin/wgtune tune
	$(VENV)/bin/wgtune serve

serve: setup
	$(VENV)/bin/wgtune serve

# Every test but those marked slow, the native half beside the browser half (scripts/test.sh).
test: setup-browser
	@mkdir -p -m 700 $(XDG_RUNTIME_DIR)
	bash scripts/test.sh

# The tests marked slow (browser tests at scale: minutes each on SwiftShader), one after another:
# some time the page's tasks, which a second suite beside them would stretch. CI runs them too.
test-slow: setup-browser
	@mkdir -p -m 700 $(XDG_RUNTIME_DIR)
	$(VENV)/bin/python -m pytest -m slow

lint: setup
	$(VENV)/bin/ruff check .

# The browser library as an npm package: build/wgtune-VERSION.tgz (npm/, docs/hosting.md).
npm: setup
	$(VENV)/bin/python -m wgtune.cli.npm_package

bench: setup
	@mkdir -p -m 700 $(XDG_RUNTIME_DIR)
	$(VENV)/bin/python bench/hot_path.py

bench-page: setup-browser
	$(VENV)/bin/python bench/page.py

# Each kernel family tuned, winner vs candidate 0 (and torch where it has a GPU); FULL=1 for the H200 sizes.
bench-kernels: setup
	@mkdir -p -m 700 $(XDG_RUNTIME_DIR)
	$(VENV)/bin/python bench/kernels.py $(if $(FULL),--full)

# Every built-in candidate on shapes drawn afresh (seed printed), outputs checked: natively, then in the page.
checks: setup-browser
	@mkdir -p -m 700 $(XDG_RUNTIME_DIR)
	$(VENV)/bin/python bench/fresh_checks.py
	$(VENV)/bin/python bench/page_checks.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
