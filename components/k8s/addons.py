"""ClusterAddons: NFS CSI driver + StorageClass + model cache, and the ``nvidia`` RuntimeClass.

There is no NVIDIA device plugin: it would pick a model's physical GPU itself (and, on a host that
also runs Slurm, offer Slurm's GPUs too). Each model server is pinned instead to the GPUs the
capacity model placed it on (``NVIDIA_VISIBLE_DEVICES``, components/inference/host.py), which
are GPUs the stack gave to inference; config validation refuses overlaps and overfilled GPUs."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from components.base import Args
from components.hardware import NVIDIA_RUNTIME
from components.storage.contract import NetworkStorage

NFS_CSI_CHART = "csi-driver-nfs"
NFS_CSI_VERSION = "v4.9.0"  # the version the lab notes install
NFS_CSI_REPO = "https://raw.githubusercontent.com/kubernetes-csi/csi-driver-nfs/master/charts"
STORAGE_CLASS = "nfs-csi"
K8S_SUBDIR = "k8s"  # owned by nobody on the volume: squashed CSI writes land there


class ClusterAddonsArgs(Args):
    provider: k8s.Provider = Field(description="The cluster's Kubernetes provider.")
    network_storage: pulumi.Output[NetworkStorage] = Field(description="The shared volume's contract.")
    namespace: str = Field(description="Namespace for the inference workloads.")
    model_cache_gib: int = Field(description="Size of the model-cache claim (GiB): room for every model's weights.")
    retain_volumes: bool = Field(description="reclaimPolicy Retain (prod) instead of Delete.")


class ClusterAddons(pulumi.ComponentResource):
    """Cluster-wide pieces the workloads need.

    Children: the NFS CSI Helm release, the ``nfs-csi`` StorageClass (server and share from the
    storage tier's contract), the inference namespace and its RWX ``model-cache`` PVC, the
    ``nvidia`` RuntimeClass."""

    namespace: k8s.core.v1.Namespace
    model_cache: k8s.core.v1.PersistentVolumeClaim

    def __init__(self, name: str, args: ClusterAddonsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:k8s:ClusterAddons", name, None, opts)
        opt = pulumi.ResourceOptions(parent=self, provider=args.provider)
        csi = k8s.helm.v3.Release(
            f"{name}-csi-nfs",
            chart=NFS_CSI_CHART,
            version=NFS_CSI_VERSION,
            namespace="kube-system",
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=NFS_CSI_REPO),
            opts=opt,
        )
        storage_class = k8s.storage.v1.StorageClass(
            f"{name}-nfs-csi",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=STORAGE_CLASS),
            provisioner="nfs.csi.k8s.io",
            parameters=args.network_storage.apply(
                lambda ns: {"server": ns.nfs_server, "share": f"{ns.nfs_export}/{K8S_SUBDIR}"}
            ),
            reclaim_policy="Retain" if args.retain_volumes else "Delete",
            volume_binding_mode="Immediate",
            mount_options=args.network_storage.apply(lambda ns: [f"nfsvers={ns.nfs_version}"]),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[csi]),
        )
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata=k8s.meta.v1.ObjectMetaArgs(name=args.namespace), opts=opt
        )
        self.model_cache = k8s.core.v1.PersistentVolumeClaim(
            f"{name}-model-cache",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="model-cache", namespace=self.namespace.metadata.name),
            spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                access_modes=["ReadWriteMany"],
                storage_class_name=storage_class.metadata.name,
                resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": f"{args.model_cache_gib}Gi"}),
            ),
            opts=opt,
        )
        k8s.node.v1.RuntimeClass(
            f"{name}-runtime-nvidia",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=NVIDIA_RUNTIME),
            handler=NVIDIA_RUNTIME,
            opts=opt,
        )
        self.register_outputs({"storageClass": storage_class.metadata.name})
