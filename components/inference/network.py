"""NetworkPolicies of the inference namespace: who may talk to the model servers, and where they
may talk to. k3s enforces them (its embedded network policy controller).

* nothing reaches a pod of the namespace unless a policy below lets it (default deny);
* model servers: reached only by FastChat (web UI and controller), k3s's Traefik (the public API
  routes, where vLLM still asks for the key, and Prometheus's metrics routes, behind the
  monitoring login) and the k3s server host, where the post-deploy check runs; they reach
  nothing (``models-egress`` admits no egress: the weights are in the cache, and a model's
  ``--trust-remote-code`` code has nowhere to send anything);
* the download Jobs (components/inference/download.py) reach the cluster DNS and HTTPS on the
  Internet only: never the pod or service networks, the cluster's subnet or container range, or
  any private, shared, link-local or loopback range (where a site's own hosts live);
* the FastChat web UI is reached by anyone (it is the users' way in; Traefik asks for the
  user's login, exposure.py); the controller only by the web UI.
"""

from __future__ import annotations

from ipaddress import IPv4Network, collapse_addresses

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from components.base import Args
from components.inference.download import DOWNLOAD_LABEL

MODEL_LABEL = "hpc-cluster.io/model"
# RFC 1918, RFC 6598 (shared), link-local, loopback: where a site's own networks are
SITE_RANGES = tuple(
    IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16",
                             "127.0.0.0/8")
)  # fmt: skip
HTTPS_PORT = 443
DNS_PORT = 53


class NetworkPoliciesArgs(Args):
    provider: k8s.Provider = Field(description="The cluster's Kubernetes provider.")
    namespace: pulumi.Output[str] = Field(description="The inference namespace.")
    model_ports: list[int] = Field(description="Ports the model servers listen on.")
    webui_port: int = Field(description="The FastChat web UI's port.")
    controller_port: int = Field(description="The FastChat controller's port.")
    server_address: str = Field(description="The k3s server host (runs the post-deploy check).")
    cluster_subnet: str = Field(description="The cluster's host subnet: no pod of the namespace reaches it.")
    unreachable: list[str] = Field(
        default_factory=list,
        description="More networks the downloads never reach (pod and service networks, container range).",
    )


def _tcp(ports: list[int]) -> list[k8s.networking.v1.NetworkPolicyPortArgs]:
    return [k8s.networking.v1.NetworkPolicyPortArgs(port=p, protocol="TCP") for p in sorted(set(ports))]


def blocked_networks(networks: list[str]) -> list[str]:
    """``networks`` and the site ranges, merged (a network inside another is dropped)."""
    every = [*SITE_RANGES, *(IPv4Network(n, strict=False) for n in networks)]
    return [str(n) for n in collapse_addresses(every)]


def _app(app: str) -> k8s.networking.v1.NetworkPolicyPeerArgs:
    return k8s.networking.v1.NetworkPolicyPeerArgs(
        pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"app": app})
    )


class NetworkPolicies(pulumi.ComponentResource):
    """Children: ``default-deny``, ``models-ingress``, ``models-egress``, ``downloads-egress``,
    ``fastchat-webui-ingress`` and ``fastchat-controller-ingress`` NetworkPolicies."""

    def __init__(self, name: str, args: NetworkPoliciesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:inference:NetworkPolicies", name, None, opts)
        opt = pulumi.ResourceOptions(parent=self, provider=args.provider)
        models = k8s.meta.v1.LabelSelectorArgs(
            match_expressions=[k8s.meta.v1.LabelSelectorRequirementArgs(key=MODEL_LABEL, operator="Exists")]
        )
        N = k8s.networking.v1  # noqa: N806

        def policy(pname: str, spec: k8s.networking.v1.NetworkPolicySpecArgs) -> None:
            N.NetworkPolicy(
                f"{name}-{pname}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=pname, namespace=args.namespace),
                spec=spec,
                opts=opt,
            )

        policy("default-deny", N.NetworkPolicySpecArgs(pod_selector=k8s.meta.v1.LabelSelectorArgs(),
                                                        policy_types=["Ingress"]))  # fmt: skip
        policy(
            "models-ingress",
            N.NetworkPolicySpecArgs(
                pod_selector=models,
                policy_types=["Ingress"],
                ingress=[
                    N.NetworkPolicyIngressRuleArgs(
                        from_=[
                            _app("fastchat-webui"),
                            _app("fastchat-controller"),
                            # k3s's Traefik: the public API routes (components/inference/exposure.py)
                            N.NetworkPolicyPeerArgs(
                                namespace_selector=k8s.meta.v1.LabelSelectorArgs(
                                    match_labels={"kubernetes.io/metadata.name": "kube-system"}
                                ),
                                pod_selector=k8s.meta.v1.LabelSelectorArgs(
                                    match_labels={"app.kubernetes.io/name": "traefik"}
                                ),
                            ),
                            N.NetworkPolicyPeerArgs(ip_block=N.IPBlockArgs(cidr=f"{args.server_address}/32")),
                        ],
                        ports=_tcp(args.model_ports),
                    )
                ],
            ),
        )
        policy("models-egress", N.NetworkPolicySpecArgs(pod_selector=models, policy_types=["Egress"], egress=[]))
        dns = N.NetworkPolicyEgressRuleArgs(
            to=[
                N.NetworkPolicyPeerArgs(
                    namespace_selector=k8s.meta.v1.LabelSelectorArgs(
                        match_labels={"kubernetes.io/metadata.name": "kube-system"}
                    ),
                    pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"k8s-app": "kube-dns"}),
                )
            ],
            ports=[
                N.NetworkPolicyPortArgs(port=DNS_PORT, protocol="UDP"),
                N.NetworkPolicyPortArgs(port=DNS_PORT, protocol="TCP"),
            ],
        )
        internet = N.IPBlockArgs(cidr="0.0.0.0/0", except_=blocked_networks([args.cluster_subnet, *args.unreachable]))
        policy(
            "downloads-egress",
            N.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(
                    match_expressions=[k8s.meta.v1.LabelSelectorRequirementArgs(key=DOWNLOAD_LABEL, operator="Exists")]
                ),
                policy_types=["Egress"],
                egress=[
                    dns,
                    N.NetworkPolicyEgressRuleArgs(
                        to=[N.NetworkPolicyPeerArgs(ip_block=internet)], ports=_tcp([HTTPS_PORT])
                    ),
                ],
            ),
        )
        policy(
            "fastchat-webui-ingress",
            N.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"app": "fastchat-webui"}),
                policy_types=["Ingress"],
                ingress=[N.NetworkPolicyIngressRuleArgs(ports=_tcp([args.webui_port]))],
            ),
        )
        policy(
            "fastchat-controller-ingress",
            N.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"app": "fastchat-controller"}),
                policy_types=["Ingress"],
                ingress=[
                    N.NetworkPolicyIngressRuleArgs(from_=[_app("fastchat-webui")], ports=_tcp([args.controller_port]))
                ],
            ),
        )
        self.register_outputs({})
