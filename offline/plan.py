"""Offline plan: run the real ``__main__.py`` under the Pulumi SDK's mock engine and write it down.

``python -m offline.plan --stack dev`` (``make plan STACK=dev``):

1. reads ``Pulumi.<stack>.yaml`` as the CLI would pass it (objects as JSON strings); ``secure:``
   values, which cannot be decrypted here, become stand-in secrets that stay marked secret;
2. runs the unchanged program after ``pulumi.runtime.set_mocks`` with a recording monitor (a
   ``MockMonitor`` subclass that sees every ``RegisterResourceRequest``: parent, dependencies,
   options) and the documented mocks of ``offline.mocks``; applies the engine's
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
import json
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from pulumi.runtime import rpc

from components import scripts
from offline import per_host, policies
from offline.mocks import plain
from offline.record import (  # noqa: F401  (re-exported: the plan's API in one place)
    PUBLIC_FIELDS_OF_SECRET_INPUTS,
    ROOT,
    SECRET_MARK,
    STACK_TYPE,
    UNKNOWN_MARK,
    PlanRun,
    Record,
    load_stack_config,
    project_name,
    run,
)
from offline.stack_file import StackFileError
from stacks.config import ConfigError


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
            files[f"hosts/{host}/steps/{r.name}.sh"] = scripts.outline(body)
            delete = plain(r.inputs.get("delete"))
            if isinstance(delete, str):
                files[f"hosts/{host}/steps/{r.name}.delete.sh"] = scripts.outline(scripts.unwrap(delete))
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
    if any(path.startswith("hosts/") and "/steps/" in path for path in files):
        files["shell/lib.sh"] = scripts.shell_library()  # once: each step shows scripts.LIBRARY_LINE
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
    """What ``make plan`` prints: per machine what happens there, then the stateful resources,
    the counts and where the files are."""
    lines = [f"Plan for stack {result.stack!r} ({result.project}):", "", per_host.render(result)]
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
    ap = argparse.ArgumentParser(prog="python -m offline.plan", description=__doc__.split("\n")[0])
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
    except StackFileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ConfigError as e:
        for key, message in e.problems:
            print(f"error: {key}: {message}", file=sys.stderr)
        if len(e.problems) > 1:
            print(f"{len(e.problems)} problems; nothing was planned", file=sys.stderr)
        return 2
    doc = write(result, out_dir)
    text = summary(result, doc, out_dir)
    print("\n".join(text.splitlines()[-4:]) if a.quiet else text)
    return report_policies(result, out_dir)


def report_policies(result: PlanRun, out_dir: Path) -> int:
    """Run the policy pack offline; write its config and results; 1 if a mandatory one fails."""
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
