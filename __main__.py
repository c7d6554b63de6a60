"""hpc-cluster: storage, Slurm, k3s and LLM inference for a research department's GPU servers.

Loads the validated stack config (``hpc:*``), composes the tiers, exports what users need.
"""

import pulumi

from stacks import cluster, config

settings, secrets = config.load()
built = cluster.build(settings, secrets)

pulumi.export("networkStorage", built.network_storage.apply(lambda ns: ns.model_dump()))
if built.inference_check is not None:
    pulumi.export("inferenceCheck", built.inference_check)
if built.slurm_check is not None:
    pulumi.export("slurmCheck", built.slurm_check)
if built.logins:
    pulumi.export("loginNodes", {name: f"ssh <user>@{node.address}" for name, node in built.logins.items()})
if built.urls:
    pulumi.export("urls", built.urls)
