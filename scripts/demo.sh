#!/usr/bin/env bash
# scripts/demo.sh — the outbox relay on a demo workload, end to end:
#
#   1. brings up MariaDB + Kafka (scripts/services.sh), builds outboxd (release);
#   2. creates database `shop` with migrations/mysql/001_outbox.sql;
#   3. runs `outboxd run --config connectors/shop-mariadb.toml` in the background;
#   4. writes the seeds' order flow: per order, one transaction with the order, its items
#      and an OrderCreated outbox row; then the saga's StockReserved, PaymentCharged,
#      ShipmentCreated — and for every third order a failed shipment, compensated by
#      PaymentRefunded and StockReleased;
#   5. prints the Kafka records the relay produced for this run (partition, headers, key,
#      value),
#      stops the relay (SIGTERM: drain + final checkpoint) and shows the checkpoint.
#
# Usage: scripts/demo.sh [ORDERS]      (default 6)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ORDERS="${1:-6}"
RUN_ID="demo-$(date +%s)"

eval "$(bash scripts/services.sh up mariadb kafka)"
echo "== building outboxd (release; a first build took 12-14 min on 2 busy cores, 8-9 CPU-minutes: see README)" >&2
cargo build --release
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/outboxd"

# The services' ports follow OUTBOXD_SERVICES_PORT_OFFSET (a second checkout's own services);
# the example connector names the default ones, so with an offset the demo runs a copy of it
# with the ports moved.
OFFSET="${OUTBOXD_SERVICES_PORT_OFFSET:-0}"
MYSQL_PORT=$((33306 + OFFSET))
CONNECTOR=connectors/shop-mariadb.toml
if (( OFFSET != 0 )); then
  CONNECTOR="$ROOT/.state/demo-shop-mariadb.toml"
  # (Kafka's moved address reaches it through OUTBOXD_KAFKA_BOOTSTRAP, which beats the file.)
  sed -e "s/^port = 33306$/port = $MYSQL_PORT/" connectors/shop-mariadb.toml > "$CONNECTOR"
  grep -q "^port = $MYSQL_PORT$" "$CONNECTOR" || { echo "demo.sh: could not move the port in $CONNECTOR" >&2; exit 1; }
fi

sql() { mariadb -h 127.0.0.1 -P "$MYSQL_PORT" -u outboxd_admin -padmin-secret --batch --skip-column-names "$@"; }
sql -e "CREATE DATABASE IF NOT EXISTS shop CHARACTER SET utf8mb4"
sql shop < migrations/mysql/001_outbox.sql

echo "== outboxd check" >&2
export OUTBOXD_MYSQL_PASSWORD=outboxd-secret
"$BIN" check --config "$CONNECTOR" >&2

METRICS_PORT=$((39187 + OFFSET))
LOG="$ROOT/.state/demo-outboxd.log"
echo "== starting outboxd (log: $LOG)" >&2
"$BIN" run --config "$CONNECTOR" --metrics-listen "127.0.0.1:$METRICS_PORT" >"$LOG" 2>&1 &
RELAY=$!
trap 'kill -TERM $RELAY 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  curl -fs "http://127.0.0.1:$METRICS_PORT/ready" >/dev/null 2>&1 && break
  kill -0 $RELAY 2>/dev/null || { cat "$LOG" >&2; exit 1; }
  sleep 0.1
done

event() { # aggregate_type aggregate_id event_type payload -> one INSERT statement
  printf "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload) VALUES ('%s', '%s', '%s', '%s');\n" "$1" "$2" "$3" "$4"
}
echo "== writing $ORDERS orders and their saga events (run $RUN_ID)" >&2
EXPECTED=0
for i in $(seq 1 "$ORDERS"); do
  oid="$RUN_ID-$i"
  {
    echo "START TRANSACTION;"
    echo "INSERT INTO orders (customer_id, status, total_cents) VALUES ($((1000 + i)), 'NEW', 3499);"
    echo "SET @order = LAST_INSERT_ID();"
    echo "INSERT INTO order_items (order_id, sku, qty, price_cents) VALUES (@order, 'SKU-1', 2, 1250), (@order, 'SKU-2', 1, 999);"
    event Order "$oid" OrderCreated "{\"orderId\":\"$oid\",\"run\":\"$RUN_ID\",\"total\":\"34.99\"}"
    echo "COMMIT;"
    event Inventory "$oid" StockReserved "{\"orderId\":\"$oid\",\"run\":\"$RUN_ID\"}"
    event Payment "$oid" PaymentCharged "{\"orderId\":\"$oid\",\"run\":\"$RUN_ID\",\"amount\":\"34.99\"}"
    if (( i % 3 == 0 )); then
      # The shipment fails: the saga compensates in reverse order.
      event Payment "$oid" PaymentRefunded "{\"orderId\":\"$oid\",\"run\":\"$RUN_ID\",\"reason\":\"shipment failed\"}"
      event Inventory "$oid" StockReleased "{\"orderId\":\"$oid\",\"run\":\"$RUN_ID\"}"
    else
      event Shipment "$oid" ShipmentCreated "{\"orderId\":\"$oid\",\"run\":\"$RUN_ID\"}"
    fi
  } | sql shop
  if (( i % 3 == 0 )); then EXPECTED=$((EXPECTED + 5)); else EXPECTED=$((EXPECTED + 4)); fi
done

echo "== records in Kafka for this run (partition | headers | key | value)" >&2
# Read every outbox topic from the beginning and keep this run's records.
bash scripts/services.sh kafka-tool consumer.ConsoleConsumer --bootstrap-server "$OUTBOXD_KAFKA_BOOTSTRAP" \
  --include 'outbox\.event\..*' --from-beginning --timeout-ms 8000 --isolation-level read_committed \
  --property print.key=true --property print.headers=true \
  --property print.partition=true --property key.separator=' | ' 2>/dev/null \
  | grep -F "$RUN_ID" | tee "$ROOT/.state/demo-records.txt" || true
GOT=$(wc -l < "$ROOT/.state/demo-records.txt")
echo "== $GOT of $EXPECTED records delivered" >&2

kill -TERM $RELAY; wait $RELAY || true
trap - EXIT
echo "== checkpoint after a clean stop (Kafka store, topic outboxd.checkpoints.shop-mariadb):" >&2
"$BIN" checkpoint show --config "$CONNECTOR" >&2
[ "$GOT" -eq "$EXPECTED" ]
