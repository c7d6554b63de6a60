# shellcheck shell=bash
# Packages the Slurm images take from outside their base's suite, pinned by version and SHA-256
# (one place; fetch-pinned.sh downloads and checks them). Apptainer is in Debian unstable only
# (not in Debian 13): the .deb is fetched from the mirror's pool and installed on trixie, whose
# packages satisfy its dependencies. Moving a pin: take Version and SHA256 from the suite's
# Packages index (dists/sid/main/binary-<arch>/Packages.xz) for both architectures.
# shellcheck disable=SC2034  # read by fetch-pinned.sh
APPTAINER_VERSION=1.4.5-2
APPTAINER_POOL=pool/main/a/apptainer
APPTAINER_SHA256_amd64=26cf96e08fccb0e50ea0f285a5a19f940ee873d167a0680584fe6eba7d197d65
APPTAINER_SHA256_arm64=77c6645e6a51630fd9ce61faab09e415b02d0073bd62e1e029ca21e2a422aff6
