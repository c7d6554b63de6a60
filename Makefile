# hpc-cluster. `make plan STACK=dev` shows what the program would build; `make test` proves it.
# `make help` lists every target (the `## ` comments below).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STACK ?= dev
BASE ?= origin/main
UP_FLAGS ?=
# The operator's backend wins (the environment); else local state outside the checkout (a CI
# checkout is wiped on every run): one state for every checkout of this user.
PULUMI_BACKEND_URL ?= file://$(HOME)/.local/state/hpc-cluster/pulumi

.PHONY: help venv plan plan-all plan-diff test lint unit integration engine-test k8s-test vm-test bench engine k8s-api images preview up secret clean

help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 14

venv: $(VENV)/.installed ## Create .venv with the pinned requirements (about a minute the first time)

$(VENV)/.installed: requirements.txt
	@echo "Creating $(VENV) from requirements.txt (pip prints a line per package; about a minute) ..."
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check --progress-bar off -r requirements.txt
	touch $@

plan: venv ## Offline plan of STACK (default dev): per machine, STATEFUL, files in build/STACK
	$(PY) -m offline.plan --stack $(STACK)

plan-all: venv ## Offline plan of every stack
	$(PY) -m offline.plan --stack dev --quiet
	$(PY) -m offline.plan --stack prod --quiet

plan-diff: venv ## Plan diff of STACK against BASE (default origin/main): build/plan-diff-STACK.md
	$(PY) -m offline.plan_diff --base $(BASE) --stack $(STACK) --out build/plan-diff-$(STACK).md

lint: venv ## ruff and mypy
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test: lint ## Lint, then every test, in two lanes side by side (real daemons: run as root, see .ci/run)
	$(PY) -m tests.lanes

unit: venv ## Tests that need no daemon, engine or root
	$(VENV)/bin/pytest -m "not integration and not engine and not k8s_api and not vm"

engine-test: venv engine ## Tests against the Pulumi engine built from Go modules
	$(VENV)/bin/pytest -m engine

k8s-test: venv k8s-api ## Tests against a real Kubernetes API (apiserver, controllers, scheduler, kwok)
	$(VENV)/bin/pytest -m k8s_api

integration: venv ## Tests against real daemons in network namespaces (root)
	$(VENV)/bin/pytest -m integration

vm-test: venv ## Tests on real Debian 12 VMs under qemu: systemd, cgroup v2, reboots (root; guest image cached)
	$(VENV)/bin/pytest -m vm

bench: venv ## Benchmarks: plan time per resource against a baseline, per size
	$(PY) -m benchmarks.run

engine: ## Build the Pulumi CLI, language host and providers from Go modules (cached)
	bash tools/engine/build.sh

k8s-api: venv ## Build kube-apiserver, controller-manager, scheduler (the k3s pin's release), kwok; etcd, Traefik CRDs (cached)
	bash tools/k8s/build.sh

images: venv ## Build the images the real-daemon suites run into the per-user cache (root; once per run)
	$(PY) -m tests.integration.images

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
	@case '$(PULUMI_BACKEND_URL)' in file://*) mkdir -p '$(patsubst file://%,%,$(PULUMI_BACKEND_URL))' ;; esac
endef

preview: venv ## pulumi preview of STACK with the policy pack (needs a Pulumi CLI)
	$(need_pulumi)
	env $(ENGINE_ENV) bash tools/need-stack.sh $(STACK)
	$(PY) -m offline.plan --stack $(STACK) --quiet
	env $(ENGINE_ENV) pulumi preview --stack $(STACK) --diff --policy-pack policy \
	  --policy-pack-config build/$(STACK)/policy-config.json

up: venv ## pulumi up of STACK with the policy pack (UP_FLAGS passed on); never creates STACK
	$(need_pulumi)
	env $(ENGINE_ENV) bash tools/need-stack.sh $(STACK)
	$(PY) -m offline.plan --stack $(STACK) --quiet
	env $(ENGINE_ENV) pulumi up --stack $(STACK) --policy-pack policy \
	  --policy-pack-config build/$(STACK)/policy-config.json $(UP_FLAGS)

secret: ## Set secret KEY of STACK from standard input (e.g. the runner's store | make secret KEY=hpc:sshPrivateKey)
	$(need_pulumi)
	@[ -n "$(KEY)" ] || { echo "hpc: error: KEY is not set: make secret STACK=<stack> KEY=hpc:<name> < value" >&2; exit 1; }
	@env $(ENGINE_ENV) bash tools/need-stack.sh $(STACK)
	@env $(ENGINE_ENV) pulumi config set --secret --stack $(STACK) $(KEY) >/dev/null

clean: ## Remove build outputs and caches
	rm -rf build .pytest_cache .mypy_cache .ruff_cache
