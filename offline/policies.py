"""Run the policy pack's validators offline against a plan (never starting the pack's server).

``PolicyPack()`` starts a gRPC server and blocks, so this module imports the pack's policy list
(``policy.rules.POLICIES``, the objects ``policy/__main__.py`` assembles) and calls each
validator with the SDK's own ``ResourceValidationArgs`` / ``StackValidationArgs``, built from
the recorded resources: inputs as plain values (as the analyzer passes them), options, provider.

Per-stack levels and parameters come from ``policy_config(cfg)``: prod makes
``gluster-replica-safe`` and ``slurm-constrain-devices`` mandatory; racks with budgets make
``rack-power-budget`` mandatory. ``make plan`` writes it to ``build/<stack>/policy-config.json``
for ``pulumi preview --policy-pack policy --policy-pack-config ...``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from inspect import isawaitable
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from offline.mocks import plain
from offline.record import PlanRun, Record
from policy.rules import POLICIES
from stacks.config import SECRET_KEYS, ClusterConfig, parse


@dataclass(frozen=True)
class Violation:
    policy: str
    level: str
    resource: str
    message: str

    def line(self) -> str:
        return f"[{self.level}] {self.policy}: {self.message}"


def policy_config(cfg: ClusterConfig) -> dict[str, Any]:
    """Levels and parameters for one stack (the CLI's --policy-pack-config format)."""
    conf: dict[str, Any] = {}
    if cfg.is_prod:
        conf["gluster-replica-safe"] = {"enforcementLevel": "mandatory"}
        conf["slurm-constrain-devices"] = {"enforcementLevel": "mandatory"}
        conf["slurm-gpu-share-capped"] = {"enforcementLevel": "mandatory"}
    conf["rack-power-budget"] = {
        "enforcementLevel": "mandatory" if cfg.racks else "advisory",
        "racks": {name: r.power_budget_w for name, r in sorted(cfg.racks.items())},
        "hosts": [{"name": h.name, "rack": h.rack, "peakPowerW": h.hardware.peak_power_w} for h in cfg.hosts],
    }
    conf["nfs-clients-exclude-container-range"] = {"containerRanges": [str(cfg.network.container_range)]}
    return conf


def stack_config(result: PlanRun) -> ClusterConfig:
    """The validated config the run used (config values as the engine passed them)."""
    raw: dict[str, Any] = {}
    for key, text in result.config.items():
        ns, _, name = key.partition(":")
        if ns != "hpc" or name in SECRET_KEYS:
            continue
        try:
            raw[name] = json.loads(text)
        except json.JSONDecodeError:
            raw[name] = text
    return parse(raw)


def _opts(r: Record) -> PolicyResourceOptions:
    o = r.options
    return PolicyResourceOptions(
        protect=bool(o.get("protect")),
        ignore_changes=list(o.get("ignoreChanges", [])),
        delete_before_replace=o.get("deleteBeforeReplace"),
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=list(o.get("additionalSecretOutputs", [])),
        parent=r.parent,
    )


def _run(result: Any) -> None:
    if isawaitable(result):
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(result)
        finally:
            loop.close()


def _level(policy: Any, config: dict[str, Any]) -> EnforcementLevel:
    c = config.get(policy.name) or {}
    if "enforcementLevel" in c:
        return EnforcementLevel(c["enforcementLevel"])
    return policy.enforcement_level or EnforcementLevel.ADVISORY


def run(result: PlanRun, config: dict[str, Any] | None = None, policies: list[Any] | None = None) -> list[Violation]:
    """Every violation of the pack's policies on one plan, mandatory ones first."""
    config = config if config is not None else policy_config(stack_config(result))
    records = [r for r in result.resources if r.custom]
    by_urn = {r.urn: r for r in result.resources}
    out: list[Violation] = []
    for p in policies or POLICIES:
        level = _level(p, config)
        if level == EnforcementLevel.DISABLED:
            continue
        params = {k: v for k, v in (config.get(p.name) or {}).items() if k != "enforcementLevel"}
        if isinstance(p, ResourceValidationPolicy):
            for r in records:
                provider = by_urn.get(r.provider or "")
                args = ResourceValidationArgs(
                    resource_type=r.type,
                    props=plain_tree(r.inputs),
                    urn=r.urn,
                    name=r.name,
                    opts=_opts(r),
                    provider=PolicyProviderResource(provider.type, {}, provider.urn, provider.name)
                    if provider
                    else None,
                    config=params,
                )

                def report(
                    message: str, urn: str | None = None, _r: Record = r, _p: Any = p, _lv: str = level.value
                ) -> None:
                    out.append(Violation(_p.name, _lv, _r.name, message))

                _run(p.validate(args, report))
        elif isinstance(p, StackValidationPolicy):
            resources = [
                PolicyResource(r.type, plain_tree(r.inputs), r.urn, r.name, _opts(r), None, None, [], {})
                for r in records
            ]
            names = {r.urn: r.name for r in records}

            def report_stack(
                message: str,
                urn: str | None = None,
                _p: Any = p,
                _lv: str = level.value,
                _names: dict[str, str] = names,
            ) -> None:
                out.append(Violation(_p.name, _lv, _names.get(urn or "", "<stack>"), message))

            _run(p.validate(StackValidationArgs(resources, params), report_stack))
    return sorted(out, key=lambda v: (v.level != "mandatory", v.policy, v.resource, v.message))


def plain_tree(v: Any) -> Any:
    """Inputs as the analyzer passes them: secrets unwrapped (policies see plaintext)."""
    v = plain(v)
    if isinstance(v, dict):
        return {k: plain_tree(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain_tree(x) for x in v]
    return v


def mandatory(violations: list[Violation]) -> list[Violation]:
    return [v for v in violations if v.level == "mandatory"]
