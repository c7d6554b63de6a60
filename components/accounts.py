"""Service accounts shared by hosts, images and the shared volume.

Files on the Gluster volume are read by containers whose users must have the same numeric ids
everywhere, so the ids are fixed here and created with these ids in the images.
"""

from __future__ import annotations

from dataclasses import dataclass

MUNGE_UID = 991
MUNGE_GID = 991
SLURM_UID = 64030  # Debian's reserved id for the slurm user
SLURM_GID = 64030
NOBODY_UID = 65534  # where Root_Squash maps a client's root
NOBODY_GID = 65534
FASTCHAT_UID = 10001  # the FastChat image's user (images/fastchat/Dockerfile)


@dataclass(frozen=True)
class SharedDir:
    """A directory at the top of the shared volume that another tier needs."""

    name: str
    mode: int
    uid: int
    gid: int

    @property
    def mode_text(self) -> str:
        return f"{self.mode:04o}"
