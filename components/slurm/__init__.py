"""Slurm tier: configless slurmctld/slurmdbd on the head and slurmd on GPU workers."""
