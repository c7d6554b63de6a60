# Slurm login node for hpc-cluster: users SSH in with their keys and submit jobs. Slurm client
# tools configured by sackd from the configless controller; munge; sshd with keys only, no root,
# no passwords. Debian 13's Slurm 24.11; base pinned by tag and digest (see images/README.md).
FROM debian:trixie-slim@sha256:d7e12182ce18b85b93007c1dedf31f2d29e01ccf3182cc4017c709b6259bc132 AS fetch
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends curl=8.* ca-certificates=2025* \
 && rm -rf /var/lib/apt/lists/*
# Apptainer from its pinned .deb (pins.sh: version and SHA-256; a site's mirror via DEBIAN_MIRROR).
ARG DEBIAN_MIRROR=""
COPY pins.sh fetch-pinned.sh /src/
RUN mkdir -p /out/debs && DEBIAN_MIRROR="$DEBIAN_MIRROR" /src/fetch-pinned.sh apptainer /out/debs

FROM debian:trixie-slim@sha256:d7e12182ce18b85b93007c1dedf31f2d29e01ccf3182cc4017c709b6259bc132

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG DEBIAN_FRONTEND=noninteractive

# Fixed service ids (components/accounts.py); the cluster's users come from the host (NSS
# extrausers: /var/lib/extrausers, mounted read-only), with the same ids everywhere; with an
# external directory (hpc:identity.ldap) also from SSSD, after them (files extrausers sss), and
# their homes are made at first login (pam_mkhomedir, 0700; PAM is on only then).
RUN groupadd --system --gid 991 munge \
 && useradd --system --uid 991 --gid munge --home-dir /nonexistent --shell /usr/sbin/nologin munge \
 && groupadd --system --gid 64030 slurm \
 && useradd --system --uid 64030 --gid slurm --home-dir /nonexistent --shell /usr/sbin/nologin slurm

# Users build here: OpenMPI 5 with its compiler wrappers (mpicc) and gcc/make; the programs run on
# the workers, which carry the same OpenMPI libraries. Apptainer builds a user's image (a SIF)
# from a directory, unprivileged; the jobs run it on the workers.
COPY --from=fetch /out/debs/ /tmp/debs/
COPY apptainer-setup.sh /tmp/
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libnss-extrausers=0.6* sssd-ldap=2.* libnss-sss=2.* libpam-sss=2.* \
      tini=0.19.* munge=0.5.* sackd=24.11.* slurm-client=24.11.* openssh-server=1:10.0p1* \
      openmpi-bin=5.0.* libopenmpi-dev=5.0.* gcc=4:14.* libc6-dev=2.41* make=4.* \
      /tmp/debs/apptainer_*.deb squashfuse=0.5.* \
 && /tmp/apptainer-setup.sh \
 && rm -rf /var/lib/apt/lists/* /tmp/debs /tmp/apptainer-setup.sh /etc/ssh/ssh_host_* \
 && sed -Ei 's/^(passwd|group):.*$/\1: files extrausers sss/; s/^shadow:.*$/shadow: files extrausers/' /etc/nsswitch.conf \
 && echo 'session optional pam_mkhomedir.so umask=0077' >> /etc/pam.d/sshd

COPY sshd-login.conf /etc/ssh/sshd_config.d/10-hpc-cluster.conf
COPY entrypoint.sh /usr/local/sbin/hpc-entrypoint

# The host keys live on the host (a volume), so replacing the container keeps them.
VOLUME ["/var/lib/hpc-login/ssh"]
EXPOSE 22
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
  CMD ["/usr/local/sbin/hpc-entrypoint", "health"]
# tini reaps and hands docker stop's SIGTERM to the entrypoint, which stops the daemons in order.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/sbin/hpc-entrypoint"]
CMD ["login"]
