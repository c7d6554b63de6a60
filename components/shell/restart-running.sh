#@ A fragment (inside an if): restart those of the containers that run, since they read what
#@ changed only at start.
  for c in @containers@; do
    if [ "$(docker inspect -f '{{.State.Running}}' "$c" 2>/dev/null)" = true ]; then
      docker restart "$c" >/dev/null
      hpc_changed "restarted $c @why@"
    fi
  done
