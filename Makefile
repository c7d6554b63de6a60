# hpc-cluster. `make plan STACK=dev` shows what the program would build; `make test` proves it.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STACK ?= dev
BASE ?= origin/main
UP_FLAGS ?=
PULUMI_BACKEND_URL ?= file://$(CURDIR)/.pulumi-state

.PHONY: venv plan plan-all plan-diff test lint unit integration engine-test bench engine preview up clean

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

plan: venv
	$(PY) -m stacks.plan --stack $(STACK)

plan-all: venv
	$(PY) -m stacks.plan --stack dev --quiet
	$(PY) -m stacks.plan --stack prod --quiet

plan-diff: venv
	$(PY) -m stacks.plan_diff --base $(BASE) --stack $(STACK) --out build/plan-diff-$(STACK).md

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test: lint
	$(VENV)/bin/pytest

unit: venv
	$(VENV)/bin/pytest -m "not integration and not engine"

engine-test: venv engine
	$(VENV)/bin/pytest -m engine

integration: venv
	$(VENV)/bin/pytest -m integration

bench: venv
	$(PY) -m benchmarks.run

engine:
	bash tools/engine/build.sh

# preview/up use a pulumi already on PATH; else the one `make engine` built (.engine/bin, with
# PULUMI_HOME=.engine/home): no plugin download, no update check. .venv/bin first for the policy pack.
ENGINE_ENV = PATH="$(CURDIR)/$(VENV)/bin:$$PATH:$(CURDIR)/.engine/bin" \
	PULUMI_BACKEND_URL=$(PULUMI_BACKEND_URL) PULUMI_SKIP_UPDATE_CHECK=true \
	$$(command -v pulumi >/dev/null || echo PULUMI_HOME=$(CURDIR)/.engine/home \
	  PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true PULUMI_IGNORE_AMBIENT_PLUGINS=true)

define need_pulumi
	@command -v pulumi >/dev/null || [ -x .engine/bin/pulumi ] || { \
	  echo "No Pulumi CLI: run 'make engine' (builds it from Go modules) or install one;" >&2; \
	  echo "'make plan STACK=$(STACK)' shows the offline plan." >&2; exit 1; }
	@mkdir -p $(patsubst file://%,%,$(PULUMI_BACKEND_URL))
endef

preview: venv
	$(need_pulumi)
	$(PY) -m stacks.plan --stack $(STACK) --quiet
	env $(ENGINE_ENV) pulumi preview --stack $(STACK) --diff --policy-pack policy \
	  --policy-pack-config build/$(STACK)/policy-config.json

up: venv
	$(need_pulumi)
	$(PY) -m stacks.plan --stack $(STACK) --quiet
	env $(ENGINE_ENV) pulumi up --stack $(STACK) --policy-pack policy \
	  --policy-pack-config build/$(STACK)/policy-config.json $(UP_FLAGS)

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache
