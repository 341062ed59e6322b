#!/usr/bin/env bash
# scripts/bench.sh — outboxd vs Debezium on Kafka Connect, one command (benches/README.md).
#
#   scripts/bench.sh [full|smoke|failover|faults|sinks] [ARGS...]
#
#   full (default)  the full run; results go to benches/results/e2e.{md,json,png}
#   smoke           a tiny run of every scenario and peer (CI), and of the sink lanes; results
#                   go to .state/bench-smoke/
#   failover        three members of a group, their owners killed, frozen and stopped in turn;
#                   results go to benches/results/failover.{md,json} (--rounds N, --out DIR)
#   faults          the broker frozen and killed, the databases stopped, while both sources
#                   deliver: time from a fault's end to delivery again; results go to
#                   benches/results/faults.{md,json} (--rounds N, --outage S, --out DIR)
#   sinks           backlog drains into NATS JetStream, Redis Streams and RabbitMQ; results go
#                   to benches/results/sinks.{md,json} (--events N, --payload B, --sinks ...)
#   ARGS            passed to the harness, e.g. --sources postgres --peers outboxd,debezium
#                   (`scripts/bench.sh full --help` lists them)
#
# It starts the services (scripts/services.sh up), resolves Kafka Connect + Debezium from
# Maven Central into .state/connect/libs{,-mariadb} once per change of benches/peers/pom.xml,
# installs the chart's font if missing, builds, and runs `cargo bench --bench e2e`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

mode="${1:-full}"
case "$mode" in
  full | smoke | failover | faults | sinks) shift || true ;;
  -*) mode=full ;;
  *) echo "usage: scripts/bench.sh [full|smoke|failover|faults|sinks] [ARGS...]" >&2; exit 2 ;;
esac

log() { printf '[bench] %s\n' "$*" >&2; }

# One run at a time: two would share two cores and each other's figures. The harness also
# cleans up at start what a killed run left (its databases, slots, topics, peer processes).
mkdir -p "$ROOT/.state"
exec 9>"$ROOT/.state/bench.lock"
flock -n 9 || { log "another scripts/bench.sh is running (lock: .state/bench.lock)"; exit 1; }

# --- services --------------------------------------------------------------------------
eval "$(bash scripts/services.sh up)"

if [[ "$mode" == failover || "$mode" == faults ]]; then
  exec cargo bench --bench "$mode" -- "$@"
fi
if [[ "$mode" == sinks ]]; then
  exec cargo bench --bench sinks -- --command-label "scripts/bench.sh sinks $*" "$@"
fi

# --- Kafka Connect + Debezium classpath ------------------------------------------------
# Two flat classpaths: Debezium 3.6.1 PostgreSQL (default profile) and 3.5.0 MariaDB (profile
# mariadb); see benches/peers/README.md for why.
bash scripts/connect.sh resolve

# --- the chart's font (Debian fonts-dejavu-core) ----------------------------------------
if [[ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]]; then
  log "installing fonts-dejavu-core (for benches/results/e2e.png)"
  if [[ $(id -u) -eq 0 ]]; then
    apt-get install -y -q fonts-dejavu-core >&2 || { apt-get update -q >&2 && apt-get install -y -q fonts-dejavu-core >&2; }
  else
    sudo apt-get install -y -q fonts-dejavu-core >&2
  fi
fi

# --- run -------------------------------------------------------------------------------
args=(--command-label "$(echo "scripts/bench.sh $mode $*" | sed 's/ *$//')")
if [[ "$mode" == smoke ]]; then
  args+=(--events 2000 --warmup-events 20000 --payloads 1024,200 --rates 500 --steady-secs 3 --out .state/bench-smoke)
  cargo bench --bench e2e -- "${args[@]}" "$@"
  exec cargo bench --bench sinks -- --events 2000 --out .state/bench-smoke --command-label "scripts/bench.sh smoke"
fi
exec cargo bench --bench e2e -- "${args[@]}" "$@"
