#!/usr/bin/env bash
# scripts/test.sh — the whole test suite against real services:
# brings up MariaDB, PostgreSQL and Kafka (scripts/services.sh, idempotent), then runs
# `cargo test` (unit tests, the offline binlog decoder on ../shared/fixtures, and the
# end-to-end suites through the real outboxd binary). Extra arguments go to `cargo test`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
eval "$(bash scripts/services.sh up)"
# --no-fail-fast: one failing test binary must not hide the results of the others.
cargo test --no-fail-fast "$@"
