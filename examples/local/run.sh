#!/usr/bin/env bash
# Until the simulated fabric exists: Debian's snmpd on 127.0.0.1:16161 and the collector polling it.
# Metrics on http://127.0.0.1:9464/metrics, the archive in ./archive. Ctrl-C stops both.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
state=$(mktemp -d)
SNMP_PERSISTENT_DIR="$state" /usr/sbin/snmpd -f -Lf "$state/snmpd.log" -C -c "$here/snmpd.conf" -p "$state/snmpd.pid" &
snmpd_pid=$!
trap 'kill "$snmpd_pid" 2>/dev/null; rm -rf "$state"' EXIT
cd "$here"
spanwatch collect --config spanwatch.yaml "$@"
