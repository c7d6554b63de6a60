#@ The controller's state and the accounting database directories on the head host.
hpc_dir @state_path@ 0700 @owner@
hpc_mkdir @db_path@
