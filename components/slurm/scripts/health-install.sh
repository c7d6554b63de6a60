#@ The node health check slurmd runs (HealthCheckProgram), on this host's own disk (content on
#@ stdin), mounted read-only at the same path in the worker container.
hpc_put_file @file@ 0755 0:0
