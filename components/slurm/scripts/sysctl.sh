#@ Kernel limits derived from the node's memory (content on stdin).
hpc_put_file @file@ 0644 0:0
if hpc_file_changed; then
  sysctl -q -p @file@
  hpc_changed "applied @file@"
fi
