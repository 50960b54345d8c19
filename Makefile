# Quick start: `make run` sets up and tunes the demo suite; `make test` sets up and runs every test.
SHELL := /bin/bash
VENV := .venv
# Mesa's Vulkan loader complains on every start without a runtime directory.
export XDG_RUNTIME_DIR ?= /tmp/wgtune-runtime-$(shell id -u)

.PHONY: setup run test lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml scripts/setup.sh
	@mkdir -p -m 700 $(XDG_RUNTIME_DIR)
	bash scripts/setup.sh
	@touch $@

run: setup
	@mkdir -p -m 700 $(XDG_RUNTIME_DIR)
	$(VENV)/bin/wgtune tune

test: setup
	@mkdir -p -m 700 $(XDG_RUNTIME_DIR)
	$(VENV)/bin/python -m pytest

lint: setup
	$(VENV)/bin/ruff check .

bench: setup
	@mkdir -p -m 700 $(XDG_RUNTIME_DIR)
	$(VENV)/bin/python bench/hot_path.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
