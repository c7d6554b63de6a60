# hpc-cluster. `make plan STACK=dev` shows what the program would build; `make test` proves it.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STACK ?= dev
BASE ?= origin/main
PULUMI_BACKEND_URL ?= file://$(CURDIR)/.pulumi-state

.PHONY: venv plan plan-all plan-diff test lint unit integration bench preview up clean

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
	$(VENV)/bin/pytest -m "not integration"

integration: venv
	$(VENV)/bin/pytest -m integration

bench: venv
	$(PY) -m benchmarks.run

define need_pulumi
	@command -v pulumi >/dev/null || { \
	  echo "The Pulumi CLI is not installed. Install it (https://www.pulumi.com/docs/install/)," >&2; \
	  echo "or run 'make plan STACK=$(STACK)' for the offline plan." >&2; exit 1; }
endef

preview: venv
	$(need_pulumi)
	PULUMI_BACKEND_URL=$(PULUMI_BACKEND_URL) pulumi preview --stack $(STACK) --diff

up: venv
	$(need_pulumi)
	PULUMI_BACKEND_URL=$(PULUMI_BACKEND_URL) pulumi up --stack $(STACK)

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache
