"""The hpc-cluster policy pack: `pulumi preview --policy-pack policy` runs it through the CLI;
`make plan` runs the same validators offline (offline/policies.py). Only assembles the pack."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import EnforcementLevel, PolicyPack

from policy.rules import POLICIES

PolicyPack(name="hpc-cluster", enforcement_level=EnforcementLevel.ADVISORY, policies=POLICIES)
