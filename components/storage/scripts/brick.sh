#@ The brick directory, and the stale stamp of a failed create cleared (gluster.sh).
hpc_mkdir @path@
gluster_clear_stale_stamp @path@
