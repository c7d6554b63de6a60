#@ Stop glusterd and remove the helper; the pool state and the bricks stay.
hpc_service_down glusterd
rm -f @glusterq@
