#!/usr/bin/env bash
# scripts/services.sh — the real servers outboxd's integration tests run against, on
# loopback, with all their data under $ROOT/.state/ (gitignored):
#
#   mariadb   MariaDB 10.11 (Debian package)        127.0.0.1:33306   binlog ROW + GTID
#   postgres  PostgreSQL 15 (Debian package)        127.0.0.1:35432   wal_level=logical
#   kafka     Apache Kafka 4.x, KRaft, single node  127.0.0.1:39092   (controller :39093)
#             (the broker's jars from Maven Central, run with the machine's Java 17)
#
# Usage: scripts/services.sh COMMAND [SERVICE...]     (no SERVICE = all three)
#
#   install          install what is missing (apt packages, Kafka jars); idempotent
#   up               install if needed, start what is not running, wait until ready,
#                    print the connection settings as `export VAR=...` lines (stdout)
#   down             stop (TERM or INT, then KILL after a timeout); data is kept
#   restart          down + up
#   status           which are running; exit status 3 if any is not
#   env              print the `export VAR=...` lines
#   start / stop     aliases of up / down, e.g. `stop kafka` to simulate an outage
#   kafka-start / kafka-stop   the same as `up kafka` / `down kafka`
#   kafka-tool CLASS [ARGS...] run a Kafka CLI tool from the broker's jars against the
#                    local broker, quietly (warnings only), e.g.
#                      kafka-tool TopicCommand --bootstrap-server 127.0.0.1:39092 --list
#                      kafka-tool ConsoleProducer --bootstrap-server 127.0.0.1:39092 --topic t
#                      kafka-tool consumer.ConsoleConsumer --bootstrap-server 127.0.0.1:39092 \
#                          --topic t --from-beginning --max-messages 1
#                    (CLASS without a package is looked up in org.apache.kafka.tools)
#
# Typical use:   eval "$(scripts/services.sh up)"
# Only the export lines go to stdout; progress and errors go to stderr.
#
# The server configs are the files in docker/ that docker/docker-compose.yml mounts; this
# script only overrides host-specific settings (ports, loopback, paths) on top of them.
#
# Environment:
#   OUTBOXD_SERVICES_TIMEOUT       seconds to wait for a service to get ready (default 120)
#   OUTBOXD_SERVICES_PORT_OFFSET   added to every port above (default 0), for a second
#                                  checkout's own services beside these
set -euo pipefail

# --- layout ----------------------------------------------------------------------------
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="$ROOT/.state"
DOCKER_DIR="$ROOT/docker"
KAFKA_POM="$ROOT/scripts/kafka/pom.xml"
KAFKA_LOG4J="$ROOT/scripts/kafka/log4j2.properties"
KAFKA_TOOLS_LOG4J="$ROOT/scripts/kafka/log4j2-tools.properties"

ALL_SERVICES=(mariadb postgres kafka)

# OUTBOXD_SERVICES_PORT_OFFSET moves every port by that much, so a second checkout (a git
# worktree, say) can run its own services beside these without touching them.
PORT_OFFSET="${OUTBOXD_SERVICES_PORT_OFFSET:-0}"
[[ "$PORT_OFFSET" =~ ^[0-9]+$ ]] && (( PORT_OFFSET < 20000 )) \
  || { printf '[services] error: OUTBOXD_SERVICES_PORT_OFFSET=%s is not a number below 20000\n' "$PORT_OFFSET" >&2; exit 2; }
MARIADB_PORT=$((33306 + PORT_OFFSET))
PG_PORT=$((35432 + PORT_OFFSET))
KAFKA_PORT=$((39092 + PORT_OFFSET))
KAFKA_CONTROLLER_PORT=$((39093 + PORT_OFFSET))

PG_BIN=/usr/lib/postgresql/15/bin      # /usr/local/bin/postgres may be a symlink/wrapper
PG_OS_USER=postgres                    # postgres refuses to run as root

# The fixed test credentials (also in docker/*/init.sql). Nothing else is secret here.
ADMIN_USER=outboxd_admin
ADMIN_PASSWORD=admin-secret
RELAY_USER=outboxd
RELAY_PASSWORD=outboxd-secret
PG_DATABASE=outboxd

KAFKA_HEAP=(-Xms256m -Xmx768m)
TIMEOUT="${OUTBOXD_SERVICES_TIMEOUT:-120}"
STOP_TIMEOUT=60

# The Kafka version comes from the pom, so there is one place to change it.
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$KAFKA_POM")"
KAFKA_LIBS="$STATE/kafka/libs"

# --- small helpers ---------------------------------------------------------------------
log() { printf '[services] %s\n' "$*" >&2; }
die() { printf '[services] error: %s\n' "$*" >&2; exit 1; }

# tail_log FILE [LINES]: show the end of a service log on stderr (for failures).
tail_log() {
  local file="$1" lines="${2:-40}"
  if [[ -s "$file" ]]; then
    printf '[services] --- last %s lines of %s ---\n' "$lines" "$file" >&2
    tail -n "$lines" "$file" >&2
    printf '[services] --- end of %s ---\n' "$file" >&2
  else
    printf '[services] (%s is empty or missing)\n' "$file" >&2
  fi
}

# A pid is alive when it exists and is not a zombie.
pid_alive() {
  local pid="$1" state
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
  state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)"
  [[ "$state" != "Z" ]]
}

pid_file() { printf '%s/%s/pid\n' "$STATE" "$1"; }

# The pid recorded for SERVICE, if that process is still alive and still the program we
# started (a pid file that survived a reboot may name an unrelated process by now).
read_pid() {
  local svc="$1" f pid comm
  f="$(pid_file "$svc")"
  [[ -f "$f" ]] || return 0
  pid="$(cat "$f")"
  pid_alive "$pid" || return 0
  comm="$(cat "/proc/$pid/comm" 2>/dev/null || true)"
  case "$svc:$comm" in
    mariadb:mariadbd|postgres:postgres|kafka:java) printf '%s\n' "$pid" ;;
  esac
}

# Something accepts TCP connections on 127.0.0.1:PORT (bash's /dev/tcp, no extra tools).
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

port_of() {
  case "$1" in
    mariadb) echo "$MARIADB_PORT" ;; postgres) echo "$PG_PORT" ;; kafka) echo "$KAFKA_PORT" ;;
  esac
}

# If PORT is taken but not by our pid, say who has it instead of failing obscurely later.
check_port_free() {
  local svc="$1" port="$2"
  if port_open "$port"; then
    ss -ltnp "sport = :$port" >&2 2>/dev/null || true
    die "$svc: port $port is in use, but not by a $svc this script started (no live pid in
       $(pid_file "$svc")). Stop that process (see above); if it is a leftover of a .state
       deleted while the service ran, kill its pid by hand."
  fi
}

# Unix socket paths are limited to 107 bytes; a deep checkout would overflow them, so the
# sockets then go to a short directory under /tmp named after the checkout.
socket_dir() {
  local svc="$1" dir="$STATE/$1/run"
  if (( ${#dir} > 80 )); then
    dir="/tmp/outboxd-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)-$svc"
  fi
  printf '%s\n' "$dir"
}

# Start a daemon detached from this shell: own session, stdin from /dev/null, output
# appended to LOG, and without fd 9 (the lock below), or it would hold the lock forever.
# Sets LAUNCHED_PID.
launch() {
  local logfile="$1"; shift
  setsid "$@" >>"$logfile" 2>&1 </dev/null 9>&- &
  LAUNCHED_PID=$!
}

# wait_until DESCRIPTION PID LOG CHECK...: poll CHECK until it succeeds; fail with the
# log's tail if PID dies or TIMEOUT seconds pass.
wait_until() {
  local what="$1" pid="$2" logfile="$3"; shift 3
  local deadline=$((SECONDS + TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    if [[ -n "$pid" ]] && ! pid_alive "$pid"; then
      tail_log "$logfile"
      die "$what: the process (pid $pid) exited while starting; see $logfile"
    fi
    if (( SECONDS >= deadline )); then
      tail_log "$logfile"
      die "$what: not ready after ${TIMEOUT}s (OUTBOXD_SERVICES_TIMEOUT); see $logfile"
    fi
    sleep 0.2
  done
}

# stop_pid SERVICE SIGNAL: signal the recorded pid, wait, SIGKILL after STOP_TIMEOUT.
stop_pid() {
  local svc="$1" sig="$2" pid
  pid="$(read_pid "$svc")"
  if [[ -z "$pid" ]] || ! pid_alive "$pid"; then
    rm -f "$(pid_file "$svc")"
    log "$svc: not running"
    return 0
  fi
  log "$svc: stopping pid $pid (SIG$sig)"
  kill -s "$sig" "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + STOP_TIMEOUT))
  while pid_alive "$pid"; do
    if (( SECONDS >= deadline )); then
      log "$svc: still running after ${STOP_TIMEOUT}s, sending SIGKILL"
      kill -s KILL "$pid" 2>/dev/null || true
      sleep 0.5
      break
    fi
    sleep 0.2
  done
  rm -f "$(pid_file "$svc")"
  log "$svc: stopped"
}

mariadb_client() {
  # --no-defaults: ignore /etc/mysql client settings (they point at the distro's socket).
  MYSQL_PWD="$2" mariadb --no-defaults --protocol=TCP -h 127.0.0.1 -P "$MARIADB_PORT" \
    -u "$1" --connect-timeout=5 -N -B "${@:3}"
}

psql_tcp() {
  PGPASSWORD="$2" PGCONNECT_TIMEOUT=5 psql -X -q -h 127.0.0.1 -p "$PG_PORT" -U "$1" \
    -d "$PG_DATABASE" -v ON_ERROR_STOP=1 -tA "${@:3}"
}

# --- install -----------------------------------------------------------------------------
deb_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

install_debs() {
  local pkgs=("$@") missing=() p
  for p in "${pkgs[@]}"; do deb_installed "$p" || missing+=("$p"); done
  (( ${#missing[@]} )) || return 0

  log "install: apt-get install ${missing[*]}"
  # Keep the packages' maintainer scripts from starting the system-wide services (on the
  # default ports 3306/5432): policy-rc.d answering 101 means "action forbidden". Docker-
  # style images already have one; only add (and later remove) ours if there is none.
  local our_policy=""
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    our_policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\n# temporary, from outboxd scripts/services.sh\nexit 101\n' >"$our_policy"
    chmod 755 "$our_policy"
  fi
  local rc=0
  {
    apt-get update -q &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${missing[@]}"
  } >&2 || rc=$?
  [[ -n "$our_policy" ]] && rm -f "$our_policy"
  (( rc == 0 )) || die "install: apt-get failed (exit $rc)"

  # If a package's scripts started the distro service anyway (no policy-rc.d honoured),
  # stop it: we run our own instances and do not want idle servers on 3306/5432.
  if [[ " ${missing[*]} " == *" mariadb-server "* && -s /run/mysqld/mysqld.pid ]]; then
    local mpid; mpid="$(cat /run/mysqld/mysqld.pid)"
    if pid_alive "$mpid"; then
      log "install: stopping the distro's mariadb service (pid $mpid) that the package started"
      kill "$mpid" 2>/dev/null || true
    fi
  fi
  if [[ " ${missing[*]} " == *" postgresql-15 "* ]] && command -v pg_lsclusters >/dev/null &&
     pg_lsclusters -h 2>/dev/null | awk '$1 == "15" && $4 == "online"' | grep -q .; then
    log "install: stopping the distro's postgresql@15-main cluster that the package started"
    pg_ctlcluster 15 main stop >&2 || true
  fi
}

install_kafka_jars() {
  local marker="$KAFKA_LIBS/.resolved-kafka-$KAFKA_VERSION"
  [[ -f "$marker" ]] && return 0
  log "install: resolving Kafka $KAFKA_VERSION jars with Maven into $KAFKA_LIBS"
  local tmp="$STATE/kafka/libs.tmp"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  mvn -B -q -Dstyle.color=never -f "$KAFKA_POM" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$tmp" >"$STATE/kafka/mvn.log" 2>&1 \
    || { tail_log "$STATE/kafka/mvn.log"; die "install: mvn could not resolve the Kafka jars"; }
  ls "$tmp"/kafka_2.13-"$KAFKA_VERSION".jar >/dev/null 2>&1 \
    || die "install: kafka_2.13-$KAFKA_VERSION.jar missing after mvn"
  touch "$tmp/.resolved-kafka-$KAFKA_VERSION"
  rm -rf "$KAFKA_LIBS"
  mv "$tmp" "$KAFKA_LIBS"
}

cmd_install() {
  local svcs=("$@") debs=() s
  mkdir -p "$STATE"
  for s in "${svcs[@]}"; do
    case "$s" in
      mariadb)  debs+=(mariadb-server mariadb-client) ;;
      postgres) debs+=(postgresql-15 postgresql-client-15) ;;
      kafka)
        command -v java >/dev/null || debs+=(openjdk-17-jre-headless)
        command -v mvn  >/dev/null || debs+=(maven)
        ;;
    esac
  done
  (( ${#debs[@]} )) && install_debs "${debs[@]}"
  if [[ " ${svcs[*]} " == *" kafka "* ]]; then install_kafka_jars; fi
  return 0
}

# --- MariaDB ------------------------------------------------------------------------------
MARIADB_DIR="$STATE/mariadb"
MARIADB_CNF="$DOCKER_DIR/mariadb/outboxd.cnf"

mariadb_ready() { mariadb_client "$ADMIN_USER" "$ADMIN_PASSWORD" -e 'SELECT 1' >/dev/null; }

mariadb_up() {
  local pid sock; pid="$(read_pid mariadb)"; sock="$(socket_dir mariadb)"
  if pid_alive "$pid"; then
    wait_until "mariadb" "$pid" "$MARIADB_DIR/mariadb.log" mariadb_ready
    log "mariadb: already running (pid $pid)"
    return 0
  fi
  check_port_free mariadb "$MARIADB_PORT"
  mkdir -p "$MARIADB_DIR/data" "$sock"

  if [[ ! -d "$MARIADB_DIR/data/mysql" ]]; then
    log "mariadb: initialising $MARIADB_DIR/data"
    # root@localhost authenticates by unix_socket (we are root); no test database.
    mariadb-install-db --defaults-file="$MARIADB_CNF" --user=root \
        --datadir="$MARIADB_DIR/data" --auth-root-authentication-method=socket \
        --skip-test-db >"$MARIADB_DIR/install-db.log" 2>&1 \
      || { tail_log "$MARIADB_DIR/install-db.log"; die "mariadb: mariadb-install-db failed"; }
  fi

  log "mariadb: starting on 127.0.0.1:$MARIADB_PORT"
  # --defaults-file must come first; the rest override the shared config for this host.
  # Binlog kept 1 h, not a week: a full benchmark run writes several GB of it.
  launch "$MARIADB_DIR/mariadb.log" /usr/sbin/mariadbd \
    --defaults-file="$MARIADB_CNF" \
    --user=root \
    --datadir="$MARIADB_DIR/data" \
    --port="$MARIADB_PORT" --bind-address=127.0.0.1 \
    --socket="$sock/mariadb.sock" \
    --pid-file="$MARIADB_DIR/mariadbd.pid" \
    --log-error="$MARIADB_DIR/mariadb.log" \
    --binlog-expire-logs-seconds=3600
  pid="$LAUNCHED_PID"
  echo "$pid" >"$(pid_file mariadb)"

  # Ready for root over the socket -> (re)apply users -> ready for outboxd_admin over TCP.
  wait_until "mariadb" "$pid" "$MARIADB_DIR/mariadb.log" \
    mariadb-admin --no-defaults --socket="$sock/mariadb.sock" -u root ping
  mariadb --no-defaults --socket="$sock/mariadb.sock" -u root <"$DOCKER_DIR/mariadb/init.sql" \
    || { tail_log "$MARIADB_DIR/mariadb.log"; die "mariadb: docker/mariadb/init.sql failed"; }
  wait_until "mariadb" "$pid" "$MARIADB_DIR/mariadb.log" mariadb_ready
  log "mariadb: ready (pid $pid)"
}

mariadb_down() { stop_pid mariadb TERM; }

# --- PostgreSQL ---------------------------------------------------------------------------
PG_DIR="$STATE/postgres"

# The server runs as the postgres OS user, which must be able to reach $PG_DIR. A checkout
# under a root-owned 0700 directory (e.g. mktemp -d) would stop it, so add o+x ("search",
# not read) to every ancestor that lacks it.
pg_ensure_traversable() {
  local d="$PG_DIR" ancestors=() i
  while [[ "$d" != "/" ]]; do d="$(dirname "$d")"; ancestors+=("$d"); done
  # Outermost first: a directory can only be tested once its parents let us through.
  for ((i = ${#ancestors[@]} - 1; i >= 0; i--)); do
    d="${ancestors[i]}"
    if ! runuser -u "$PG_OS_USER" -- test -x "$d"; then
      log "postgres: chmod o+x $d (so the $PG_OS_USER user can reach $PG_DIR)"
      chmod o+x "$d"
    fi
  done
}

pg_ready() {
  "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" &&
    psql_tcp "$ADMIN_USER" "$ADMIN_PASSWORD" -c 'SELECT 1' >/dev/null
}

postgres_up() {
  local pid sock; pid="$(read_pid postgres)"; sock="$(socket_dir postgres)"
  if pid_alive "$pid"; then
    wait_until "postgres" "$pid" "$PG_DIR/postgres.log" pg_ready
    log "postgres: already running (pid $pid)"
    return 0
  fi
  check_port_free postgres "$PG_PORT"
  [[ -x "$PG_BIN/postgres" ]] || die "postgres: $PG_BIN/postgres not found (run install)"
  id "$PG_OS_USER" >/dev/null 2>&1 || die "postgres: OS user $PG_OS_USER missing (run install)"

  mkdir -p "$PG_DIR/data" "$PG_DIR/conf" "$sock"
  chown "$PG_OS_USER:$PG_OS_USER" "$PG_DIR" "$PG_DIR/data" "$PG_DIR/conf" "$sock"
  chmod 700 "$PG_DIR/data"
  pg_ensure_traversable

  if [[ ! -f "$PG_DIR/data/PG_VERSION" ]]; then
    log "postgres: initialising $PG_DIR/data"
    runuser -u "$PG_OS_USER" -- "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres \
        --auth-local=peer --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 \
        >"$PG_DIR/initdb.log" 2>&1 \
      || { tail_log "$PG_DIR/initdb.log"; die "postgres: initdb failed"; }
  fi

  # The shared configs from docker/postgres, copied where the postgres user can read them.
  install -m 0644 -o "$PG_OS_USER" -g "$PG_OS_USER" \
    "$DOCKER_DIR/postgres/postgresql.conf" "$DOCKER_DIR/postgres/pg_hba.conf" "$PG_DIR/conf/"
  touch "$PG_DIR/postgres.log"
  chown "$PG_OS_USER:$PG_OS_USER" "$PG_DIR/postgres.log"

  log "postgres: starting on 127.0.0.1:$PG_PORT"
  local opts="-c config_file=$PG_DIR/conf/postgresql.conf -c hba_file=$PG_DIR/conf/pg_hba.conf"
  opts+=" -c listen_addresses=127.0.0.1 -c port=$PG_PORT -c unix_socket_directories=$sock"
  # pg_ctl detaches the postmaster and waits (-w) until it accepts connections. Its own
  # few messages go to the same log as the server's.
  # shellcheck disable=SC2094
  runuser -u "$PG_OS_USER" -- "$PG_BIN/pg_ctl" start -D "$PG_DIR/data" -l "$PG_DIR/postgres.log" \
      -w -t "$TIMEOUT" -s -o "$opts" </dev/null >>"$PG_DIR/postgres.log" 2>&1 9>&- \
    || { tail_log "$PG_DIR/postgres.log"; die "postgres: pg_ctl start failed"; }
  pid="$(head -n 1 "$PG_DIR/data/postmaster.pid")"
  echo "$pid" >"$(pid_file postgres)"

  # Roles and database over the socket as the postgres superuser (peer auth).
  runuser -u "$PG_OS_USER" -- psql -X -q -h "$sock" -p "$PG_PORT" -U postgres -d postgres \
      -v ON_ERROR_STOP=1 -f - <"$DOCKER_DIR/postgres/init.sql" >/dev/null \
    || { tail_log "$PG_DIR/postgres.log"; die "postgres: docker/postgres/init.sql failed"; }
  wait_until "postgres" "$pid" "$PG_DIR/postgres.log" pg_ready
  log "postgres: ready (pid $pid)"
}

# SIGINT = "fast" shutdown: SIGTERM ("smart") would wait for every client to disconnect,
# including a replication connection a test left open.
postgres_down() { stop_pid postgres INT; }

# --- Kafka --------------------------------------------------------------------------------
KAFKA_DIR="$STATE/kafka"
KAFKA_PROPS="$KAFKA_DIR/server.properties"

# The shared server.properties, then the host overrides (last value of a key wins).
kafka_write_props() {
  {
    cat "$DOCKER_DIR/kafka/server.properties"
    cat <<EOF

# ---- overrides appended by scripts/services.sh for the local harness ----
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
log.dirs=$KAFKA_DIR/data
EOF
  } >"$KAFKA_PROPS"
}

# The JVM command line for the broker and for the tools (StorageTool) alike.
KAFKA_JAVA=(java "${KAFKA_HEAP[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true
            -Dlog4j2.configurationFile="$KAFKA_LOG4J" -cp "$KAFKA_LIBS/*")

# Ready = the broker said so in this start's part of the log, and the port answers.
# "Kafka Server started" is logged by KafkaRaftServer after the broker has caught up with
# the metadata log and been unfenced, i.e. when it serves Metadata/Produce requests.
# .state/kafka/log-offset remembers where this start's part of kafka.log begins.
kafka_started() {
  local offset; offset="$(cat "$KAFKA_DIR/log-offset" 2>/dev/null || echo 0)"
  port_open "$KAFKA_PORT" &&
    # No `grep -q`: it would exit at the first match and, under pipefail, tail's SIGPIPE
    # would make the whole check fail once the log has grown past a pipe buffer.
    tail -c +"$((offset + 1))" "$KAFKA_DIR/kafka.log" | grep -F 'Kafka Server started' >/dev/null
}

kafka_listening() { port_open "$KAFKA_PORT"; }

kafka_up() {
  local pid; pid="$(read_pid kafka)"
  if pid_alive "$pid"; then
    # Started (and found ready) by an earlier `up`; its log may have rolled since, so only
    # the listener is checked here.
    wait_until "kafka" "$pid" "$KAFKA_DIR/kafka.log" kafka_listening
    log "kafka: already running (pid $pid)"
    return 0
  fi
  check_port_free kafka "$KAFKA_PORT"
  check_port_free kafka-controller "$KAFKA_CONTROLLER_PORT"
  command -v java >/dev/null || die "kafka: java not found (run install)"
  [[ -f "$KAFKA_LIBS/.resolved-kafka-$KAFKA_VERSION" ]] || die "kafka: jars missing (run install)"
  mkdir -p "$KAFKA_DIR/data"
  kafka_write_props

  if [[ ! -f "$KAFKA_DIR/data/meta.properties" ]]; then
    # A cluster id is 16 random bytes in URL-safe base64 without padding (22 chars).
    local cluster_id
    cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
    log "kafka: formatting $KAFKA_DIR/data (cluster id $cluster_id)"
    # kafka.tools.StorageTool is what bin/kafka-storage.sh runs (in the kafka_2.13 jar).
    "${KAFKA_JAVA[@]}" kafka.tools.StorageTool format --config "$KAFKA_PROPS" \
        --cluster-id "$cluster_id" --ignore-formatted >"$KAFKA_DIR/format.log" 2>&1 \
      || { tail_log "$KAFKA_DIR/format.log"; die "kafka: storage format failed"; }
  fi

  log "kafka: starting on 127.0.0.1:$KAFKA_PORT (controller :$KAFKA_CONTROLLER_PORT)"
  touch "$KAFKA_DIR/kafka.log"
  stat -c %s "$KAFKA_DIR/kafka.log" >"$KAFKA_DIR/log-offset"
  printf '\n==== %s services.sh: starting kafka ====\n' "$(date -Is)" >>"$KAFKA_DIR/kafka.log"
  launch "$KAFKA_DIR/kafka.log" "${KAFKA_JAVA[@]}" kafka.Kafka "$KAFKA_PROPS"
  pid="$LAUNCHED_PID"
  echo "$pid" >"$(pid_file kafka)"
  wait_until "kafka" "$pid" "$KAFKA_DIR/kafka.log" kafka_started
  log "kafka: ready (pid $pid)"
}

# SIGTERM runs the broker's shutdown hook: controlled shutdown, logs flushed and closed, so
# the next start needs no log recovery. The data is kept.
kafka_down() { stop_pid kafka TERM; }

# --- env / status ---------------------------------------------------------------------------
env_lines() {
  cat <<EOF
export OUTBOXD_TEST_MYSQL_ADMIN_URL=mysql://$ADMIN_USER:$ADMIN_PASSWORD@127.0.0.1:$MARIADB_PORT
export OUTBOXD_TEST_MYSQL_URL=mysql://$RELAY_USER:$RELAY_PASSWORD@127.0.0.1:$MARIADB_PORT
export OUTBOXD_TEST_PG_ADMIN_URL=postgres://$ADMIN_USER:$ADMIN_PASSWORD@127.0.0.1:$PG_PORT/$PG_DATABASE
export OUTBOXD_TEST_PG_URL=postgres://$RELAY_USER:$RELAY_PASSWORD@127.0.0.1:$PG_PORT/$PG_DATABASE
export OUTBOXD_KAFKA_BOOTSTRAP=127.0.0.1:$KAFKA_PORT
EOF
}

cmd_status() {
  local s pid port rc=0
  for s in "$@"; do
    pid="$(read_pid "$s")"; port="$(port_of "$s")"
    if pid_alive "$pid"; then
      if port_open "$port"; then
        printf '%-9s running  pid %-7s 127.0.0.1:%s\n' "$s" "$pid" "$port"
      else
        printf '%-9s starting pid %-7s 127.0.0.1:%s not open yet\n' "$s" "$pid" "$port"; rc=3
      fi
    else
      printf '%-9s stopped\n' "$s"; rc=3
    fi
  done
  return "$rc"
}

cmd_kafka_tool() {
  (( $# )) || die "kafka-tool: name a tool class, e.g. TopicCommand"
  [[ -f "$KAFKA_LIBS/.resolved-kafka-$KAFKA_VERSION" ]] || die "kafka-tool: jars missing (run install)"
  local cls="$1"; shift
  [[ "$cls" == *.*.* ]] || cls="org.apache.kafka.tools.$cls"
  exec java -Xmx256m -Djava.awt.headless=true -Dlog4j2.configurationFile="$KAFKA_TOOLS_LOG4J" \
    -cp "$KAFKA_LIBS/*" "$cls" "$@"
}

# --- main ---------------------------------------------------------------------------------
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; }

main() {
  local cmd="${1:-}"; shift || true
  case "$cmd" in
    kafka-start) cmd=up;   set -- kafka ;;
    kafka-stop)  cmd=down; set -- kafka ;;
    kafka-tool)  cmd_kafka_tool "$@" ;;
    start)       cmd=up ;;
    stop)        cmd=down ;;
    -h|--help|help) usage; return 0 ;;
    "") usage; return 2 ;;
  esac

  # The services to act on, in start order; `down` stops them in reverse.
  local svcs=() s
  if (( $# == 0 )); then svcs=("${ALL_SERVICES[@]}"); else
    for s in "${ALL_SERVICES[@]}"; do
      [[ " $* " == *" $s "* ]] && svcs+=("$s")
    done
    for s in "$@"; do
      [[ " ${ALL_SERVICES[*]} " == *" $s "* ]] || die "unknown service '$s' (known: ${ALL_SERVICES[*]})"
    done
  fi

  case "$cmd" in
    env)    env_lines; return 0 ;;
    status) cmd_status "${svcs[@]}"; return $? ;;
    install|up|down|restart) ;;
    *) usage; die "unknown command '$cmd'" ;;
  esac

  [[ $EUID -eq 0 ]] || die "run as root (installs packages; runs mariadbd/postgres/kafka)"
  mkdir -p "$STATE"
  # One services.sh at a time per checkout (fd 9; daemons are started without it).
  exec 9>"$STATE/.lock"
  flock 9

  local i
  case "$cmd" in
    install) cmd_install "${svcs[@]}" ;;
    down|restart)
      for ((i = ${#svcs[@]} - 1; i >= 0; i--)); do "${svcs[i]}_down"; done
      ;;&
    up|restart)
      cmd_install "${svcs[@]}"
      for s in "${svcs[@]}"; do "${s}_up"; done
      env_lines >"$STATE/env"
      env_lines
      ;;
  esac
}

main "$@"
