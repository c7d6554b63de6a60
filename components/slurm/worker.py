"""GpuWorker and CpuWorker: a server running slurmd (configless) in a container, prepared and
preflighted. A GPU worker's container gets only the GPUs Slurm owns on it; a CPU worker none."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pulumi
import pulumi_docker as docker
from pydantic import Field

from components import remote
from components.hardware import HardwareProfile
from components.remote import Ssh
from components.slurm import render, render_health, steps
from components.slurm.images import HostDockerArgs, macvlan_network, pulled_image, slurm_image
from components.slurm.munge import ACCOUNTS_VOLUME, MUNGE_VOLUME, DirectoryArgs, directory_step, munge_key_step
from components.storage.contract import NetworkStorage

EXTRA_NVIDIA_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
# Users' Apptainer images (SIF) are mounted by squashfuse, unprivileged, through /dev/fuse (the
# host's: mode 0666, as udev makes it); without it Apptainer would extract each image per job.
FUSE_DEVICE = "/dev/fuse"
NVIDIA_RUNTIME = "nvidia"  # registered in the host's Docker by the NVIDIA container toolkit (preflight)
# compute: libcuda for jobs; utility: nvidia-smi and NVML for the health check and jobs.
NVIDIA_DRIVER_CAPABILITIES = "compute,utility"
# Jobs' /dev/shm: Docker's default is 64 MB, and NCCL's shared-memory transport and PyTorch's
# DataLoader workers (which pass batches through it) fail with "No space left on device" or a
# bus error long before that is enough. Half the host's RAM, Linux's own default size for a
# tmpfs and so a bare host's /dev/shm; the pages count against the memory cgroup of the job that
# writes them, so a job cannot use it to exceed its --mem.
SHM_FRACTION = 0.5
# Locked memory unlimited for slurmd, and so for jobs (slurm.conf keeps MEMLOCK from being
# propagated from the submitting shell): RDMA and NCCL pin their buffers.
UNLIMITED = -1


def shm_size_mib(memory_mib: int) -> int:
    """/dev/shm of a node's container for ``memory_mib`` of RAM, in MiB: the provider's
    ``shm_size`` unit (its "MB" is multiplied by 1024 * 1024; Docker's own default, 64m, is 64)."""
    return int(memory_mib * SHM_FRACTION)


def job_limits(memory_mib: int) -> dict[str, Any]:
    """The slurmd container's inputs that jobs inherit: /dev/shm's size and unlimited memlock."""
    return {
        "shm_size": shm_size_mib(memory_mib),
        "ulimits": [docker.ContainerUlimitArgs(name="memlock", soft=UNLIMITED, hard=UNLIMITED)],
    }


def nvidia_env(gpu_indexes: tuple[int, ...]) -> list[str]:
    """What the NVIDIA runtime reads: exactly the GPUs Slurm owns here, in gres.conf's order, so
    Slurm's GPU i is the host's GPU i (the container's devices and its NVML agree)."""
    return [
        f"NVIDIA_VISIBLE_DEVICES={','.join(map(str, gpu_indexes))}",
        f"NVIDIA_DRIVER_CAPABILITIES={NVIDIA_DRIVER_CAPABILITIES}",
    ]


def fingerprint(spec: dict[str, Any]) -> pulumi.Output[str]:
    """A hash of a container's whole spec, Outputs and input classes resolved."""
    return pulumi.Output.from_input(spec).apply(
        lambda resolved: hashlib.sha256(json.dumps(resolved, sort_keys=True, default=vars).encode()).hexdigest()[:16]
    )


class GpuWorkerArgs(DirectoryArgs):
    ssh: Ssh = Field(description="Connection to the worker host.")
    head_ssh: Ssh = Field(description="Connection to the head host (drain and resume run there).")
    docker: HostDockerArgs = Field(description="The worker host's Docker provider and network.")
    network_storage: pulumi.Output[NetworkStorage] = Field(description="The shared volume's contract.")
    host_mount: pulumi.Resource = Field(description="The step that mounts the shared volume on this host.")
    hardware: HardwareProfile = Field(description="The host's profile with its overrides.")
    gpu_indexes: tuple[int, ...] = Field(
        default=(), description="The GPUs Slurm owns on this host (others serve models); empty: a CPU node."
    )
    container_address: str = Field(description="The worker container's macvlan address.")
    head_name: str = Field(description="The Slurm head's host name.")
    head_address: str = Field(description="The head container's address (configless server).")
    head_container: pulumi.Resource | None = Field(
        default=None, description="The head's container: the drain and resume run in it, so after it."
    )
    munge_key: pulumi.Output[str] = Field(description="The cluster's munge key, base64 (secret).")
    image: pulumi.Output[str] | None = Field(
        default=None, description="The workers' image by digest in the registry; None: build on this host."
    )
    max_unavailable: int = Field(default=1, description="Workers drained at once for replacement.")
    drain_timeout_s: int = Field(default=steps.DRAIN_TIMEOUT_S, description="How long a drain waits for jobs.")
    job_checks: list[pulumi.Resource] = Field(
        default_factory=list,
        description="The steps that install this node's prolog/epilog (components/slurm/job_checks.py).",
    )
    health: render_health.Health = Field(
        default_factory=render_health.Health, description="The node health check (slurm.conf's, the same)."
    )


class GpuWorker(pulumi.ComponentResource):
    TYPE = "hpc:compute:GpuWorker"
    """One slurmd node.

    Children: ``<name>-sysctl`` (kernel limits from RAM), ``<name>-gpu-preflight`` (driver branch
    and GPU count), ``<name>-munge-key-file`` (the key on this host's disk), the macvlan network,
    the image, ``<name>-drain`` (on the head, before the container is replaced), the container,
    ``<name>-resume`` (on the head, after). Nothing here
    depends on sibling workers: only on this host, the storage contract and the head."""

    container: docker.Container
    """The slurmd container."""
    resume: pulumi.Resource
    """The step that returns the node to service after its container (what follows the node waits on it)."""

    def __init__(self, name: str, args: GpuWorkerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(self.TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        host = args.ssh.name
        hw = args.hardware
        sysctl = remote.run(
            f"{name}-sysctl", args.ssh, steps.sysctl(host, steps.KernelTuning.for_profile(hw)), opts=child
        )
        checks: list[pulumi.Resource] = []
        if args.gpu_indexes and hw.gpus is not None:  # every GPU of the box, whoever owns it
            checks.append(remote.run(f"{name}-gpu-preflight", args.ssh, steps.gpu_preflight(host, hw.gpus.count),
                                     opts=child))  # fmt: skip
        health = remote.run(
            f"{name}-health-check",
            args.ssh,
            steps.health_check(
                host,
                render_health.program(host, hw, len(args.gpu_indexes), args.health, (render.SPOOL_DIR, "/tmp")),
            ),
            opts=child,
        )
        munge = munge_key_step(f"{name}-munge-key-file", args.ssh, args.network_storage, args.munge_key, self)
        directory, directory_volumes = directory_step(
            f"{name}-directory", args.ssh, args.directory, args.directory_password, self
        )
        network = macvlan_network(f"{name}-macvlan", args.docker, self)
        if args.image is not None:  # built once on the head, pushed; pulled here by digest
            image_name: pulumi.Output[str] = pulled_image(f"{name}-image", args.image, args.docker, self).repo_digest
        else:
            image_name = slurm_image(f"{name}-image", "worker", args.docker, self).image_name
        devices = [
            docker.ContainerDeviceArgs(host_path=d, container_path=d, permissions="rwm")
            for d in (*(f"/dev/nvidia{i}" for i in args.gpu_indexes), *EXTRA_NVIDIA_DEVICES)
            if args.gpu_indexes
        ]
        devices.append(docker.ContainerDeviceArgs(host_path=FUSE_DEVICE, container_path=FUSE_DEVICE, permissions="rwm"))
        if args.gpu_indexes:
            # The health check reads XIDs from the kernel log. Docker's seccomp profile refuses
            # syslog(2), so dmesg reads /dev/kmsg: read only, and under kernel.dmesg_restrict only
            # a process with CAP_SYSLOG may open it (slurmd's root, never a job's user).
            kmsg = docker.ContainerDeviceArgs(host_path="/dev/kmsg", container_path="/dev/kmsg", permissions="r")
            devices.append(kmsg)
        shared = args.network_storage.apply(
            lambda ns: [
                MUNGE_VOLUME,
                ACCOUNTS_VOLUME,
                docker.ContainerVolumeArgs(host_path=f"{ns.local_mount}/home", container_path="/home"),
                docker.ContainerVolumeArgs(
                    host_path=render_health.HEALTH_DIR, container_path=render_health.HEALTH_DIR, read_only=True
                ),
                *directory_volumes,
            ]
        )
        spec: dict[str, Any] = {
            "name": steps.WORKER_CONTAINER,
            "image": image_name,
            "hostname": host,
            "command": ["worker"],
            "envs": [
                f"SLURM_CONF_SERVER={args.head_address}:{render.SLURMCTLD_PORT}",
                *(nvidia_env(args.gpu_indexes) if args.gpu_indexes else []),
            ],
            "hosts": [docker.ContainerHostArgs(host=args.head_name, ip=args.head_address)],
            "networks_advanced": [
                docker.ContainerNetworksAdvancedArgs(name=network.name, ipv4_address=args.container_address)
            ],
            "devices": devices,
            # The host's NVIDIA runtime adds the driver's libraries and nvidia-smi for these GPUs;
            # the devices above stay listed, so the cgroup rules slurmd confines jobs with see them.
            **({"runtime": NVIDIA_RUNTIME} if args.gpu_indexes else {}),
            "volumes": shared,
            **job_limits(hw.memory_mib),
            # The privileges slurmd keeps, each proven needed on real Slurm (tests/integration/test_slurm.py):
            # CAP_SYS_ADMIN (without it no job step starts: "Slurmd could not execve job"), CAP_SYS_NICE (a
            # user's job fails: "task_g_set_affinity: Operation not permitted") and a writable
            # cgroup tree of its own (without it proctrack/cgroup fails to load). No host cgroup tree
            # is bound in: in a private cgroup namespace Docker mounts the container's own cgroup,
            # read-only, and the entrypoint makes it writable with that CAP_SYS_ADMIN, so slurmd's job
            # cgroups (cgroup v1 or v2) live inside the container's and Docker's limits hold them
            # (with the host's tree bound in, cgroup v2's slurmd would make its scope in the host's
            # system.slice). policy/trust.py allows these for this container only.
            "cgroupns_mode": "private",
            # CAP_SYSLOG on GPU nodes: the health check reads XIDs from /dev/kmsg (without it, on the
            # real kernel: "dmesg: read kernel buffer failed: Operation not permitted").
            "capabilities": docker.ContainerCapabilitiesArgs(
                adds=["SYS_ADMIN", "SYS_NICE", *(["SYSLOG"] if args.gpu_indexes else [])]
            ),
            "restart": "unless-stopped",
            "stop_timeout": steps.CONTAINER_STOP_TIMEOUT_S,
            "must_run": True,
        }
        # Any change of the container's spec replaces it; the drain and resume steps carry a
        # fingerprint of the whole spec, so they are replaced (re-run) together with it.
        replacement_key = fingerprint(spec)
        after_head = [args.head_container] if args.head_container is not None else []
        drain = remote.run_with_triggers(
            f"{name}-drain",
            args.head_ssh,
            steps.drain(args.head_name, host, args.max_unavailable, args.drain_timeout_s),
            [replacement_key],
            opts=pulumi.ResourceOptions(parent=self, depends_on=after_head),
        )
        self.container = docker.Container(
            f"{name}-container",
            docker.ContainerArgs(**spec),
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.docker.provider,
                depends_on=[args.host_mount, sysctl, *checks, health, *args.job_checks, munge, *directory, drain],
            ),
        )
        self.resume = remote.run_with_triggers(
            f"{name}-resume",
            args.head_ssh,
            steps.resume(args.head_name, host),
            [replacement_key],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.container, *after_head]),
        )
        self.register_outputs({"container": self.container.id})


class CpuWorker(GpuWorker):
    """A CPU-only slurmd node (a Raspberry Pi, the CPU-only profile): no GPU preflight, no GPU
    devices, no GRES; the workers' image and everything else as a GPU worker."""

    TYPE = "hpc:compute:CpuWorker"
