"""Exposure: the FastChat web UI and each model's OpenAI API reachable from outside the cluster,
the way k3s does it: Ingresses served by its bundled Traefik on every node's ports 80/443.

* ``https://<publicHost>/`` is the web UI;
* ``https://<publicHost>/<model>/v1`` is each model's OpenAI-compatible API (a Traefik
  ``stripPrefix`` middleware hands vLLM its own ``/v1``); only that prefix is routed (an Ingress
  ``Prefix`` path matches whole path elements), so vLLM's ``/metrics``, ``/docs`` and the rest
  of its routes stay inside the cluster; vLLM refuses any request without the
  API key (``Authorization: Bearer``), so the key is required outside as inside;
* TLS with the site's certificate when the stack gives one (a ``kubernetes.io/tls`` Secret),
  plain HTTP otherwise (the URLs say which).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from components.base import Args
from components.inference.render import ModelServer

TLS_SECRET = "public-tls"
MIDDLEWARE_API = "traefik.io/v1alpha1"
INGRESS_CLASS = "traefik"


class ExposureArgs(Args):
    provider: k8s.Provider = Field(description="The cluster's Kubernetes provider.")
    namespace: pulumi.Output[str] = Field(description="The inference namespace.")
    public_host: str = Field(description="The name (or address) users reach the cluster by.")
    models: list[ModelServer] = Field(description="Every served model.")
    webui_service: str = Field(description="The FastChat web UI's Service.")
    webui_port: int = Field(description="Its port.")
    tls_certificate: pulumi.Output[str] | None = Field(default=None, description="PEM certificate chain (secret).")
    tls_key: pulumi.Output[str] | None = Field(default=None, description="PEM private key (secret).")


class Exposure(pulumi.ComponentResource):
    """Children: the TLS Secret (when given), ``<name>-webui`` Ingress, and per model a
    ``strip-<model>`` Middleware and ``<name>-<model>`` Ingress."""

    urls: dict[str, str]
    """``chat`` and one API base URL per model."""

    def __init__(self, name: str, args: ExposureArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:inference:Exposure", name, None, opts)
        opt = pulumi.ResourceOptions(parent=self, provider=args.provider)
        tls = None
        scheme = "http"
        if args.tls_certificate is not None and args.tls_key is not None:
            k8s.core.v1.Secret(
                f"{name}-tls",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=TLS_SECRET, namespace=args.namespace),
                type="kubernetes.io/tls",
                string_data={"tls.crt": args.tls_certificate, "tls.key": args.tls_key},
                opts=opt,
            )
            tls = [k8s.networking.v1.IngressTLSArgs(hosts=[args.public_host], secret_name=TLS_SECRET)]
            scheme = "https"
        base = f"{scheme}://{args.public_host}"

        def ingress(iname: str, path: str, service: str, port: int, annotations: dict[str, str]) -> None:
            k8s.networking.v1.Ingress(
                f"{name}-{iname}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=iname, namespace=args.namespace, annotations=annotations),
                spec=k8s.networking.v1.IngressSpecArgs(
                    ingress_class_name=INGRESS_CLASS,
                    tls=tls,
                    rules=[
                        k8s.networking.v1.IngressRuleArgs(
                            host=None if _is_address(args.public_host) else args.public_host,
                            http=k8s.networking.v1.HTTPIngressRuleValueArgs(
                                paths=[
                                    k8s.networking.v1.HTTPIngressPathArgs(
                                        path=path,
                                        path_type="Prefix",
                                        backend=k8s.networking.v1.IngressBackendArgs(
                                            service=k8s.networking.v1.IngressServiceBackendArgs(
                                                name=service,
                                                port=k8s.networking.v1.ServiceBackendPortArgs(number=port),
                                            )
                                        ),
                                    )
                                ]
                            ),
                        )
                    ],
                ),
                opts=opt,
            )

        ingress("webui", "/", args.webui_service, args.webui_port, {})
        self.urls = {"chat": f"{base}/"}
        for m in args.models:
            middleware = f"strip-{m.name}"
            k8s.apiextensions.CustomResource(
                f"{name}-{middleware}",
                api_version=MIDDLEWARE_API,
                kind="Middleware",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=middleware, namespace=args.namespace),
                spec={"stripPrefix": {"prefixes": [f"/{m.name}"]}},
                opts=opt,
            )
            annotation: pulumi.Output[str] = pulumi.Output.concat(args.namespace, f"-{middleware}@kubernetescrd")
            ingress(m.name, f"/{m.name}/v1", m.name, m.port,
                    {"traefik.ingress.kubernetes.io/router.middlewares": annotation})  # type: ignore[dict-item]  # fmt: skip
            self.urls[m.name] = f"{base}/{m.name}/v1"
        self.register_outputs({"urls": self.urls})


def _is_address(host: str) -> bool:
    return all(part.isdigit() for part in host.split("."))
