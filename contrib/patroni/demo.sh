#!/usr/bin/env bash
# A one-host demo of kvb on a PostgreSQL high-availability cluster: etcd and two Patroni nodes
# (node1.yml, node2.yml beside this script), one primary and one synchronous standby, on local
# ports BASE..BASE+21 (default 15500): etcd BASE and BASE+1, Patroni's REST API BASE+10 and
# BASE+11, PostgreSQL BASE+20 and BASE+21. Runs everything as the postgres user (Patroni and
# PostgreSQL refuse root). Waits until the primary takes writes and the standby is synchronous,
# then prints, for the shell:
#   KVB_DB='postgres://postgres:…@127.0.0.1:P1,127.0.0.1:P2/postgres?target_session_attrs=read-write&connect_timeout=2'
#   KVB_DEMO_DIR=/tmp/kvb-patroni.XXXXXX     ("$KVB_DEMO_DIR/stop" stops it all and removes the directory)
# Usage: contrib/patroni/demo.sh [BASE_PORT]
# Needs (Debian): patroni etcd-server postgresql (any version; the newest installed is used).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
base="${1:-15500}"
etcd_client=$base etcd_peer=$((base + 1))
rest=($((base + 10)) $((base + 11)))
pgport=($((base + 20)) $((base + 21)))
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$bin" ] || { echo "demo.sh: no PostgreSQL under /usr/lib/postgresql (Debian: postgresql)" >&2; exit 1; }
export PATH="$bin:$PATH"
for cmd in patroni etcd; do
  command -v "$cmd" >/dev/null || { echo "demo.sh: $cmd is not installed (Debian: patroni etcd-server)" >&2; exit 1; }
done
for port in "$etcd_client" "$etcd_peer" "${rest[@]}" "${pgport[@]}"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "demo.sh: port $port is already in use (another demo? stop it with its KVB_DEMO_DIR/stop, or pass another BASE_PORT)" >&2
    exit 1
  fi
done

dir="$(mktemp -d /tmp/kvb-patroni.XXXXXX)"
chmod 755 "$dir"
mkdir -p "$dir/c" "$dir/d" "$dir/r"
superuser_password="$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')"
replication_password="$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')"
# As root, every daemon runs as postgres; as any other user, as that user.
as_user=()
if [ "$(id -u)" = 0 ]; then
  as_user=(setpriv --reuid=postgres --regid=postgres --init-groups)
fi
daemon() { # name, command...: in the background, in its own session, logging to DIR/name.log
  local name=$1
  shift
  setsid "${as_user[@]}" env HOME="$dir" XDG_CONFIG_HOME="$dir/c" XDG_DATA_HOME="$dir/d" XDG_RUNTIME_DIR="$dir/r" PATH="$PATH" \
    "$@" >"$dir/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/$name.pid"
}

cat >"$dir/stop" <<STOP
#!/usr/bin/env bash
# Stops this demo (Patroni first, then anything it left, then etcd) and removes its directory.
dir=$dir
for name in patroni1 patroni2; do [ -f "\$dir/\$name.pid" ] && kill "\$(cat "\$dir/\$name.pid")" 2>/dev/null; done
for _ in \$(seq 1 100); do
  alive=0
  for name in patroni1 patroni2; do [ -f "\$dir/\$name.pid" ] && kill -0 "\$(cat "\$dir/\$name.pid")" 2>/dev/null && alive=1; done
  [ \$alive = 0 ] && break
  sleep 0.1
done
for data in "\$dir/node1" "\$dir/node2"; do
  [ -f "\$data/postmaster.pid" ] && kill -9 "\$(head -n 1 "\$data/postmaster.pid")" 2>/dev/null
done
for name in patroni1 patroni2; do [ -f "\$dir/\$name.pid" ] && kill -9 "\$(cat "\$dir/\$name.pid")" 2>/dev/null; done
[ -f "\$dir/etcd.pid" ] && kill "\$(cat "\$dir/etcd.pid")" 2>/dev/null
sleep 0.5
rm -rf "\$dir"
STOP
chmod 755 "$dir/stop"
trap 'status=$?; if [ $status != 0 ]; then echo "demo.sh: failed; logs:" >&2; tail -n 30 "$dir"/*.log >&2 || true; "$dir/stop"; fi' EXIT

# The node files as shipped, with this host's ports and paths in place of their placeholders.
for i in 1 2; do
  sed -e "s|{{DIR}}|$dir|g" -e "s|{{PG_BIN}}|$bin|g" -e "s|{{ETCD_PORT}}|$etcd_client|g" \
    -e "s|{{REST_PORT_$i}}|${rest[$((i - 1))]}|g" -e "s|{{PG_PORT_$i}}|${pgport[$((i - 1))]}|g" \
    -e "s|{{SUPERUSER_PASSWORD}}|$superuser_password|g" -e "s|{{REPLICATION_PASSWORD}}|$replication_password|g" \
    "$here/node$i.yml" >"$dir/node$i.yml"
  if grep -q '{{' "$dir/node$i.yml"; then echo "demo.sh: node$i.yml has a placeholder demo.sh does not fill" >&2; exit 1; fi
done
chmod 600 "$dir"/node*.yml
[ "$(id -u)" = 0 ] && chown -R postgres:postgres "$dir"

# etcd: one member, for the demo (production: three, on three machines).
daemon etcd etcd --name e1 --data-dir "$dir/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_client" --advertise-client-urls "http://127.0.0.1:$etcd_client" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
  --initial-cluster "e1=http://127.0.0.1:$etcd_peer"

http_ok() { curl -fsS -o /dev/null --max-time 2 "$1" 2>/dev/null; }
wait_for() { # what, seconds, command...
  local what=$1 seconds=$2
  shift 2
  for _ in $(seq 1 $((seconds * 5))); do "$@" && return 0; sleep 0.2; done
  echo "demo.sh: $what not within ${seconds}s" >&2
  return 1
}
wait_for "etcd" 30 http_ok "http://127.0.0.1:$etcd_client/health"
# The first node bootstraps alone, so it becomes the primary; the second then clones it.
daemon patroni1 patroni "$dir/node1.yml"
wait_for "node1 as primary" 60 http_ok "http://127.0.0.1:${rest[0]}/primary"
daemon patroni2 patroni "$dir/node2.yml"
wait_for "node2 as synchronous standby" 90 http_ok "http://127.0.0.1:${rest[1]}/sync"

echo "KVB_DB='postgres://postgres:$superuser_password@127.0.0.1:${pgport[0]},127.0.0.1:${pgport[1]}/postgres?target_session_attrs=read-write&connect_timeout=2'"
echo "KVB_DEMO_DIR=$dir"
