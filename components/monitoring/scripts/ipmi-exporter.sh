#@ The IPMI exporter on a host with a BMC: its own system user, allowed to open the BMC device
#@ (udev rule, and the device now when it exists), and a config with every collector an alert
#@ reads (DCMI power); restarted when any of it changed.
getent group @user@ >/dev/null || { groupadd --system @user@; hpc_changed "added group @user@"; }
if ! id -u @user@ >/dev/null 2>&1; then
  useradd --system --gid @user@ --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin @user@
  hpc_changed "added user @user@"
fi
ipmi_changed=0
@files@
gid=$(getent group @user@ | cut -d: -f3)
for dev in /dev/ipmi[0-9]*; do
  [ -e "$dev" ] || continue
  hpc_fix_mode "$dev" 0660 "0:$gid"
done
if [ "$ipmi_changed" = 1 ]; then
  systemctl daemon-reload
  if systemctl is-active --quiet prometheus-ipmi-exporter; then
    systemctl restart prometheus-ipmi-exporter
    hpc_changed "restarted the IPMI exporter (its config changed)"
  fi
fi
