#!/bin/sh
# Checks deploy/systemd/inflight.service with `systemd-analyze verify`, its
# ExecStart pointed at the built binary (verify needs it to exist). A warning
# (an unknown key, a value systemd ignores) fails the test as an error does.
#   systemd_unit_verifies.sh UNIT INFLIGHT_BINARY
set -eu
unit=$1
binary=$2
command -v systemd-analyze >/dev/null ||
  { echo "systemd-analyze not found: scripts/setup installs it (package systemd)" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed "s|/usr/local/bin/inflight|$binary|" "$unit" > "$dir/inflight.service"
grep -q "ExecStart=$binary serve" "$dir/inflight.service" ||
  { echo "ExecStart does not run /usr/local/bin/inflight serve" >&2; exit 1; }
if ! said=$(systemd-analyze verify --man=no "$dir/inflight.service" 2>&1) || [ -n "$said" ]; then
  echo "$said" >&2
  exit 1
fi
