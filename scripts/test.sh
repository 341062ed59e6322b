#!/usr/bin/env bash
# scripts/test.sh — the whole test suite against real services:
# brings up MariaDB, PostgreSQL, Kafka and the brokers (NATS, Redis, RabbitMQ; all of
# scripts/services.sh, idempotent), resolves the Kafka Connect + Debezium classpath
# (scripts/connect.sh), then runs `cargo test`
# (unit tests, the offline binlog decoder on ../shared/fixtures, the end-to-end suites
# through the real outboxd binary, and the differential tests against real Debezium). Extra
# arguments go to `cargo test`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
eval "$(bash scripts/services.sh up)"
# Kafka Connect + Debezium from Maven Central: the oracle of the Debezium-based tests.
bash scripts/connect.sh resolve
# --no-fail-fast: one failing test binary must not hide the results of the others.
cargo test --no-fail-fast "$@"
