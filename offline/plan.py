"""Offline plan: run the real ``__main__.py`` under the Pulumi SDK's mock engine and write it down.

``python -m stacks.plan --stack dev`` (``make plan STACK=dev``):

1. reads ``Pulumi.<stack>.yaml`` as the CLI would pass it (objects as JSON strings); ``secure:``
   values, which cannot be decrypted here, become stand-in secrets that stay marked secret;
2. runs the unchanged program after ``pulumi.runtime.set_mocks`` with a recording monitor (a
   ``MockMonitor`` subclass that sees every ``RegisterResourceRequest``: parent, dependencies,
   options) and the documented mocks of ``stacks.mocks``; applies the engine's
   ``additionalSecretOutputs`` rule, which plain mocks skip;
3. writes ``build/<stack>/plan.json`` (every resource: type, name, parent, provider,
   dependencies, inputs with secret values replaced by ``[secret]``, options; sorted, no
   timestamps: identical input gives identical bytes) and every rendered artifact under
   ``build/<stack>/files/`` (per-host scripts and files, Dockerfiles, manifests);
4. refuses to write anything if a stand-in or generated secret value appears in clear text.

Bad stack input exits with status 2 and one line naming the key.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import runpy
import shutil
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import mocks as sdk_mocks
from pulumi.runtime import rpc, settings
from pulumi.runtime.config import set_all_config
from pulumi.runtime.stack import wait_for_rpcs
from pulumi.runtime.sync_await import _sync_await

from components import scripts
from stacks.config import NAMESPACE, PLANNED_SECRET_KEYS, ConfigError
from stacks.mocks import PlanMocks, plain, stand_in_secret

ROOT = Path(__file__).resolve().parent.parent
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
            "aliases": len(request.aliases),
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
def _config_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return json.dumps(v)


def load_stack_config(
    stack: str, project: str, overrides: dict[str, Any] | None = None, program_dir: Path = ROOT
) -> tuple[dict[str, str], list[str]]:
    """``Pulumi.<stack>.yaml`` as the engine passes it: flat 'ns:key' -> string, secret keys.

    The committed stack files hold no secrets: an operator adds them with ``pulumi config set
    --secret`` after ``pulumi stack init``. Here each secret key the program reads
    (``config.PLANNED_SECRET_KEYS``) that the file lacks, or holds as ciphertext this plan cannot decrypt,
    gets a stand-in that stays marked secret; an override of ``None`` removes a key for good.
    """
    raw = yaml.safe_load((program_dir / f"Pulumi.{stack}.yaml").read_text()) or {}
    entries = dict(raw.get("config") or {})
    for key in PLANNED_SECRET_KEYS:
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
            config[full] = _config_text(value)
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
    set_all_config(config, secret_keys)
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


# ---- plan document ------------------------------------------------------------------------------
def _view(v: Any, public: frozenset[str] = frozenset()) -> Any:
    """JSON view of a recorded value: secrets masked, integral floats as ints, unknowns marked."""
    if rpc.is_rpc_secret(v):
        inner = v["value"]
        if isinstance(inner, dict):  # a secret map shows its keys, never its values
            return {k: (_view(x) if k in public else SECRET_MARK) for k, x in sorted(inner.items())}
        return SECRET_MARK
    if isinstance(v, dict):
        return {k: _view(x) for k, x in sorted(v.items())}
    if isinstance(v, list):
        return [_view(x) for x in v]
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return UNKNOWN_MARK


def record_view(r: Record) -> dict[str, Any]:
    inputs = {
        k: _view(v, PUBLIC_FIELDS_OF_SECRET_INPUTS.get((r.type, k), frozenset())) for k, v in sorted(r.inputs.items())
    }
    return {
        "urn": r.urn,
        "type": r.type,
        "name": r.name,
        "custom": r.custom,
        "parent": r.parent,
        "provider": r.provider,
        "dependencies": r.dependencies,
        "propertyDependencies": dict(sorted(r.property_dependencies.items())),
        "inputs": inputs,
        "secretInputs": r.secret_inputs(),
        "options": r.options,
    }


def plan_document(result: PlanRun) -> dict[str, Any]:
    resources = [record_view(r) for r in result.resources]
    return {
        "project": result.project,
        "stack": result.stack,
        "resourceCount": len(resources),
        "countsByType": dict(sorted(Counter(r["type"] for r in resources).items())),
        "resources": resources,
        "stackOutputs": {k: _view(v) for k, v in sorted(result.stack_outputs.items())},
    }


# ---- rendered artifacts ------------------------------------------------------------------------
def artifacts(result: PlanRun, program_dir: Path = ROOT) -> dict[str, str]:
    """Relative path under files/ -> content, for every artifact the plan shows reviewers."""
    files: dict[str, str] = {}
    for r in result.resources:
        if r.type == "command:remote:Command":
            create = plain(r.inputs.get("create"))
            if not isinstance(create, str):
                continue
            body = scripts.unwrap(create)
            head = scripts.headers(body)
            host = head.get("host", "unknown-host")
            files[f"hosts/{host}/steps/{r.name}.sh"] = body
            delete = plain(r.inputs.get("delete"))
            if isinstance(delete, str):
                files[f"hosts/{host}/steps/{r.name}.delete.sh"] = scripts.unwrap(delete)
            stdin = r.inputs.get("stdin")
            if head.get("file") and isinstance(stdin, str):
                files[f"hosts/{host}/files{head['file']}"] = stdin
        elif r.type.startswith("kubernetes:") and r.custom and not r.type.startswith("kubernetes:helm"):
            manifest = k8s_manifest(r)
            kind, name = manifest["kind"], manifest["metadata"]["name"]
            ns = manifest["metadata"].get("namespace", "_cluster")
            files[f"k8s/{ns}/{kind}-{name}.yaml"] = yaml.safe_dump(manifest, sort_keys=True)
        elif r.type == "docker:index/image:Image":
            build = plain(r.inputs.get("build")) or {}
            context = program_dir / str(build.get("context", ""))
            if build.get("context") and context.is_dir():
                for path in sorted(p for p in context.rglob("*") if p.is_file()):
                    files[f"images/{path.relative_to(program_dir / 'images').as_posix()}"] = path.read_text()
    return files


def k8s_manifest(r: Record) -> dict[str, Any]:
    """The object a Kubernetes resource would apply: apiVersion/kind from its type token, the
    name the provider assigns (mock outputs), secret values masked (the plan never shows them)."""
    _, group_version, kind = r.type.split(":")
    group, version = group_version.split("/")
    kind = kind.removesuffix("Patch")
    body = _view(r.inputs)
    body.pop("apiVersion", None)
    body.pop("kind", None)
    meta = dict(body.pop("metadata", None) or {})
    out_meta = plain(r.outputs.get("metadata")) or {}
    meta.setdefault("name", out_meta.get("name", r.name))
    if "namespace" in out_meta and "namespace" not in meta:
        meta["namespace"] = out_meta["namespace"]
    api = version if group == "core" else f"{group}/{version}"
    return {"apiVersion": api, "kind": kind, "metadata": meta, **body}


def find_leaks(texts: dict[str, str], secret_values: set[str]) -> list[str]:
    """Names of texts that contain a secret value in clear."""
    return sorted(name for name, text in texts.items() if any(s in text for s in secret_values))


def write(result: PlanRun, out_dir: Path) -> dict[str, Any]:
    """Write plan.json and files/ under ``out_dir`` (replacing what was there)."""
    doc = plan_document(result)
    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    files = artifacts(result)
    leaks = find_leaks({"plan.json": text, **files}, result.secret_values)
    if leaks:
        raise RuntimeError(f"refusing to write the plan: secret values in clear in {', '.join(leaks)}")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    (out_dir / "files").mkdir(parents=True)
    (out_dir / "plan.json").write_text(text)
    for rel, content in sorted(files.items()):
        path = out_dir / "files" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return doc


# ---- summary ------------------------------------------------------------------------------------
def summary(result: PlanRun, doc: dict[str, Any], out_dir: Path | None) -> str:
    lines = [f"Plan for stack {result.stack!r} ({result.project}):", ""]
    children: dict[str | None, list[Record]] = {}
    for r in result.resources:
        children.setdefault(r.parent, []).append(r)
    root_urn = next((u for u, r in result.records.items() if r.type == STACK_TYPE), None)

    def show(parent: str | None, indent: str) -> None:
        for r in sorted(children.get(parent, []), key=lambda x: (x.custom, x.type, x.name)):
            tag = "" if r.custom else "  [component]"
            secret = f"  (secret: {', '.join(r.secret_inputs())})" if r.secret_inputs() else ""
            lines.append(f"{indent}{r.type}  {r.name}{tag}{secret}")
            show(r.urn, indent + "  ")

    show(root_urn, "  ")
    stateful = [r for r in result.resources if r.options.get("protect") or r.options.get("retainOnDelete")]
    if stateful:
        lines += ["", "STATEFUL (protected: deletion refused, data kept; a replacement would lose it):"]
        for r in sorted(stateful, key=lambda x: x.name):
            flags = ", ".join(k for k in ("protect", "retainOnDelete") if r.options.get(k))
            lines.append(f"  !! {r.type}  {r.name}  [{flags}]")
    lines += ["", "Resources by type:"]
    for t, n in doc["countsByType"].items():
        lines.append(f"  {n:5d}  {t}")
    n_secret = sum(1 for r in result.resources if r.secret_inputs())
    lines += [
        "",
        f"{doc['resourceCount']} resources, {n_secret} with secret inputs, "
        f"{len(result.secret_values)} secret values kept out of the plan, "
        f"{result.seconds:.2f}s",
    ]
    if out_dir is not None:
        lines.append(f"wrote {out_dir / 'plan.json'} and {out_dir / 'files'}/")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stacks.plan", description=__doc__.split("\n")[0])
    ap.add_argument("--stack", default="dev")
    ap.add_argument("--out", type=Path, default=None, help="default: build/<stack>")
    ap.add_argument("--preview", action="store_true", help="run as a preview (dry run)")
    ap.add_argument("--quiet", action="store_true", help="print only the last lines")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="override a config key, e.g. --set 'hpc:storage={\"replica\": 2}'",
    )
    a = ap.parse_args(argv)
    out_dir = a.out or ROOT / "build" / a.stack
    overrides: dict[str, Any] = {}
    for item in a.set:
        key, _, value = item.partition("=")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    try:
        result = run(a.stack, overrides, preview=a.preview)
    except ConfigError as e:
        print(f"error: {e.key}: {e.message}", file=sys.stderr)
        return 2
    doc = write(result, out_dir)
    text = summary(result, doc, out_dir)
    print("\n".join(text.splitlines()[-4:]) if a.quiet else text)
    return report_policies(result, out_dir)


def report_policies(result: PlanRun, out_dir: Path) -> int:
    """Run the policy pack offline; write its config and results; 1 if a mandatory one fails."""
    from stacks import policies

    config = policies.policy_config(policies.stack_config(result))
    (out_dir / "policy-config.json").write_text(json.dumps(config, indent=1, sort_keys=True) + "\n")
    violations = policies.run(result, config)
    (out_dir / "policy-results.json").write_text(
        json.dumps([v.__dict__ for v in violations], indent=1, sort_keys=True) + "\n"
    )
    failing = policies.mandatory(violations)
    print(f"\nPolicies: {len(violations)} violations, {len(failing)} mandatory")
    for v in violations:
        print(f"  {v.line()}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
