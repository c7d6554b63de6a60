"""Monitoring: Prometheus and Alertmanager on the Slurm head, exporters on every host."""
