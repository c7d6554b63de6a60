"""``make images``: build every image the real-daemon suites run into the per-user image cache,
once per run, before any suite starts (``python -m tests.integration.images``).

The suites load these tarballs (``docker_lab.Builder.image`` builds only on a miss), so no suite
waits on another's build, and a slow cold build (the FastChat image's pip install) runs here,
where its progress is printed line by line, not inside a test's time limit. The images come from
the plans' own records: the Slurm suite's test stack (head, worker, login) and the prod stack's
FastChat image; a record of the same name and context hash is the same image.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from offline import plan
from offline.mocks import plain
from offline.plan import Record
from tests.integration import docker_lab

IMAGE = "docker:index/image:Image"


def suite_images() -> dict[str, Record]:
    """Each distinct image the suites build, by its cache name."""
    from tests.integration.test_slurm import stack  # the Slurm suite's own test stack

    records = [*plan.run("dev", stack(2)).of_type(IMAGE), *plan.run("prod").of_type(IMAGE)]
    by_name: dict[str, Record] = {}
    for r in records:
        if plain(r.inputs)["build"].get("platform") == "linux/amd64":
            by_name.setdefault(docker_lab.local_name(r), r)
    return dict(sorted(by_name.items()))


def main() -> int:
    images = suite_images()
    print(f"make images: {len(images)} images into {docker_lab.CACHE}: {', '.join(images)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="hpc-images-") as work:
        builder = docker_lab.Builder(Path(work), progress=lambda line: print(f"  | {line}", flush=True))
        try:
            for name, record in images.items():
                started = time.monotonic()
                hit = docker_lab.cached_tar(record).exists()
                tar = builder.image(record)
                how = "cached" if hit else f"built in {time.monotonic() - started:.0f} s"
                print(f"make images: {name}: {how}, {tar.stat().st_size / 2**20:.0f} MiB", flush=True)
        finally:
            builder.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
