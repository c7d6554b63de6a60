#@ glusterfs-server (skipped when present) and the glusterq helper (stdin); glusterd enabled and up.
hpc_install glusterfs-server attr python3
hpc_put_file @glusterq@ 0755 0:0
hpc_service_up glusterd
hpc_wait @timeout@ "glusterd to answer" gluster --mode=script pool list
