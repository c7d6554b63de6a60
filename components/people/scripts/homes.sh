#@ Each user's home on the shared volume: created once, owned by them, 0700; never deleted.
[ -d @home_root@ ] || hpc_fail "@home_text@ is missing: is the shared volume mounted?"
@homes@
