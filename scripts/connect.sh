#!/usr/bin/env bash
# scripts/connect.sh — the Kafka Connect + Debezium classpaths the Debezium-based tests and the
# benchmark run (benches/peers/README.md says what is in them and why).
#
#   scripts/connect.sh resolve    resolve from Maven Central into .state/connect/libs
#                                 (Debezium 3.6.1 PostgreSQL, Connect 4.1.1) and
#                                 .state/connect/libs-mariadb (Debezium 3.5.0 MariaDB), once per
#                                 change of benches/peers/pom.xml; idempotent; and
#                                 kafka-connect-py into .state/connect/kc (a virtualenv)
#
# Needs Java 17 and Maven (mvn) on the PATH. Progress goes to stderr.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '[connect] %s\n' "$*" >&2; }

resolve() { # resolve PROFILE DIR
  local profile="$1" dir="$2" hash
  hash="$(sha256sum benches/peers/pom.xml | cut -c1-16)"
  if [[ -f "$dir/.resolved-$hash" ]]; then
    return 0
  fi
  log "resolving Kafka Connect + Debezium ($profile) from Maven Central into $dir"
  rm -rf "$dir"
  mkdir -p "$dir"
  # Even quiet and in batch mode, Maven prints colour resets; its output goes to a log,
  # shown only when it fails.
  if ! mvn -q -B -Dstyle.color=never -f benches/peers/pom.xml -P "$profile" \
    dependency:copy-dependencies -DoutputDirectory="$dir" -DincludeScope=runtime \
    > "$dir.mvn.log" 2>&1; then
    cat "$dir.mvn.log" >&2
    log "Maven could not resolve Kafka Connect + Debezium ($profile); log above"
    exit 1
  fi
  touch "$dir/.resolved-$hash"
}

# kafka-connect-py (PyPI), the Connect REST client tests/connect_rest.rs drives real Kafka
# Connect and outboxd with, in a virtualenv of its own; once per version.
KC_VERSION=1.0.0
kafka_connect_py() { # kafka_connect_py DIR
  local dir="$1"
  if [[ -f "$dir/.installed-$KC_VERSION" ]]; then
    return 0
  fi
  log "installing kafka-connect-py $KC_VERSION from PyPI into $dir"
  rm -rf "$dir"
  if ! { python3 -m venv "$dir" && "$dir/bin/pip" install -q "kafka-connect-py==$KC_VERSION"; } \
    > "$dir.pip.log" 2>&1; then
    cat "$dir.pip.log" >&2
    log "could not install kafka-connect-py; log above"
    exit 1
  fi
  touch "$dir/.installed-$KC_VERSION"
}

case "${1:-}" in
  resolve)
    resolve postgres "$ROOT/.state/connect/libs"
    resolve mariadb "$ROOT/.state/connect/libs-mariadb"
    kafka_connect_py "$ROOT/.state/connect/kc"
    ;;
  *)
    echo "usage: scripts/connect.sh resolve" >&2
    exit 2
    ;;
esac
