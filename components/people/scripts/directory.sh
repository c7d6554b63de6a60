#@ The directory's CA and sssd.conf on this host (the bind password, when the directory binds,
#@ from stdin and substituted here); a change restarts the host's running Slurm containers.
@read_password@
hpc_dir @dir@ 0700 0:0
@ca@
changed=0
if hpc_file_changed; then changed=1; fi
template=$(cat <<'SSSD_CONF'
@conf@
SSSD_CONF
)
template+=$'\n'
@write@
if hpc_file_changed || [ "$changed" = 1 ]; then  # sssd reads both only at start
@restart@
fi
