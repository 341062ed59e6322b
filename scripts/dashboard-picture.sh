#!/usr/bin/env bash
# scripts/dashboard-picture.sh — the README's dashboard picture from a real run:
#
#   1. brings up MariaDB + Kafka (scripts/services.sh) and builds outboxd (debug build);
#   2. runs one exactly-once connector on a fresh database with /metrics, scraping it every
#      second into .state/dashboard/samples.txt;
#   3. writes ~100 outbox events/s for 40 s, stays quiet for 20 s, writes again for 60 s
#      with Kafka stopped for 25 s in the middle (scripts/services.sh stop/start kafka),
#      then stays quiet for 30 s;
#   4. draws six panels of docker/grafana/dashboards/outboxd.json from the samples with
#      plotters (cargo run --example dashboard_picture) into docker/grafana/dashboard.png.
#
# There is no Grafana on the project's machines: the picture is the dashboard's queries
# evaluated on the scraped samples, not a screenshot. Takes ~3 minutes once built.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${1:-docker/grafana/dashboard.png}"
DIR="$ROOT/.state/dashboard"
mkdir -p "$DIR"

eval "$(bash scripts/services.sh up mariadb kafka)"
cargo build --quiet
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/outboxd"

url="$OUTBOXD_TEST_MYSQL_ADMIN_URL"      # mysql://user:password@host:port
hostport="${url##*@}"
HOST="${hostport%:*}"
PORT="${hostport##*:}"
DB="dashdemo_$(date +%s)"
NAME="$DB"
sql() { mariadb -h "$HOST" -P "$PORT" -u outboxd_admin -padmin-secret --batch --skip-column-names "$@"; }
sql -e "CREATE DATABASE $DB CHARACTER SET utf8mb4"
sql "$DB" < migrations/mysql/001_outbox.sql
trap 'sql -e "DROP DATABASE IF EXISTS $DB" || true' EXIT

METRICS_PORT=$((39300 + ${OUTBOXD_SERVICES_PORT_OFFSET:-0} % 1000))
cat > "$DIR/connector.toml" <<EOF
[metrics]
listen = "127.0.0.1:$METRICS_PORT"

[[connectors]]
name = "$NAME"
tables = ["$DB.outbox_events"]

[connectors.source]
kind = "mariadb"
host = "$HOST"
port = $PORT
user = "outboxd"
password = "outboxd-secret"
server_id = $((400000 + RANDOM))
heartbeat_interval = "2s"

[connectors.router]
"route.topic.replacement" = "$DB.\${routedByValue}"

[connectors.kafka]
bootstrap_servers = "$OUTBOXD_KAFKA_BOOTSTRAP"
EOF

SAMPLES="$DIR/samples.txt"
: > "$SAMPLES"
"$BIN" run --config "$DIR/connector.toml" > "$DIR/outboxd.log" 2>&1 &
RELAY=$!
trap 'kill -TERM $RELAY 2>/dev/null || true; bash scripts/services.sh up kafka >/dev/null 2>&1 || true; sql -e "DROP DATABASE IF EXISTS $DB" || true' EXIT
( while kill -0 $RELAY 2>/dev/null; do
    echo "# t=$(date +%s%3N)"
    curl -fs "http://127.0.0.1:$METRICS_PORT/metrics" || true
    sleep 1
  done ) >> "$SAMPLES" &
SAMPLER=$!
mark() { echo "# mark $1" >> "$SAMPLES"; echo "[dashboard] $1" >&2; }

# ~100 events/s: five transactions of 20 outbox rows a second, for $1 seconds.
write_for() {
  local end=$(( $(date +%s) + $1 )) n=0
  while (( $(date +%s) < end )); do
    for _ in 1 2 3 4 5; do
      values=""
      for i in $(seq 1 20); do
        n=$((n + 1))
        values+="${values:+,}('Order', 'order-$((n % 50))', 'OrderCreated', '{\"n\":$n}')"
      done
      echo "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload) VALUES $values;"
    done | sql "$DB"
    sleep 0.8
  done
}

sleep 10
mark writing
write_for 40
mark quiet
sleep 20
mark writing
write_for 15
mark kafka-stopped
bash scripts/services.sh stop kafka >/dev/null
write_for 25
mark kafka-started
bash scripts/services.sh up kafka >/dev/null
write_for 20
mark quiet
sleep 30
kill -TERM $RELAY
wait $RELAY || true
wait $SAMPLER || true
cargo run --quiet --example dashboard_picture -- "$SAMPLES" "$NAME" "$OUT"
