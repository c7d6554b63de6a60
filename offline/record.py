"""Recording one run of the real program under the Pulumi SDK's mock engine.

``run`` reads ``Pulumi.<stack>.yaml`` as the CLI would pass it (objects as JSON strings;
``secure:`` values, which cannot be decrypted here, become stand-in secrets that stay marked
secret), runs the unchanged ``__main__.py`` after ``pulumi.runtime.set_mocks`` with a
``RecordingMonitor`` (a ``MockMonitor`` subclass that sees every ``RegisterResourceRequest``:
parent, dependencies, options) and the documented mocks of ``offline.mocks``, and applies the
engine's ``additionalSecretOutputs`` rule, which plain mocks skip. The result is a ``PlanRun``.
"""

from __future__ import annotations

import asyncio
import json
import os
import runpy
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from google.protobuf import json_format
from pulumi.runtime import mocks as sdk_mocks
from pulumi.runtime import rpc, settings
from pulumi.runtime.config import set_all_config
from pulumi.runtime.stack import wait_for_rpcs
from pulumi.runtime.sync_await import _sync_await

from offline import stack_file
from offline.mocks import PlanMocks, stand_in_secret
from stacks.config import NAMESPACE, PLANNED_SECRET_KEYS, PROD_PLANNED_SECRET_KEYS

ROOT = Path(__file__).resolve().parent.parent
CONFIG_ENV = ("PULUMI_CONFIG", "PULUMI_CONFIG_SECRET_KEYS")  # how the language host passes config
SECRET_MARK = "[secret]"
ROOT_STACK_TYPE = "pulumi:pulumi:Stack"
UNKNOWN_MARK = "[computed]"
STACK_TYPE = "pulumi:pulumi:Stack"
# Secret inputs that are secret as a whole only because the SDK wraps them: these fields are
# shown, the rest stays hidden (remote.Command wraps its whole connection, private key included).
PUBLIC_FIELDS_OF_SECRET_INPUTS: dict[tuple[str, str], frozenset[str]] = {
    ("command:remote:Command", "connection"): frozenset(
        {"host", "hostKey", "port", "user", "dialErrorLimit", "perDialTimeout"}
    ),
}


# ---- recording --------------------------------------------------------------------------------
@dataclass
class Record:
    """One registered resource as the engine would receive it."""

    urn: str
    type: str
    name: str
    custom: bool
    parent: str | None
    provider: str | None
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    options: dict[str, Any]
    component_outputs: dict[str, Any] | None = None

    def secret_inputs(self) -> list[str]:
        return sorted(k for k, v in self.inputs.items() if _has_secret(v))


def _has_secret(v: Any) -> bool:
    if rpc.is_rpc_secret(v):
        return True
    if isinstance(v, dict):
        return any(_has_secret(x) for x in v.values())
    if isinstance(v, list):
        return any(_has_secret(x) for x in v)
    return False


class _CapturingMocks(pulumi.runtime.Mocks):
    """Passes calls to the plan mocks and keeps what they saw for the monitor's thread."""

    def __init__(self, inner: pulumi.runtime.Mocks, local: threading.local):
        self.inner, self.local = inner, local

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict]:
        rid, state = self.inner.new_resource(args)
        request = getattr(self.local, "request", None)
        if request is not None and request.additionalSecretOutputs:
            # The engine makes these outputs secret; mocks alone would leave them plain.
            state = dict(state)
            for key in request.additionalSecretOutputs:
                if key in state and not rpc.is_rpc_secret(state[key]):
                    state[key] = rpc.wrap_rpc_secret(state[key])
        self.local.seen = (args.inputs, state)
        return rid, state

    def call(self, args: pulumi.runtime.MockCallArgs) -> Any:
        return self.inner.call(args)


class RecordingMonitor(sdk_mocks.MockMonitor):
    """A MockMonitor that records every registration with its parent, dependencies, options."""

    def __init__(self, mocks: pulumi.runtime.Mocks):
        self._local = threading.local()
        super().__init__(_CapturingMocks(mocks, self._local))
        self._lock = threading.Lock()
        self.records: dict[str, Record] = {}
        self.registered_outputs: dict[str, Any] = {}

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        """The engine's URN: children of the root stack carry no parent type (the SDK's mock
        monitor adds ``pulumi:pulumi:Stack$``, which no real URN has; found by a real preview)."""
        if parent and parent.split("::")[2].split("$")[-1] == ROOT_STACK_TYPE:
            parent = ""
        return super().make_urn(parent, type_, name)

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        self._local.request, self._local.seen = request, ({}, {})
        response = super().RegisterResource(request)
        inputs, outputs = self._local.seen
        options = {
            "protect": bool(request.protect),
            "retainOnDelete": bool(request.retainOnDelete),
            "deleteBeforeReplace": bool(request.deleteBeforeReplace),
            "ignoreChanges": sorted(request.ignoreChanges),
            "replaceOnChanges": sorted(request.replaceOnChanges),
            "additionalSecretOutputs": sorted(request.additionalSecretOutputs),
            # each alias as the engine receives it (a URN, or the old name/type/parent): a move
            # that keeps its resource shows in the plan
            "aliases": [json_format.MessageToDict(a) for a in request.aliases],
        }
        record = Record(
            urn=response.urn,
            type=request.type,
            name=request.name,
            custom=bool(request.custom),
            parent=request.parent or None,
            provider=request.provider.rsplit("::", 1)[0] if request.provider else None,
            dependencies=sorted(set(request.dependencies)),
            property_dependencies={k: sorted(set(v.urns)) for k, v in request.propertyDependencies.items() if v.urns},
            inputs=dict(inputs),
            outputs=dict(outputs),
            options={k: v for k, v in options.items() if v},
        )
        with self._lock:
            self.records[response.urn] = record
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:  # noqa: N802
        from google.protobuf import json_format

        with self._lock:
            self.registered_outputs[request.urn] = json_format.MessageToDict(request.outputs)
        return super().RegisterResourceOutputs(request)


# ---- config -------------------------------------------------------------------------------------
def load_stack_config(
    stack: str, project: str, overrides: dict[str, Any] | None = None, program_dir: Path = ROOT
) -> tuple[dict[str, str], list[str]]:
    """``Pulumi.<stack>.yaml`` as the engine passes it: flat 'ns:key' -> string, secret keys.

    The committed stack files hold no secrets: an operator adds them with ``pulumi config set
    --secret`` after ``pulumi stack init``. Here each secret key the program reads
    (``config.PLANNED_SECRET_KEYS``, and ``PROD_PLANNED_SECRET_KEYS`` for prod) that the file
    lacks, or holds as ciphertext this plan cannot decrypt, gets a stand-in that stays marked
    secret; an override of ``None`` removes a key for good.
    """
    return config_entries(stack_file.read(program_dir, stack), project, overrides)


def config_entries(
    raw: dict[str, Any], project: str, overrides: dict[str, Any] | None = None
) -> tuple[dict[str, str], list[str]]:
    """A parsed stack file's ``config:`` as the engine passes it (see ``load_stack_config``)."""
    entries = dict(raw.get("config") or {})
    prod = entries.get(f"{NAMESPACE}:environment") == "prod"
    for key in (*PLANNED_SECRET_KEYS, *(PROD_PLANNED_SECRET_KEYS if prod else ())):
        entries.setdefault(f"{NAMESPACE}:{key}", {"secure": "stand-in"})
    for key, value in (overrides or {}).items():
        if value is None:
            entries.pop(key, None)
        else:
            entries[key] = value
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in entries.items():
        full = key if ":" in key else f"{project}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            secret_keys.append(full)
            config[full] = stand_in_secret(full)
        else:
            config[full] = stack_file.config_text(value)
    return config, sorted(secret_keys)


def project_name(program_dir: Path = ROOT) -> str:
    return str(yaml.safe_load((program_dir / "Pulumi.yaml").read_text())["name"])


# ---- running ------------------------------------------------------------------------------------
@dataclass
class PlanRun:
    """The outcome of one offline run."""

    project: str
    stack: str
    records: dict[str, Record]
    stack_outputs: dict[str, Any]
    secret_values: set[str] = field(default_factory=set)
    seconds: float = 0.0
    config: dict[str, str] = field(default_factory=dict)

    @property
    def resources(self) -> list[Record]:
        """Registered resources other than the root stack, by URN."""
        return [r for u, r in sorted(self.records.items()) if r.type != STACK_TYPE]

    def by_name(self, name: str) -> Record:
        return next(r for r in self.resources if r.name == name)

    def of_type(self, token: str) -> list[Record]:
        return [r for r in self.resources if r.type == token]


def run(
    stack: str,
    overrides: dict[str, Any] | None = None,
    *,
    preview: bool = False,
    program: Callable[[], None] | None = None,
    program_dir: Path = ROOT,
    mocks: pulumi.runtime.Mocks | None = None,
) -> PlanRun:
    """Run the program once under mocks with the stack's config (plus ``overrides``).

    Raises ``ConfigError`` (and anything else the program raises) after recording what was
    registered up to that point."""
    project = project_name(program_dir)
    config, secret_keys = load_stack_config(stack, project, overrides, program_dir)
    monitor = RecordingMonitor(mocks or PlanMocks())
    # A fresh event loop and engine per run: the root stack's futures must belong to the loop
    # that runs the program, and nothing may be left from an earlier run in this process.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    settings.ROOT.set(None)
    settings.SETTINGS.outputs.clear()
    pulumi.runtime.set_mocks(monitor.mocks, project=project, stack=stack, preview=preview, monitor=monitor)
    # The config as the Python language host hands it over: the PULUMI_CONFIG environment (JSON),
    # then set_all_config from it (pulumi-language-python-exec does exactly this).
    saved_env = {k: os.environ.get(k) for k in CONFIG_ENV}
    os.environ[CONFIG_ENV[0]] = json.dumps(config)
    os.environ[CONFIG_ENV[1]] = json.dumps(secret_keys)
    set_all_config(pulumi.runtime.get_config_env(), pulumi.runtime.get_config_secret_keys_env())
    root = pulumi.runtime.get_root_resource()
    started = time.perf_counter()
    if program is None:

        def program() -> None:
            runpy.run_path(str(program_dir), run_name="__main__")

    try:
        sys.path.insert(0, str(program_dir))
        program()
        _sync_await(wait_for_rpcs())
        outputs = _sync_await(_resolve_outputs(root))
    except BaseException as e:
        # Callers (and tests) can see what had been registered when the program failed.
        e.registered = [r for r in monitor.records.values() if r.type != STACK_TYPE]  # type: ignore[attr-defined]
        raise
    finally:
        sys.path.remove(str(program_dir))
        settings.SETTINGS.outputs.clear()
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    result = PlanRun(project, stack, dict(monitor.records), outputs, config=config)
    result.seconds = time.perf_counter() - started
    result.secret_values = {config[k] for k in secret_keys} | _secret_leaves(result)
    for urn, outs in monitor.registered_outputs.items():
        if urn in result.records:
            result.records[urn].component_outputs = outs
    return result


async def _resolve_outputs(root: pulumi.Resource | None) -> dict[str, Any]:
    outs: dict[str, Any] = {}
    for key, value in sorted((getattr(root, "outputs", None) or {}).items()):
        out = pulumi.Output.from_input(value)
        plain = await out.future()
        outs[key] = rpc.wrap_rpc_secret(plain) if await out.is_secret() else plain
    return outs


def _secret_leaves(result: PlanRun) -> set[str]:
    """Plain strings under secret markers in outputs (generated secrets and the like), except
    the public fields of inputs the SDK wraps whole (a connection's host and user)."""
    found: set[str] = set()

    def walk(v: Any, inside: bool, public: frozenset[str]) -> None:
        if rpc.is_rpc_secret(v):
            walk(v["value"], True, public)
        elif isinstance(v, dict):
            for k, x in v.items():
                if not (inside and k in public):
                    walk(x, inside, frozenset())
        elif isinstance(v, list):
            for x in v:
                walk(x, inside, frozenset())
        elif inside and isinstance(v, str) and len(v) >= 8:
            found.add(v)

    for r in result.records.values():
        for key, value in r.outputs.items():
            walk(value, False, PUBLIC_FIELDS_OF_SECRET_INPUTS.get((r.type, key), frozenset()))
    return found
