#@ Copy the image Docker built on the k3s server into k3s's containerd (no registry needed).
if ! grep -qxF "docker.io/@image@" <<<"$(k3s ctr images ls -q)"; then
  docker save "@image@" | k3s ctr images import - >/dev/null
  hpc_changed "imported @image@ into k3s"
fi
