"""People: users and groups on every host and in every container, homes, Slurm accounting."""
