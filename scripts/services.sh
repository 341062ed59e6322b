#!/usr/bin/env bash
# scripts/services.sh — the real servers outboxd's integration tests run against, on
# loopback, with all their data under $ROOT/.state/ (gitignored):
#
#   mariadb       MariaDB 10.11 (Debian package)      127.0.0.1:33306  binlog ROW + GTID
#   postgres      PostgreSQL 15 (Debian package)      127.0.0.1:35432  wal_level=logical
#   kafka         Apache Kafka 4.x, KRaft, one node   127.0.0.1:39092  PLAINTEXT
#                 (the broker's jars from Maven       127.0.0.1:39093  controller
#                 Central, run with the machine's     localhost:39094  SASL_SSL
#                 Java 17; ACLs: StandardAuthorizer,  localhost:39095  SSL (mutual TLS)
#                 open unless a resource has ACLs,
#                 PLAINTEXT/controller super users)
#   mariadb-tls   a second MariaDB, TLS only          127.0.0.1:33307  require_secure_transport
#   postgres-tls  a second PostgreSQL, TLS only       127.0.0.1:35433  hostssl only
#   nats          NATS 2.9 (Debian nats-server),      127.0.0.1:34222  clients (user/password)
#                 JetStream (store .state/nats/data)  127.0.0.1:38222  monitoring HTTP (/healthz, /jsz)
#   redis         Redis 7.0 (Debian redis-server)     127.0.0.1:36379  AOF, appendfsync always; ACL
#                                                                      user, `default` user off
#   rabbitmq      RabbitMQ 3.10 (Debian package,      127.0.0.1:35672  AMQP 0-9-1
#                 Erlang 25), node outboxd@localhost  127.0.0.1:35552  streams (rabbitmq_stream)
#                 as the rabbitmq OS user; cookie,    127.0.0.1:35690  management HTTP API
#                 mnesia, logs under .state/rabbitmq  127.0.0.1:35700  Erlang distribution
#                                                     127.0.0.1:34369  its own epmd
#
# Usage: scripts/services.sh COMMAND [SERVICE...]     (no SERVICE = all eight)
#
#   install          install what is missing (apt packages, Kafka jars, and the build's
#                    libssl-dev, libcurl4-openssl-dev + pkg-config); idempotent
#   up               install if needed, start what is not running, wait until ready,
#                    print the connection settings as `export VAR=...` lines (stdout);
#                    reserves the ports from the kernel's ephemeral range
#                    (net.ipv4.ip_local_reserved_ports), so a stopped service gets its
#                    port back
#   down             stop (TERM or INT, then KILL after a timeout); data is kept
#   restart          down + up
#   status           which are running; exit status 3 if any is not
#   env              print the `export VAR=...` lines
#   tls              make the test certificates if missing or expiring (`up` does it too)
#   start / stop     aliases of up / down, e.g. `stop kafka` to simulate an outage
#   kafka-start / kafka-stop   the same as `up kafka` / `down kafka`
#   kafka-tool CLASS [ARGS...] run a Kafka CLI tool from the broker's jars against the
#                    local broker, quietly (warnings only), e.g.
#                      kafka-tool TopicCommand --bootstrap-server 127.0.0.1:39092 --list
#                      kafka-tool ConsoleProducer --bootstrap-server 127.0.0.1:39092 --topic t
#                      kafka-tool consumer.ConsoleConsumer --bootstrap-server 127.0.0.1:39092 \
#                          --topic t --from-beginning --max-messages 1
#                      kafka-tool TopicCommand --bootstrap-server localhost:39094 \
#                          --command-config .state/tls/kafka-client-sasl-scram-sha-512.properties --list
#                    (CLASS without a package is looked up in org.apache.kafka.tools)
#   rabbitmq-tool TOOL [ARGS...] run RabbitMQ's CLI (rabbitmqctl, rabbitmq-diagnostics,
#                    rabbitmq-plugins, rabbitmq-queues, rabbitmq-streams, rabbitmq-upgrade)
#                    against the local node, with its cookie, node name and epmd port, e.g.
#                      rabbitmq-tool rabbitmqctl list_queues name messages
#                    (Debian's /usr/sbin/rabbitmqctl would look for the system node instead)
#
# Typical use:   eval "$(scripts/services.sh up)"
# Only the export lines go to stdout; progress and errors go to stderr.
#
# The server configs are the files in docker/ that docker/docker-compose.yml mounts; this
# script only overrides host-specific settings (ports, loopback, paths) on top of them.
# The secured servers add docker/mariadb/{tls.cnf,init-tls.sql},
# docker/postgres/{tls.conf,pg_hba-tls.conf,pg_ident-tls.conf,init-tls.sql} and
# docker/kafka/secured.properties. The brokers nats, redis and rabbitmq have no files in
# docker/ (nor services in docker-compose.yml): this script writes their whole configuration
# into .state/<service>/ at every start (nats.conf, redis.conf, rabbitmq.conf).
#
# Test certificates, .state/tls/ (made by `up`/`tls` with openssl and the JDK's keytool,
# once; made anew when a file is missing or a certificate expires within a day; RSA 2048,
# valid 10 years):
#   ca.pem, ca.key             the test CA (CN=outboxd test CA); every server trusts it
#   other-ca.pem, other-ca.key an unrelated CA, for "wrong CA" tests
#   server.pem, server.key     the certificate of all three secured servers, signed by the
#                              CA; subjectAltName DNS:localhost only, no IP: verify-full /
#                              verify_identity pass for host `localhost` and fail for
#                              `127.0.0.1`, where verify-ca still passes
#   server.p12                 the same as a PKCS12 keystore (Kafka's), password keystore-secret
#   client.pem, client.key     the client certificate for mutual TLS, CN=outboxd, signed by
#                              the CA; the key unencrypted PKCS#8, mode 0600 (libpq's rule)
#   client.p12                 the same with the CA as a PKCS12 keystore, password keystore-secret
#   truststore.p12             the CA as a trusted-certificate entry (keytool -importcert),
#   truststore.jks             PKCS12 and JKS; password truststore-secret
#   kafka-client-{sasl-scram-sha-256,sasl-scram-sha-512,sasl-plain,ssl}.properties
#                              Java client settings for the secured Kafka listeners
#                              (--command-config / --producer.config of kafka-tool; with
#                              their bootstrap.servers, also outboxd --kafka-config files)
#
# Test credentials (fixed, local only; also in docker/*/init*.sql, docker/kafka/):
#   outboxd_admin / admin-secret, outboxd / outboxd-secret   every database server
#   outboxd_mtls  (client certificate; MariaDB also mtls-secret)   mariadb-tls, postgres-tls
#   outboxd / outboxd-sasl-secret   Kafka SASL_SSL: SCRAM-SHA-256, SCRAM-SHA-512, PLAIN
#   outboxd / outboxd-nats-secret   NATS (the only user; no anonymous access)
#   outboxd / outboxd-redis-secret  Redis ACL user (~* &* +@all); `default` has the password
#                                   default-redis-secret (NOAUTH without AUTH), e.g.
#                                   redis-cli -p 36379 --user outboxd --pass outboxd-redis-secret
#   outboxd / outboxd-rabbit-secret RabbitMQ, tag administrator, all permissions on vhost /
#                                   (no guest user); AMQP, streams and the management API
#
# `env` prints, besides the plaintext services' OUTBOXD_TEST_{MYSQL,PG}[_ADMIN]_URL and
# OUTBOXD_KAFKA_BOOTSTRAP: OUTBOXD_TEST_{MYSQL,PG}_TLS_URL, ..._TLS_ADMIN_URL and
# ..._MTLS_URL (host localhost; add the TLS parameters yourself),
# OUTBOXD_KAFKA_SASL_BOOTSTRAP / OUTBOXD_KAFKA_SSL_BOOTSTRAP (localhost:PORT),
# OUTBOXD_KAFKA_SASL_USER / OUTBOXD_KAFKA_SASL_PASSWORD, OUTBOXD_TEST_TLS_DIR (absolute) and
# one OUTBOXD_TEST_TLS_* per file above (CA, OTHER_CA, CLIENT_CERT, CLIENT_KEY, CLIENT_P12,
# TRUSTSTORE_P12, TRUSTSTORE_JKS) with OUTBOXD_TEST_TLS_{KEYSTORE,TRUSTSTORE}_PASSWORD;
# for the brokers OUTBOXD_NATS_URL (nats://127.0.0.1:PORT), OUTBOXD_NATS_MONITOR_URL,
# OUTBOXD_REDIS_URL (redis://127.0.0.1:PORT), OUTBOXD_RABBITMQ_URL
# (amqp://127.0.0.1:PORT/%2f), OUTBOXD_RABBITMQ_STREAM_PORT, OUTBOXD_RABBITMQ_MANAGEMENT_URL:
# URLs without credentials; those are OUTBOXD_{NATS,REDIS,RABBITMQ}_{USER,PASSWORD}.
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

ALL_SERVICES=(mariadb postgres kafka mariadb-tls postgres-tls nats redis rabbitmq)

# OUTBOXD_SERVICES_PORT_OFFSET moves every port by that much, so a second checkout (a git
# worktree, say) can run its own services beside these without touching them.
PORT_OFFSET="${OUTBOXD_SERVICES_PORT_OFFSET:-0}"
if ! [[ "$PORT_OFFSET" =~ ^[0-9]+$ ]] || (( PORT_OFFSET >= 20000 )); then
  printf '[services] error: OUTBOXD_SERVICES_PORT_OFFSET=%s is not a number below 20000\n' "$PORT_OFFSET" >&2
  exit 2
fi
MARIADB_PORT=$((33306 + PORT_OFFSET))
PG_PORT=$((35432 + PORT_OFFSET))
KAFKA_PORT=$((39092 + PORT_OFFSET))
KAFKA_CONTROLLER_PORT=$((39093 + PORT_OFFSET))
KAFKA_SASL_PORT=$((39094 + PORT_OFFSET))
KAFKA_SSL_PORT=$((39095 + PORT_OFFSET))
MARIADB_TLS_PORT=$((33307 + PORT_OFFSET))
PG_TLS_PORT=$((35433 + PORT_OFFSET))
NATS_PORT=$((34222 + PORT_OFFSET))
NATS_MONITOR_PORT=$((38222 + PORT_OFFSET))
REDIS_PORT=$((36379 + PORT_OFFSET))
RABBITMQ_PORT=$((35672 + PORT_OFFSET))            # AMQP 0-9-1
RABBITMQ_STREAM_PORT=$((35552 + PORT_OFFSET))     # rabbitmq_stream plugin
RABBITMQ_MANAGEMENT_PORT=$((35690 + PORT_OFFSET)) # rabbitmq_management plugin (HTTP API)
RABBITMQ_DIST_PORT=$((35700 + PORT_OFFSET))       # Erlang distribution (rabbitmqctl)
RABBITMQ_CTL_PORT_MIN=$((35701 + PORT_OFFSET))    # the CLI tools' own distribution ports,
RABBITMQ_CTL_PORT_MAX=$((35710 + PORT_OFFSET))    # one per concurrent call
RABBITMQ_EPMD_PORT=$((34369 + PORT_OFFSET))       # Erlang port mapper

PG_BIN=/usr/lib/postgresql/15/bin      # /usr/local/bin/postgres may be a symlink/wrapper
PG_OS_USER=postgres                    # postgres refuses to run as root

# The fixed test credentials (also in docker/*/init.sql). Nothing else is secret here.
ADMIN_USER=outboxd_admin
ADMIN_PASSWORD=admin-secret
RELAY_USER=outboxd
RELAY_PASSWORD=outboxd-secret
PG_DATABASE=outboxd
MTLS_USER=outboxd_mtls                 # client certificate CN=outboxd (docker/*/init-tls.sql)
MTLS_MARIADB_PASSWORD=mtls-secret      # MariaDB wants the certificate and a password
KAFKA_SASL_USER=outboxd                # docker/kafka/secured.properties (PLAIN) + SCRAM
KAFKA_SASL_PASSWORD=outboxd-sasl-secret
NATS_USER=outboxd                      # the brokers' only (NATS, Redis) or added user
NATS_PASSWORD=outboxd-nats-secret
REDIS_USER=outboxd
REDIS_PASSWORD=outboxd-redis-secret
REDIS_DEFAULT_PASSWORD=default-redis-secret   # `default` stays on (redis_write_conf)
RABBITMQ_USER=outboxd
RABBITMQ_PASSWORD=outboxd-rabbit-secret
KEYSTORE_PASSWORD=keystore-secret      # server.p12, client.p12 (and their keys)
TRUSTSTORE_PASSWORD=truststore-secret  # truststore.p12, truststore.jks

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
    mariadb:mariadbd|postgres:postgres|kafka:java|mariadb-tls:mariadbd|postgres-tls:postgres)
      printf '%s\n' "$pid" ;;
    nats:nats-server|redis:redis-server|rabbitmq:beam.smp)
      printf '%s\n' "$pid" ;;
  esac
}

# Something accepts TCP connections on 127.0.0.1:PORT (bash's /dev/tcp, no extra tools).
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

port_of() {
  case "$1" in
    mariadb) echo "$MARIADB_PORT" ;; postgres) echo "$PG_PORT" ;; kafka) echo "$KAFKA_PORT" ;;
    mariadb-tls) echo "$MARIADB_TLS_PORT" ;; postgres-tls) echo "$PG_TLS_PORT" ;;
    nats) echo "$NATS_PORT" ;; redis) echo "$REDIS_PORT" ;; rabbitmq) echo "$RABBITMQ_PORT" ;;
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

# The services' ports lie in Linux's ephemeral range (ip_local_port_range, 32768-60999 by
# default): while a service is stopped (tests stop Kafka), a client connection of anything
# else on the machine can get its port as a local port, and the restart then fails with
# "Address already in use". Reserving them (ip_local_reserved_ports) keeps the kernel from
# handing them out that way; where that cannot be written (a container), nothing changes.
reserve_ports() {
  local f=/proc/sys/net/ipv4/ip_local_reserved_ports cur want p r lo hi taken
  [[ -w $f ]] || return 0
  cur="$(cat "$f" 2>/dev/null)" || return 0
  want="$cur"
  for p in "$MARIADB_PORT" "$PG_PORT" "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" "$KAFKA_SASL_PORT" \
           "$KAFKA_SSL_PORT" "$MARIADB_TLS_PORT" "$PG_TLS_PORT" "$NATS_PORT" "$NATS_MONITOR_PORT" \
           "$REDIS_PORT" "$RABBITMQ_PORT" "$RABBITMQ_STREAM_PORT" "$RABBITMQ_MANAGEMENT_PORT" \
           "$RABBITMQ_DIST_PORT" "$RABBITMQ_EPMD_PORT"; do
    taken=0
    for r in ${cur//,/ }; do
      lo="${r%-*}"; hi="${r#*-}"
      if (( p >= lo && p <= hi )); then taken=1; break; fi
    done
    (( taken )) || want="${want:+$want,}$p"
  done
  if [[ "$want" != "$cur" ]]; then
    echo "$want" >"$f" 2>/dev/null || log "could not reserve the service ports from the ephemeral range"
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

# The same against the secured instances: TLS, verifying the chain against the test CA but
# not the host name (the certificate names localhost, these connect to 127.0.0.1).
mariadb_tls_client() {
  MYSQL_PWD="$2" mariadb --no-defaults --protocol=TCP -h 127.0.0.1 -P "$MARIADB_TLS_PORT" \
    --ssl --ssl-ca="$TLS_DIR/ca.pem" -u "$1" --connect-timeout=5 -N -B "${@:3}"
}

psql_tls() {
  PGPASSWORD="$2" PGCONNECT_TIMEOUT=5 PGSSLMODE=verify-ca PGSSLROOTCERT="$TLS_DIR/ca.pem" \
    psql -X -q -h 127.0.0.1 -p "$PG_TLS_PORT" -U "$1" -d "$PG_DATABASE" -v ON_ERROR_STOP=1 \
    -tA "${@:3}"
}

# --- install -----------------------------------------------------------------------------
deb_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

install_debs() {
  local pkgs=("$@") missing=() p
  for p in "${pkgs[@]}"; do
    deb_installed "$p" || [[ " ${missing[*]} " == *" $p "* ]] || missing+=("$p")
  done
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
  # The same for the brokers (their init scripts run invoke-rc.d, which policy-rc.d stops;
  # nats-server has only a systemd unit): Redis on 6379, RabbitMQ on 5672/25672, and the
  # epmd that Erlang starts beside a node, on 0.0.0.0:4369 (ours use their own, loopback).
  local what="the distro's service that the package started"
  if [[ " ${missing[*]} " == *" redis-server "* ]]; then
    stop_listener install 6379 redis-server "$what (redis-server)"
  fi
  if [[ " ${missing[*]} " == *" nats-server "* ]]; then
    stop_listener install 4222 nats-server "$what (nats-server)"
  fi
  if [[ " ${missing[*]} " == *" rabbitmq-server "* ]]; then
    stop_listener install 25672 beam.smp "$what (rabbitmq-server)"
    stop_listener install 4369 epmd "the system's epmd (Erlang port mapper, 0.0.0.0:4369)"
  fi
}

# stop_listener WHO PORT COMM WHAT: TERM the program COMM that listens on PORT (on any
# address), if one does, and wait up to 30 s for it to go.
stop_listener() {
  local who="$1" port="$2" comm="$3" what="$4" p n
  for p in $(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
    [[ "$(cat "/proc/$p/comm" 2>/dev/null)" == "$comm" ]] || continue
    log "$who: stopping $what, pid $p on :$port"
    kill "$p" 2>/dev/null || true
    for ((n = 0; n < 150; n++)); do pid_alive "$p" || break; sleep 0.2; done
  done
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
  # Building outboxd itself: librdkafka (rdkafka's `ssl` feature) and mysql_async's TLS link
  # Debian's OpenSSL, found through pkg-config (README, "Kafka security").
  deb_installed libssl-dev || debs+=(libssl-dev)
  # librdkafka's built-in OIDC (OAUTHBEARER token endpoint) fetches tokens with Debian's
  # libcurl (rdkafka's `curl` feature; README, "TLS and SASL").
  deb_installed libcurl4-openssl-dev || debs+=(libcurl4-openssl-dev)
  command -v pkg-config >/dev/null || debs+=(pkg-config)
  for s in "${svcs[@]}"; do
    case "$s" in
      mariadb|mariadb-tls)   debs+=(mariadb-server mariadb-client) ;;
      postgres|postgres-tls) debs+=(postgresql-15 postgresql-client-15) ;;
      kafka)
        command -v java >/dev/null || debs+=(openjdk-17-jre-headless)
        command -v mvn  >/dev/null || debs+=(maven)
        ;;
      nats)     debs+=(nats-server curl) ;;      # curl: the readiness check (/healthz)
      redis)    debs+=(redis-server redis-tools) ;;
      rabbitmq) debs+=(rabbitmq-server curl) ;;  # Erlang 25 comes with it (erlang-base, epmd)
    esac
  done
  # The secured servers' certificates (kafka carries secured listeners too): openssl, and
  # keytool for the Java truststores, which comes with the JRE.
  if needs_tls "${svcs[@]}"; then
    command -v openssl >/dev/null || debs+=(openssl)
    command -v keytool >/dev/null || debs+=(openjdk-17-jre-headless)
  fi
  (( ${#debs[@]} )) && install_debs "${debs[@]}"
  if [[ " ${svcs[*]} " == *" kafka "* ]]; then install_kafka_jars; fi
  return 0
}

# --- TLS: the test CA and certificates ------------------------------------------------------
# Listed in the header. One server certificate for all three secured servers: they all
# answer as localhost.
TLS_DIR="$STATE/tls"
TLS_DAYS=3650
TLS_FILES=(ca.key ca.pem other-ca.key other-ca.pem server.key server.pem server.p12
           client.key client.pem client.p12 truststore.p12 truststore.jks)
TLS_CERTS=(ca.pem other-ca.pem server.pem client.pem)

# All files there and no certificate expiring within a day.
tls_current() {
  local f
  for f in "${TLS_FILES[@]}"; do [[ -s "$TLS_DIR/$f" ]] || return 1; done
  for f in "${TLS_CERTS[@]}"; do
    openssl x509 -noout -checkend 86400 -in "$TLS_DIR/$f" >/dev/null 2>&1 || return 1
  done
}

# What a secured server was started with (CA + server certificate), so that a server still
# running with certificates made anew since then is noticed instead of failing every check.
tls_stamp() { cat "$TLS_DIR/ca.pem" "$TLS_DIR/server.pem" | sha256sum | cut -c1-16; }

# tls_check_running SVC...: die, naming them all, if any of the secured SVCs is running
# with other certificates than those in .state/tls now (made anew since it started).
tls_check_running() {
  local s dir stale=()
  for s in "$@"; do
    case "$s" in
      kafka) dir="$STATE/kafka" ;; mariadb-tls) dir="$STATE/mariadb-tls" ;;
      postgres-tls) dir="$STATE/postgres-tls" ;; *) continue ;;
    esac
    # No stamp: a kafka from before the secured listeners; kafka_up says what to do.
    if ! pid_alive "$(read_pid "$s")" || [[ ! -f "$dir/tls-stamp" ]]; then continue; fi
    [[ "$(cat "$dir/tls-stamp" 2>/dev/null)" == "$(tls_stamp)" ]] || stale+=("$s")
  done
  (( ${#stale[@]} == 0 )) ||
    die "${stale[*]}: still running with the certificates from before $TLS_DIR was made
       anew; restart them: scripts/services.sh restart ${stale[*]}"
}

# tls_make DIR: the whole set, in DIR (empty).
tls_make() {
  local d="$1" serial
  # Our own openssl config, so neither the distro's openssl.cnf nor its default extensions
  # end up in the certificates.
  cat >"$d/openssl.cnf" <<'CNF'
[ req ]
distinguished_name = dn
prompt             = no
[ dn ]
[ ca_ext ]
basicConstraints       = critical, CA:TRUE
keyUsage               = critical, keyCertSign, cRLSign
subjectKeyIdentifier   = hash
[ server_ext ]
basicConstraints       = critical, CA:FALSE
keyUsage               = critical, digitalSignature, keyEncipherment
extendedKeyUsage       = serverAuth
# Deliberately no IP:127.0.0.1 (see the header).
subjectAltName         = DNS:localhost
subjectKeyIdentifier   = hash
authorityKeyIdentifier = keyid, issuer
[ client_ext ]
basicConstraints       = critical, CA:FALSE
keyUsage               = critical, digitalSignature, keyEncipherment
extendedKeyUsage       = clientAuth
subjectKeyIdentifier   = hash
authorityKeyIdentifier = keyid, issuer
CNF
  # RSA 2048: what every client library here takes (rustls, OpenSSL, Java, librdkafka).
  # -nodes: keys unencrypted; OpenSSL 3 writes them as PKCS#8 ("BEGIN PRIVATE KEY"), the
  # form libpq reads.
  openssl req -x509 -new -config "$d/openssl.cnf" -extensions ca_ext -sha256 \
    -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$d/ca.pem" -days "$TLS_DAYS" \
    -subj '/CN=outboxd test CA'
  openssl req -x509 -new -config "$d/openssl.cnf" -extensions ca_ext -sha256 \
    -newkey rsa:2048 -nodes -keyout "$d/other-ca.key" -out "$d/other-ca.pem" -days "$TLS_DAYS" \
    -subj '/CN=outboxd unrelated test CA'
  local name cn ext
  for name in server client; do
    if [[ "$name" == server ]]; then cn=localhost ext=server_ext; else cn=outboxd ext=client_ext; fi
    openssl req -new -config "$d/openssl.cnf" -newkey rsa:2048 -nodes \
      -keyout "$d/$name.key" -out "$d/$name.csr" -subj "/CN=$cn"
    serial="0x$(openssl rand -hex 16)"
    openssl x509 -req -in "$d/$name.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" \
      -set_serial "$serial" -days "$TLS_DAYS" -sha256 \
      -extfile "$d/openssl.cnf" -extensions "$ext" -out "$d/$name.pem"
    # The key with its certificate and the CA: a Java (Kafka) keystore.
    openssl pkcs12 -export -in "$d/$name.pem" -inkey "$d/$name.key" \
      -certfile "$d/ca.pem" -name "$cn" -out "$d/$name.p12" \
      -passout "pass:$KEYSTORE_PASSWORD"
    rm -f "$d/$name.csr"
  done
  # Truststores by keytool: only its -importcert marks a certificate as trusted for Java
  # (a PKCS12 file of openssl's with just a certificate in it trusts nothing there).
  # -storetype PKCS12 is keytool's default since Java 9; said anyway.
  local type file
  for type in PKCS12:truststore.p12 JKS:truststore.jks; do
    file="${type#*:}" type="${type%%:*}"
    keytool -importcert -noprompt -alias outboxd-test-ca -file "$d/ca.pem" \
      -storetype "$type" -keystore "$d/$file" -storepass "$TRUSTSTORE_PASSWORD"
  done
  rm -f "$d/openssl.cnf"
  # Keys 0600 (libpq refuses a client key others may read); the stores are password-
  # protected and readable, so a container's non-root broker can load them.
  chmod 0600 "$d"/*.key
  chmod 0644 "$d"/*.pem "$d"/*.p12 "$d"/truststore.*
}

# The Java client settings for the secured Kafka listeners (cheap: written every time).
tls_write_kafka_clients() {
  local mech jaas
  for mech in SCRAM-SHA-256 SCRAM-SHA-512 PLAIN; do
    if [[ "$mech" == PLAIN ]]; then jaas=org.apache.kafka.common.security.plain.PlainLoginModule
    else jaas=org.apache.kafka.common.security.scram.ScramLoginModule; fi
    cat >"$TLS_DIR/kafka-client-sasl-${mech,,}.properties" <<EOP
# Written by scripts/services.sh: Kafka's SASL_SSL listener (localhost:$KAFKA_SASL_PORT), $mech.
# Also a worker file for outboxd --kafka-config.
bootstrap.servers=localhost:$KAFKA_SASL_PORT
security.protocol=SASL_SSL
sasl.mechanism=$mech
sasl.jaas.config=$jaas required username="$KAFKA_SASL_USER" password="$KAFKA_SASL_PASSWORD";
ssl.truststore.type=PKCS12
ssl.truststore.location=$TLS_DIR/truststore.p12
ssl.truststore.password=$TRUSTSTORE_PASSWORD
EOP
  done
  cat >"$TLS_DIR/kafka-client-ssl.properties" <<EOP
# Written by scripts/services.sh: Kafka's SSL listener (localhost:$KAFKA_SSL_PORT), mutual TLS.
# Also a worker file for outboxd --kafka-config.
bootstrap.servers=localhost:$KAFKA_SSL_PORT
security.protocol=SSL
ssl.truststore.type=PKCS12
ssl.truststore.location=$TLS_DIR/truststore.p12
ssl.truststore.password=$TRUSTSTORE_PASSWORD
ssl.keystore.type=PKCS12
ssl.keystore.location=$TLS_DIR/client.p12
ssl.keystore.password=$KEYSTORE_PASSWORD
ssl.key.password=$KEYSTORE_PASSWORD
EOP
}

# Make the set once and keep it; anew (all of it, so everything stays signed by one CA)
# when a file is missing or a certificate is about to expire.
tls_ensure() {
  if ! tls_current; then
    command -v openssl >/dev/null || die "tls: openssl not found (run install)"
    command -v keytool >/dev/null || die "tls: keytool not found; it comes with the JRE (run install)"
    log "tls: making a test CA and certificates in $TLS_DIR"
    local tmp="$STATE/tls.tmp"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    tls_make "$tmp" >"$STATE/tls.log" 2>&1 \
      || { tail_log "$STATE/tls.log"; die "tls: making the certificates failed"; }
    rm -rf "$TLS_DIR"
    mv "$tmp" "$TLS_DIR"
  fi
  tls_write_kafka_clients
}

needs_tls() {
  local s
  for s in "$@"; do case "$s" in kafka|*-tls) return 0 ;; esac; done
  return 1
}

# --- MariaDB ------------------------------------------------------------------------------
MARIADB_DIR="$STATE/mariadb"
MARIADB_CNF="$DOCKER_DIR/mariadb/outboxd.cnf"
MARIADB_TLS_DIR="$STATE/mariadb-tls"

mariadb_ready() { mariadb_client "$ADMIN_USER" "$ADMIN_PASSWORD" -e 'SELECT 1' >/dev/null; }
mariadb_tls_ready() { mariadb_tls_client "$ADMIN_USER" "$ADMIN_PASSWORD" -e 'SELECT 1' >/dev/null; }

# mariadb_start SVC DIR PORT DEFAULTS_FILE READY_CHECK INIT_SQL...: one MariaDB instance,
# data in DIR/data; both instances differ only in these.
mariadb_start() {
  local svc="$1" dir="$2" port="$3" cnf="$4" ready="$5"; shift 5
  local pid sock sql; pid="$(read_pid "$svc")"; sock="$(socket_dir "$svc")"
  if pid_alive "$pid"; then
    wait_until "$svc" "$pid" "$dir/mariadb.log" "$ready"
    log "$svc: already running (pid $pid)"
    return 0
  fi
  check_port_free "$svc" "$port"
  mkdir -p "$dir/data" "$sock"

  if [[ ! -d "$dir/data/mysql" ]]; then
    log "$svc: initialising $dir/data"
    # root@localhost authenticates by unix_socket (we are root); no test database.
    mariadb-install-db --defaults-file="$cnf" --user=root \
        --datadir="$dir/data" --auth-root-authentication-method=socket \
        --skip-test-db >"$dir/install-db.log" 2>&1 \
      || { tail_log "$dir/install-db.log"; die "$svc: mariadb-install-db failed"; }
  fi

  log "$svc: starting on 127.0.0.1:$port"
  # --defaults-file must come first; the rest override the shared config for this host.
  # Binlog kept 1 h, not a week: a full benchmark run writes several GB of it.
  launch "$dir/mariadb.log" /usr/sbin/mariadbd \
    --defaults-file="$cnf" \
    --user=root \
    --datadir="$dir/data" \
    --port="$port" --bind-address=127.0.0.1 \
    --socket="$sock/mariadb.sock" \
    --pid-file="$dir/mariadbd.pid" \
    --log-error="$dir/mariadb.log" \
    --binlog-expire-logs-seconds=3600
  pid="$LAUNCHED_PID"
  echo "$pid" >"$(pid_file "$svc")"

  # Ready for root over the socket -> (re)apply users -> ready for outboxd_admin over TCP.
  wait_until "$svc" "$pid" "$dir/mariadb.log" \
    mariadb-admin --no-defaults --socket="$sock/mariadb.sock" -u root ping
  for sql in "$@"; do
    mariadb --no-defaults --socket="$sock/mariadb.sock" -u root <"$sql" \
      || { tail_log "$dir/mariadb.log"; die "$svc: ${sql#"$ROOT/"} failed"; }
  done
  wait_until "$svc" "$pid" "$dir/mariadb.log" "$ready"
  log "$svc: ready (pid $pid)"
}

mariadb_up() {
  mariadb_start mariadb "$MARIADB_DIR" "$MARIADB_PORT" "$MARIADB_CNF" mariadb_ready \
    "$DOCKER_DIR/mariadb/init.sql"
}

mariadb_down() { stop_pid mariadb TERM; }

# The secured instance: outboxd.cnf + tls.cnf, with the certificates of .state/tls. One
# generated option file holds all three, so mariadb-install-db reads the same as mariadbd.
mariadb_tls_up() {
  local pid; pid="$(read_pid mariadb-tls)"
  mkdir -p "$MARIADB_TLS_DIR"
  cat >"$MARIADB_TLS_DIR/my.cnf" <<EOF2
# Written by scripts/services.sh on every start of mariadb-tls; edit the included files.
!include $MARIADB_CNF
!include $DOCKER_DIR/mariadb/tls.cnf

# The host's certificate paths instead of the container's.
[mariadbd]
ssl_ca   = $TLS_DIR/ca.pem
ssl_cert = $TLS_DIR/server.pem
ssl_key  = $TLS_DIR/server.key
EOF2
  if ! pid_alive "$pid"; then tls_stamp >"$MARIADB_TLS_DIR/tls-stamp"; fi
  mariadb_start mariadb-tls "$MARIADB_TLS_DIR" "$MARIADB_TLS_PORT" "$MARIADB_TLS_DIR/my.cnf" \
    mariadb_tls_ready "$DOCKER_DIR/mariadb/init.sql" "$DOCKER_DIR/mariadb/init-tls.sql"
}

mariadb_tls_down() { stop_pid mariadb-tls TERM; }

# --- PostgreSQL ---------------------------------------------------------------------------
PG_DIR="$STATE/postgres"
PG_TLS_DIR="$STATE/postgres-tls"

# The server runs as the postgres OS user, which must be able to reach DIR. A checkout
# under a root-owned 0700 directory (e.g. mktemp -d) would stop it, so add o+x ("search",
# not read) to every ancestor that lacks it.
pg_ensure_traversable() { ensure_traversable "$PG_OS_USER" "$@"; }

# ensure_traversable USER SVC DIR: the same for any OS user (RabbitMQ's too).
ensure_traversable() {
  local user="$1" svc="$2" target="$3" d ancestors=() i
  d="$target"
  while [[ "$d" != "/" ]]; do d="$(dirname "$d")"; ancestors+=("$d"); done
  # Outermost first: a directory can only be tested once its parents let us through.
  for ((i = ${#ancestors[@]} - 1; i >= 0; i--)); do
    d="${ancestors[i]}"
    if ! runuser -u "$user" -- test -x "$d"; then
      log "$svc: chmod o+x $d (so the $user user can reach $target)"
      chmod o+x "$d"
    fi
  done
}

pg_ready() {
  "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" &&
    psql_tcp "$ADMIN_USER" "$ADMIN_PASSWORD" -c 'SELECT 1' >/dev/null
}

pg_tls_ready() {
  "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_TLS_PORT" &&
    psql_tls "$ADMIN_USER" "$ADMIN_PASSWORD" -c 'SELECT 1' >/dev/null
}

# postgres_start SVC DIR PORT READY_CHECK CONFIGURE INIT_SQL...: one PostgreSQL cluster,
# data in DIR/data. CONFIGURE DIR copies that instance's configs into DIR/conf (for the
# postgres user to read) and sets PG_CONF_OPTS, the -c options naming them.
postgres_start() {
  local svc="$1" dir="$2" port="$3" ready="$4" configure="$5"; shift 5
  local pid sock sql; pid="$(read_pid "$svc")"; sock="$(socket_dir "$svc")"
  if pid_alive "$pid"; then
    wait_until "$svc" "$pid" "$dir/postgres.log" "$ready"
    log "$svc: already running (pid $pid)"
    return 0
  fi
  check_port_free "$svc" "$port"
  [[ -x "$PG_BIN/postgres" ]] || die "$svc: $PG_BIN/postgres not found (run install)"
  id "$PG_OS_USER" >/dev/null 2>&1 || die "$svc: OS user $PG_OS_USER missing (run install)"

  mkdir -p "$dir/data" "$dir/conf" "$sock"
  chown "$PG_OS_USER:$PG_OS_USER" "$dir" "$dir/data" "$dir/conf" "$sock"
  chmod 700 "$dir/data"
  pg_ensure_traversable "$svc" "$dir"

  if [[ ! -f "$dir/data/PG_VERSION" ]]; then
    log "$svc: initialising $dir/data"
    runuser -u "$PG_OS_USER" -- "$PG_BIN/initdb" -D "$dir/data" -U postgres \
        --auth-local=peer --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 \
        >"$dir/initdb.log" 2>&1 \
      || { tail_log "$dir/initdb.log"; die "$svc: initdb failed"; }
  fi

  PG_CONF_OPTS=""
  "$configure" "$dir"
  touch "$dir/postgres.log"
  chown "$PG_OS_USER:$PG_OS_USER" "$dir/postgres.log"

  log "$svc: starting on 127.0.0.1:$port"
  local opts="$PG_CONF_OPTS"
  opts+=" -c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$sock"
  # pg_ctl detaches the postmaster and waits (-w) until it accepts connections. Its own
  # few messages go to the same log as the server's.
  # shellcheck disable=SC2094
  runuser -u "$PG_OS_USER" -- "$PG_BIN/pg_ctl" start -D "$dir/data" -l "$dir/postgres.log" \
      -w -t "$TIMEOUT" -s -o "$opts" </dev/null >>"$dir/postgres.log" 2>&1 9>&- \
    || { tail_log "$dir/postgres.log"; die "$svc: pg_ctl start failed"; }
  pid="$(head -n 1 "$dir/data/postmaster.pid")"
  echo "$pid" >"$(pid_file "$svc")"

  # Roles and database over the socket as the postgres superuser (peer auth).
  for sql in "$@"; do
    runuser -u "$PG_OS_USER" -- psql -X -q -h "$sock" -p "$port" -U postgres -d postgres \
        -v ON_ERROR_STOP=1 -f - <"$sql" >/dev/null \
      || { tail_log "$dir/postgres.log"; die "$svc: ${sql#"$ROOT/"} failed"; }
  done
  wait_until "$svc" "$pid" "$dir/postgres.log" "$ready"
  log "$svc: ready (pid $pid)"
}

# The shared configs from docker/postgres, copied where the postgres user can read them.
pg_configure() {
  local dir="$1"
  install -m 0644 -o "$PG_OS_USER" -g "$PG_OS_USER" \
    "$DOCKER_DIR/postgres/postgresql.conf" "$DOCKER_DIR/postgres/pg_hba.conf" "$dir/conf/"
  PG_CONF_OPTS="-c config_file=$dir/conf/postgresql.conf -c hba_file=$dir/conf/pg_hba.conf"
}

# The secured cluster: tls.conf (which includes postgresql.conf) and its pg_hba/pg_ident,
# plus copies of the certificates. The server key must belong to the postgres user, mode
# 0600: PostgreSQL refuses a key that others may read.
pg_tls_configure() {
  local dir="$1" c="$1/conf"
  install -m 0644 -o "$PG_OS_USER" -g "$PG_OS_USER" \
    "$DOCKER_DIR/postgres/postgresql.conf" "$DOCKER_DIR/postgres/tls.conf" \
    "$DOCKER_DIR/postgres/pg_hba-tls.conf" "$DOCKER_DIR/postgres/pg_ident-tls.conf" "$c/"
  install -d -m 0700 -o "$PG_OS_USER" -g "$PG_OS_USER" "$c/tls"
  install -m 0644 -o "$PG_OS_USER" -g "$PG_OS_USER" "$TLS_DIR/ca.pem" "$TLS_DIR/server.pem" "$c/tls/"
  install -m 0600 -o "$PG_OS_USER" -g "$PG_OS_USER" "$TLS_DIR/server.key" "$c/tls/"
  tls_stamp >"$dir/tls-stamp"
  PG_CONF_OPTS="-c config_file=$c/tls.conf -c hba_file=$c/pg_hba-tls.conf"
  PG_CONF_OPTS+=" -c ident_file=$c/pg_ident-tls.conf -c ssl_ca_file=$c/tls/ca.pem"
  PG_CONF_OPTS+=" -c ssl_cert_file=$c/tls/server.pem -c ssl_key_file=$c/tls/server.key"
}

postgres_up() {
  postgres_start postgres "$PG_DIR" "$PG_PORT" pg_ready pg_configure \
    "$DOCKER_DIR/postgres/init.sql"
}

postgres_tls_up() {
  postgres_start postgres-tls "$PG_TLS_DIR" "$PG_TLS_PORT" pg_tls_ready pg_tls_configure \
    "$DOCKER_DIR/postgres/init.sql" "$DOCKER_DIR/postgres/init-tls.sql"
}

# SIGINT = "fast" shutdown: SIGTERM ("smart") would wait for every client to disconnect,
# including a replication connection a test left open.
postgres_down() { stop_pid postgres INT; }
postgres_tls_down() { stop_pid postgres-tls INT; }

# --- Kafka --------------------------------------------------------------------------------
KAFKA_DIR="$STATE/kafka"
KAFKA_PROPS="$KAFKA_DIR/server.properties"
# The cluster id whose metadata holds our SCRAM users (see kafka_ensure_scram_users).
KAFKA_SCRAM_MARKER="$KAFKA_DIR/scram-users-cluster-id"

# The shared server.properties and secured.properties, then the host overrides (last value
# of a key wins). The plaintext listener is the same as before the secured ones existed.
kafka_write_props() {
  {
    cat "$DOCKER_DIR/kafka/server.properties"
    printf '\n'
    cat "$DOCKER_DIR/kafka/secured.properties"
    cat <<EOF

# ---- overrides appended by scripts/services.sh for the local harness ----
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT,SASL_SSL://127.0.0.1:$KAFKA_SASL_PORT,SSL://127.0.0.1:$KAFKA_SSL_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,SASL_SSL://localhost:$KAFKA_SASL_PORT,SSL://localhost:$KAFKA_SSL_PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
log.dirs=$KAFKA_DIR/data
ssl.keystore.location=$TLS_DIR/server.p12
ssl.truststore.location=$TLS_DIR/truststore.p12
EOF
  } >"$KAFKA_PROPS"
}

# The JVM command line for the broker and for the tools (StorageTool) alike.
KAFKA_JAVA=(java "${KAFKA_HEAP[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true
            -Dlog4j2.configurationFile="$KAFKA_LOG4J" -cp "$KAFKA_LIBS/*")

kafka_ports_open() {
  port_open "$KAFKA_PORT" && port_open "$KAFKA_SASL_PORT" && port_open "$KAFKA_SSL_PORT"
}

# Ready = the broker said so in this start's part of the log, and the ports answer.
# "Kafka Server started" is logged by KafkaRaftServer after the broker has caught up with
# the metadata log and been unfenced, i.e. when it serves Metadata/Produce requests.
# .state/kafka/log-offset remembers where this start's part of kafka.log begins.
kafka_started() {
  local offset; offset="$(cat "$KAFKA_DIR/log-offset" 2>/dev/null || echo 0)"
  kafka_ports_open &&
    # No `grep -q`: it would exit at the first match and, under pipefail, tail's SIGPIPE
    # would make the whole check fail once the log has grown past a pipe buffer.
    tail -c +"$((offset + 1))" "$KAFKA_DIR/kafka.log" | grep -F 'Kafka Server started' >/dev/null
}

kafka_listening() { port_open "$KAFKA_PORT"; }

kafka_cluster_id() { sed -n 's/^cluster\.id=//p' "$KAFKA_DIR/data/meta.properties" 2>/dev/null; }

# SCRAM credentials are cluster metadata, not config. A data dir formatted here gets them
# at format time (--add-scram); one formatted before the secured listeners existed gets
# them once from kafka-configs over PLAINTEXT (an upsert, so running it again is harmless).
# The marker names the cluster they were made for, so a new data dir is never skipped.
kafka_ensure_scram_users() {
  local id mech; id="$(kafka_cluster_id)"
  [[ -n "$id" && "$(cat "$KAFKA_SCRAM_MARKER" 2>/dev/null)" == "$id" ]] && return 0
  log "kafka: adding SCRAM-SHA-256/512 user $KAFKA_SASL_USER (data dir formatted without it)"
  : >"$KAFKA_DIR/scram-users.log"
  # One mechanism per call: Kafka 4.1 rejects two credentials of one user in one request
  # ("A user credential cannot be altered twice in the same request").
  for mech in SCRAM-SHA-256 SCRAM-SHA-512; do
    java -Xmx256m -Djava.awt.headless=true -Dlog4j2.configurationFile="$KAFKA_TOOLS_LOG4J" \
        -cp "$KAFKA_LIBS/*" kafka.admin.ConfigCommand --bootstrap-server "127.0.0.1:$KAFKA_PORT" \
        --alter --entity-type users --entity-name "$KAFKA_SASL_USER" \
        --add-config "$mech=[password=$KAFKA_SASL_PASSWORD]" >>"$KAFKA_DIR/scram-users.log" 2>&1 \
      || { tail_log "$KAFKA_DIR/scram-users.log"; die "kafka: adding the $mech user failed"; }
  done
  printf '%s\n' "$id" >"$KAFKA_SCRAM_MARKER"
}

kafka_up() {
  local pid; pid="$(read_pid kafka)"
  if pid_alive "$pid"; then
    # Started (and found ready) by an earlier `up`; its log may have rolled since, so only
    # the listeners are checked here.
    wait_until "kafka" "$pid" "$KAFKA_DIR/kafka.log" kafka_listening
    if ! port_open "$KAFKA_SASL_PORT" || ! port_open "$KAFKA_SSL_PORT"; then
      die "kafka: running (pid $pid) without the secured listeners on :$KAFKA_SASL_PORT and
       :$KAFKA_SSL_PORT (started by an older services.sh); restart it:
       scripts/services.sh restart kafka"
    fi
    log "kafka: already running (pid $pid)"
    return 0
  fi
  check_port_free kafka "$KAFKA_PORT"
  check_port_free kafka-controller "$KAFKA_CONTROLLER_PORT"
  check_port_free kafka-sasl-ssl "$KAFKA_SASL_PORT"
  check_port_free kafka-ssl "$KAFKA_SSL_PORT"
  command -v java >/dev/null || die "kafka: java not found (run install)"
  [[ -f "$KAFKA_LIBS/.resolved-kafka-$KAFKA_VERSION" ]] || die "kafka: jars missing (run install)"
  mkdir -p "$KAFKA_DIR/data"
  kafka_write_props

  if [[ ! -f "$KAFKA_DIR/data/meta.properties" ]]; then
    # A cluster id is 16 random bytes in URL-safe base64 without padding (22 chars).
    local cluster_id
    # Like Kafka's Uuid.randomUuid: never one starting with '-', which the command line
    # would take for an option (1 random id in 64).
    cluster_id=-
    while [[ $cluster_id == -* ]]; do
      cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
    done
    log "kafka: formatting $KAFKA_DIR/data (cluster id $cluster_id)"
    # kafka.tools.StorageTool is what bin/kafka-storage.sh runs (in the kafka_2.13 jar).
    "${KAFKA_JAVA[@]}" kafka.tools.StorageTool format --config "$KAFKA_PROPS" \
        --cluster-id "$cluster_id" --ignore-formatted \
        --add-scram "SCRAM-SHA-256=[name=$KAFKA_SASL_USER,password=$KAFKA_SASL_PASSWORD]" \
        --add-scram "SCRAM-SHA-512=[name=$KAFKA_SASL_USER,password=$KAFKA_SASL_PASSWORD]" \
        >"$KAFKA_DIR/format.log" 2>&1 \
      || { tail_log "$KAFKA_DIR/format.log"; die "kafka: storage format failed"; }
    printf '%s\n' "$cluster_id" >"$KAFKA_SCRAM_MARKER"
  fi

  log "kafka: starting on 127.0.0.1:$KAFKA_PORT (controller :$KAFKA_CONTROLLER_PORT," \
      "SASL_SSL localhost:$KAFKA_SASL_PORT, SSL localhost:$KAFKA_SSL_PORT)"
  touch "$KAFKA_DIR/kafka.log"
  stat -c %s "$KAFKA_DIR/kafka.log" >"$KAFKA_DIR/log-offset"
  printf '\n==== %s services.sh: starting kafka ====\n' "$(date -Is)" >>"$KAFKA_DIR/kafka.log"
  tls_stamp >"$KAFKA_DIR/tls-stamp"
  launch "$KAFKA_DIR/kafka.log" "${KAFKA_JAVA[@]}" kafka.Kafka "$KAFKA_PROPS"
  pid="$LAUNCHED_PID"
  echo "$pid" >"$(pid_file kafka)"
  wait_until "kafka" "$pid" "$KAFKA_DIR/kafka.log" kafka_started
  kafka_ensure_scram_users
  log "kafka: ready (pid $pid)"
}

# SIGTERM runs the broker's shutdown hook: controlled shutdown, logs flushed and closed, so
# the next start needs no log recovery. The data is kept.
kafka_down() { stop_pid kafka TERM; }

# --- NATS (JetStream) -----------------------------------------------------------------------
NATS_DIR="$STATE/nats"

# The whole config, written on every start: client port and monitoring (/healthz, /jsz,
# /varz) on loopback, JetStream with its store under .state/nats/data, and one user.
nats_write_conf() {
  cat >"$NATS_DIR/nats.conf" <<EOF2
# Written by scripts/services.sh on every start of nats; edit that script instead.
server_name: outboxd
listen: "127.0.0.1:$NATS_PORT"
http: "127.0.0.1:$NATS_MONITOR_PORT"
pid_file: "$NATS_DIR/nats-server.pid"

jetstream {
  store_dir: "$NATS_DIR/data"
  max_memory_store: 256MB
  max_file_store: 2GB
}

# No accounts: the user is in the global account, which has JetStream. Clients without
# these credentials are refused (Authorization Violation).
authorization {
  users: [
    { user: "$NATS_USER", password: "$NATS_PASSWORD" }
  ]
}
EOF2
}

# /healthz answers 200 once the server (JetStream included) is ready.
nats_ready() {
  port_open "$NATS_PORT" &&
    curl -sf --max-time 2 "http://127.0.0.1:$NATS_MONITOR_PORT/healthz" >/dev/null
}

nats_up() {
  local pid; pid="$(read_pid nats)"
  if pid_alive "$pid"; then
    wait_until nats "$pid" "$NATS_DIR/nats.log" nats_ready
    log "nats: already running (pid $pid)"
    return 0
  fi
  check_port_free nats "$NATS_PORT"
  check_port_free nats-monitor "$NATS_MONITOR_PORT"
  [[ -x /usr/sbin/nats-server ]] || die "nats: /usr/sbin/nats-server not found (run install)"
  command -v curl >/dev/null || die "nats: curl not found (run install)"
  mkdir -p "$NATS_DIR/data"
  nats_write_conf
  log "nats: starting on 127.0.0.1:$NATS_PORT (JetStream; monitoring :$NATS_MONITOR_PORT)"
  printf '\n==== %s services.sh: starting nats ====\n' "$(date -Is)" >>"$NATS_DIR/nats.log"
  launch "$NATS_DIR/nats.log" /usr/sbin/nats-server -c "$NATS_DIR/nats.conf"
  pid="$LAUNCHED_PID"
  echo "$pid" >"$(pid_file nats)"
  wait_until nats "$pid" "$NATS_DIR/nats.log" nats_ready
  log "nats: ready (pid $pid)"
}

# SIGTERM: JetStream's streams are flushed and closed, the data is kept.
nats_down() { stop_pid nats TERM; }

# --- Redis (Streams) ------------------------------------------------------------------------
REDIS_DIR="$STATE/redis"

# The whole config, written on every start (the distro's /etc/redis/redis.conf is not
# read): loopback, AOF fsynced on every write, and ACL users. The `default` user has a
# password of its own (a client that forgets to AUTH gets NOAUTH, not silent success) but
# stays on: Redis 7.0 replays the append-only file's MULTI/EXEC blocks as `default`, and
# with `default` off drops them all (NOPERM, redis/redis#14541): a restart would lose every
# committed batch of the Redis sink (README, "Redis Streams"; the sink refuses such a server).
redis_write_conf() {
  cat >"$REDIS_DIR/redis.conf" <<EOF2
# Written by scripts/services.sh on every start of redis; edit that script instead.
bind 127.0.0.1
port $REDIS_PORT
protected-mode yes
daemonize no
supervised no
pidfile $REDIS_DIR/redis-server.pid
logfile ""
loglevel notice
dir $REDIS_DIR/data
# Durability from the append-only file alone, fsynced before every reply; no RDB snapshots.
appendonly yes
appendfsync always
appenddirname appendonlydir
save ""
user default on >$REDIS_DEFAULT_PASSWORD ~* &* +@all
user $REDIS_USER on >$REDIS_PASSWORD ~* &* +@all
EOF2
}

redis_cli() {
  REDISCLI_AUTH="$REDIS_PASSWORD" redis-cli --no-auth-warning -h 127.0.0.1 -p "$REDIS_PORT" \
    --user "$REDIS_USER" "$@"
}

# PONG (not LOADING ...: while it replays the AOF) as the outboxd user.
redis_ready() { [[ "$(redis_cli ping 2>/dev/null)" == PONG ]]; }

redis_up() {
  local pid; pid="$(read_pid redis)"
  if pid_alive "$pid"; then
    wait_until redis "$pid" "$REDIS_DIR/redis.log" redis_ready
    log "redis: already running (pid $pid)"
    return 0
  fi
  check_port_free redis "$REDIS_PORT"
  command -v redis-server >/dev/null || die "redis: redis-server not found (run install)"
  command -v redis-cli >/dev/null || die "redis: redis-cli not found (run install)"
  mkdir -p "$REDIS_DIR/data"
  redis_write_conf
  log "redis: starting on 127.0.0.1:$REDIS_PORT (AOF, appendfsync always)"
  printf '\n==== %s services.sh: starting redis ====\n' "$(date -Is)" >>"$REDIS_DIR/redis.log"
  launch "$REDIS_DIR/redis.log" redis-server "$REDIS_DIR/redis.conf"
  pid="$LAUNCHED_PID"
  echo "$pid" >"$(pid_file redis)"
  wait_until redis "$pid" "$REDIS_DIR/redis.log" redis_ready
  log "redis: ready (pid $pid)"
}

# SIGTERM: Redis fsyncs the AOF and exits; the data is kept.
redis_down() { stop_pid redis TERM; }

# --- RabbitMQ (AMQP 0-9-1 + streams) ----------------------------------------------------------
# One node, outboxd@localhost, run as the rabbitmq OS user with everything of its own under
# .state/rabbitmq: the Erlang cookie (HOME), mnesia, logs, config, and its own epmd on
# 127.0.0.1 (ERL_EPMD_PORT), so neither /var/lib/rabbitmq nor the system's epmd on 4369 is
# touched. The scripts in /usr/lib/rabbitmq/bin are called directly: Debian's
# /usr/sbin/rabbitmq* wrappers `su` to rabbitmq, which resets HOME (and so the cookie).
RABBITMQ_DIR="$STATE/rabbitmq"
RABBITMQ_OS_USER=rabbitmq
RABBITMQ_NODE=outboxd@localhost
RABBITMQ_SBIN=/usr/lib/rabbitmq/bin
# The management plugin costs no measurable start time here (~4-5 s either way) and 20 MB;
# its HTTP API is a cheap way for tests to look at queues (the CLI starts a VM per call).
RABBITMQ_PLUGINS=(rabbitmq_stream rabbitmq_management)

# The environment of the node and of its CLI tools alike (env -i: nothing else leaks in).
RABBITMQ_ENV=(
  HOME="$RABBITMQ_DIR/home" PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 LC_ALL=C.UTF-8
  RABBITMQ_NODENAME="$RABBITMQ_NODE"
  RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$RABBITMQ_PORT"
  RABBITMQ_DIST_PORT="$RABBITMQ_DIST_PORT"
  ERL_EPMD_ADDRESS=127.0.0.1 ERL_EPMD_PORT="$RABBITMQ_EPMD_PORT"
  # Distribution on loopback only, the node's and the CLI tools' (which would otherwise
  # listen on 0.0.0.0, by default on 35672-35682: our AMQP port).
  RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
  RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
  RABBITMQ_CTL_DIST_PORT_MIN="$RABBITMQ_CTL_PORT_MIN" RABBITMQ_CTL_DIST_PORT_MAX="$RABBITMQ_CTL_PORT_MAX"
  RABBITMQ_CONF_ENV_FILE="$RABBITMQ_DIR/rabbitmq-env.conf"
  RABBITMQ_CONFIG_FILE="$RABBITMQ_DIR/rabbitmq.conf"
  RABBITMQ_ADVANCED_CONFIG_FILE="$RABBITMQ_DIR/advanced.config"
  RABBITMQ_ENABLED_PLUGINS_FILE="$RABBITMQ_DIR/enabled_plugins"
  RABBITMQ_MNESIA_BASE="$RABBITMQ_DIR/mnesia"
  RABBITMQ_LOG_BASE="$RABBITMQ_DIR/log"
  RABBITMQ_PID_FILE="$RABBITMQ_DIR/rabbitmq.pid"
  ERL_CRASH_DUMP="$RABBITMQ_DIR/log/erl_crash.dump"
)

# rabbitmq_as CMD...: CMD as the rabbitmq user, in .state/rabbitmq, with RABBITMQ_ENV only.
rabbitmq_as() {
  setpriv --reuid="$RABBITMQ_OS_USER" --regid="$RABBITMQ_OS_USER" --init-groups \
    env -i -C "$RABBITMQ_DIR" "${RABBITMQ_ENV[@]}" "$@"
}

# rabbitmq_ctl TOOL ARGS...: rabbitmqctl, rabbitmq-diagnostics, ... against our node.
rabbitmq_ctl() { local tool="$1"; shift; rabbitmq_as "$RABBITMQ_SBIN/$tool" "$@"; }

# The config, written on every start. default_user is created (instead of guest) when the
# node boots with an empty database; rabbitmq_ensure_user keeps it so afterwards.
rabbitmq_write_conf() {
  local d="$RABBITMQ_DIR"
  cat >"$d/rabbitmq.conf" <<EOF2
# Written by scripts/services.sh on every start of rabbitmq; edit that script instead.
# AMQP: RABBITMQ_NODE_IP_ADDRESS / RABBITMQ_NODE_PORT (127.0.0.1:$RABBITMQ_PORT).
stream.listeners.tcp.1 = 127.0.0.1:$RABBITMQ_STREAM_PORT
stream.advertised_host = 127.0.0.1
stream.advertised_port = $RABBITMQ_STREAM_PORT
default_vhost = /
default_user = $RABBITMQ_USER
default_pass = $RABBITMQ_PASSWORD
default_user_tags.administrator = true
default_permissions.configure = .*
default_permissions.read = .*
default_permissions.write = .*
loopback_users = none
management.tcp.ip = 127.0.0.1
management.tcp.port = $RABBITMQ_MANAGEMENT_PORT
# One log, the node's stdout (.state/rabbitmq/rabbitmq.log).
log.console = true
log.console.level = info
log.console.use_colors = off
log.file = false
EOF2
  printf '# Written by scripts/services.sh: keeps /etc/rabbitmq/rabbitmq-env.conf out.\n' \
    >"$d/rabbitmq-env.conf"
  printf '[%s].\n' "$(IFS=,; echo "${RABBITMQ_PLUGINS[*]}")" >"$d/enabled_plugins"
}

# "Server startup complete" in this start's part of the log (after the plugins started),
# and the listeners answer. .state/rabbitmq/log-offset: where this start's part begins.
rabbitmq_started() {
  local offset; offset="$(cat "$RABBITMQ_DIR/log-offset" 2>/dev/null || echo 0)"
  rabbitmq_listening &&
    tail -c +"$((offset + 1))" "$RABBITMQ_DIR/rabbitmq.log" | grep -F 'Server startup complete' >/dev/null
}

rabbitmq_listening() {
  port_open "$RABBITMQ_PORT" && port_open "$RABBITMQ_STREAM_PORT" && port_open "$RABBITMQ_MANAGEMENT_PORT"
}

# The outboxd user as it should be: its password, the administrator tag, all permissions on
# vhost /. Asked of the management API (curl; each CLI call costs the start of an Erlang VM,
# 1-2 s here).
rabbitmq_user_ok() {
  local api="http://127.0.0.1:$RABBITMQ_MANAGEMENT_PORT/api" me perms
  me="$(curl -sf --max-time 5 -u "$RABBITMQ_USER:$RABBITMQ_PASSWORD" "$api/whoami")" &&
    [[ "$me" == *'"tags":['*'"administrator"'* ]] &&
    perms="$(curl -sf --max-time 5 -u "$RABBITMQ_USER:$RABBITMQ_PASSWORD" \
               "$api/permissions/%2F/$RABBITMQ_USER")" &&
    [[ "$perms" == *'"configure":".*","write":".*","read":".*"'* ]]
}

# default_user makes that user when a node boots with an empty database; on an older one
# (or after a change by hand) rabbitmqctl makes or repairs it.
rabbitmq_ensure_user() {
  local out="$RABBITMQ_DIR/ctl.log"
  rabbitmq_user_ok && return 0
  log "rabbitmq: (re)making user $RABBITMQ_USER (administrator, all permissions on /)"
  : >"$out"
  rabbitmq_ctl rabbitmqctl -q add_user "$RABBITMQ_USER" "$RABBITMQ_PASSWORD" >>"$out" 2>&1 9>&- ||
    rabbitmq_ctl rabbitmqctl -q change_password "$RABBITMQ_USER" "$RABBITMQ_PASSWORD" >>"$out" 2>&1 9>&- ||
    { tail_log "$out"; die "rabbitmq: could not add user $RABBITMQ_USER"; }
  { rabbitmq_ctl rabbitmqctl -q set_user_tags "$RABBITMQ_USER" administrator &&
    rabbitmq_ctl rabbitmqctl -q set_permissions -p / "$RABBITMQ_USER" '.*' '.*' '.*'
  } >>"$out" 2>&1 9>&- || { tail_log "$out"; die "rabbitmq: could not set up user $RABBITMQ_USER"; }
  rabbitmq_user_ok || die "rabbitmq: user $RABBITMQ_USER still not as expected after repair; see $out"
}

rabbitmq_up() {
  local pid d="$RABBITMQ_DIR"; pid="$(read_pid rabbitmq)"
  if pid_alive "$pid"; then
    wait_until rabbitmq "$pid" "$d/rabbitmq.log" rabbitmq_listening
    log "rabbitmq: already running (pid $pid)"
    return 0
  fi
  check_port_free rabbitmq "$RABBITMQ_PORT"
  check_port_free rabbitmq-stream "$RABBITMQ_STREAM_PORT"
  check_port_free rabbitmq-management "$RABBITMQ_MANAGEMENT_PORT"
  check_port_free rabbitmq-dist "$RABBITMQ_DIST_PORT"
  [[ -x "$RABBITMQ_SBIN/rabbitmq-server" ]] || die "rabbitmq: $RABBITMQ_SBIN/rabbitmq-server not found (run install)"
  id "$RABBITMQ_OS_USER" >/dev/null 2>&1 || die "rabbitmq: OS user $RABBITMQ_OS_USER missing (run install)"
  command -v curl >/dev/null || die "rabbitmq: curl not found (run install)"

  mkdir -p "$d/home" "$d/mnesia" "$d/log"
  # The cookie the node and the CLI tools share; made here (not by whichever Erlang VM
  # comes first), so it always belongs to the rabbitmq user, mode 0400 as Erlang wants.
  if [[ ! -s "$d/home/.erlang.cookie" ]]; then
    head -c 32 /dev/urandom | sha256sum | cut -c1-40 | tr -d '\n' >"$d/home/.erlang.cookie"
  fi
  chmod 0400 "$d/home/.erlang.cookie"
  chmod 0700 "$d/home"
  rabbitmq_write_conf
  touch "$d/rabbitmq.log"
  chown -R "$RABBITMQ_OS_USER:$RABBITMQ_OS_USER" "$d"
  ensure_traversable "$RABBITMQ_OS_USER" rabbitmq "$d"

  log "rabbitmq: starting $RABBITMQ_NODE on 127.0.0.1:$RABBITMQ_PORT (stream :$RABBITMQ_STREAM_PORT," \
      "management :$RABBITMQ_MANAGEMENT_PORT, distribution :$RABBITMQ_DIST_PORT, epmd :$RABBITMQ_EPMD_PORT)"
  stat -c %s "$d/rabbitmq.log" >"$d/log-offset"
  printf '\n==== %s services.sh: starting rabbitmq ====\n' "$(date -Is)" >>"$d/rabbitmq.log"
  # RUNNING_UNDER_SYSTEMD makes the script exec erl in its own place (as it does under the
  # systemd unit) rather than wait on it, so the pid recorded is the broker's beam.smp,
  # which stops cleanly on SIGTERM.
  launch "$d/rabbitmq.log" setpriv --reuid="$RABBITMQ_OS_USER" --regid="$RABBITMQ_OS_USER" \
    --init-groups env -i -C "$d" "${RABBITMQ_ENV[@]}" RUNNING_UNDER_SYSTEMD=true \
    "$RABBITMQ_SBIN/rabbitmq-server"
  pid="$LAUNCHED_PID"
  echo "$pid" >"$(pid_file rabbitmq)"
  wait_until rabbitmq "$pid" "$d/rabbitmq.log" rabbitmq_started
  rabbitmq_ensure_user
  log "rabbitmq: ready (pid $pid)"
}

# SIGTERM: the VM's init:stop(), RabbitMQ's orderly shutdown. Then our epmd, which the node
# started and which would otherwise outlive it.
rabbitmq_down() {
  stop_pid rabbitmq TERM
  stop_listener rabbitmq "$RABBITMQ_EPMD_PORT" epmd "its epmd"
}

# --- env / status ---------------------------------------------------------------------------
env_lines() {
  cat <<EOF
export OUTBOXD_TEST_MYSQL_ADMIN_URL=mysql://$ADMIN_USER:$ADMIN_PASSWORD@127.0.0.1:$MARIADB_PORT
export OUTBOXD_TEST_MYSQL_URL=mysql://$RELAY_USER:$RELAY_PASSWORD@127.0.0.1:$MARIADB_PORT
export OUTBOXD_TEST_PG_ADMIN_URL=postgres://$ADMIN_USER:$ADMIN_PASSWORD@127.0.0.1:$PG_PORT/$PG_DATABASE
export OUTBOXD_TEST_PG_URL=postgres://$RELAY_USER:$RELAY_PASSWORD@127.0.0.1:$PG_PORT/$PG_DATABASE
export OUTBOXD_KAFKA_BOOTSTRAP=127.0.0.1:$KAFKA_PORT
export OUTBOXD_TEST_MYSQL_TLS_ADMIN_URL=mysql://$ADMIN_USER:$ADMIN_PASSWORD@localhost:$MARIADB_TLS_PORT
export OUTBOXD_TEST_MYSQL_TLS_URL=mysql://$RELAY_USER:$RELAY_PASSWORD@localhost:$MARIADB_TLS_PORT
export OUTBOXD_TEST_MYSQL_MTLS_URL=mysql://$MTLS_USER:$MTLS_MARIADB_PASSWORD@localhost:$MARIADB_TLS_PORT
export OUTBOXD_TEST_PG_TLS_ADMIN_URL=postgres://$ADMIN_USER:$ADMIN_PASSWORD@localhost:$PG_TLS_PORT/$PG_DATABASE
export OUTBOXD_TEST_PG_TLS_URL=postgres://$RELAY_USER:$RELAY_PASSWORD@localhost:$PG_TLS_PORT/$PG_DATABASE
export OUTBOXD_TEST_PG_MTLS_URL=postgres://$MTLS_USER@localhost:$PG_TLS_PORT/$PG_DATABASE
export OUTBOXD_KAFKA_SASL_BOOTSTRAP=localhost:$KAFKA_SASL_PORT
export OUTBOXD_KAFKA_SSL_BOOTSTRAP=localhost:$KAFKA_SSL_PORT
export OUTBOXD_KAFKA_SASL_USER=$KAFKA_SASL_USER
export OUTBOXD_KAFKA_SASL_PASSWORD=$KAFKA_SASL_PASSWORD
export OUTBOXD_TEST_TLS_DIR=$TLS_DIR
export OUTBOXD_TEST_TLS_CA=$TLS_DIR/ca.pem
export OUTBOXD_TEST_TLS_OTHER_CA=$TLS_DIR/other-ca.pem
export OUTBOXD_TEST_TLS_CLIENT_CERT=$TLS_DIR/client.pem
export OUTBOXD_TEST_TLS_CLIENT_KEY=$TLS_DIR/client.key
export OUTBOXD_TEST_TLS_CLIENT_P12=$TLS_DIR/client.p12
export OUTBOXD_TEST_TLS_TRUSTSTORE_P12=$TLS_DIR/truststore.p12
export OUTBOXD_TEST_TLS_TRUSTSTORE_JKS=$TLS_DIR/truststore.jks
export OUTBOXD_TEST_TLS_KEYSTORE_PASSWORD=$KEYSTORE_PASSWORD
export OUTBOXD_TEST_TLS_TRUSTSTORE_PASSWORD=$TRUSTSTORE_PASSWORD
export OUTBOXD_NATS_URL=nats://127.0.0.1:$NATS_PORT
export OUTBOXD_NATS_USER=$NATS_USER
export OUTBOXD_NATS_PASSWORD=$NATS_PASSWORD
export OUTBOXD_NATS_MONITOR_URL=http://127.0.0.1:$NATS_MONITOR_PORT
export OUTBOXD_REDIS_URL=redis://127.0.0.1:$REDIS_PORT
export OUTBOXD_REDIS_USER=$REDIS_USER
export OUTBOXD_REDIS_PASSWORD=$REDIS_PASSWORD
export OUTBOXD_RABBITMQ_URL=amqp://127.0.0.1:$RABBITMQ_PORT/%2f
export OUTBOXD_RABBITMQ_USER=$RABBITMQ_USER
export OUTBOXD_RABBITMQ_PASSWORD=$RABBITMQ_PASSWORD
export OUTBOXD_RABBITMQ_STREAM_PORT=$RABBITMQ_STREAM_PORT
export OUTBOXD_RABBITMQ_MANAGEMENT_URL=http://127.0.0.1:$RABBITMQ_MANAGEMENT_PORT
EOF
}

cmd_status() {
  local s pid port rc=0
  for s in "$@"; do
    pid="$(read_pid "$s")"; port="$(port_of "$s")"
    if pid_alive "$pid"; then
      if [[ "$s" == kafka ]] && port_open "$port" && ! kafka_ports_open; then
        printf '%-12s running  pid %-7s 127.0.0.1:%s without its secured listeners (restart kafka)\n' \
          "$s" "$pid" "$port"; rc=3
      elif [[ "$s" == kafka ]] && port_open "$port"; then
        printf '%-12s running  pid %-7s 127.0.0.1:%s, SASL_SSL localhost:%s, SSL localhost:%s\n' \
          "$s" "$pid" "$port" "$KAFKA_SASL_PORT" "$KAFKA_SSL_PORT"
      elif [[ "$s" == nats ]] && port_open "$port"; then
        printf '%-12s running  pid %-7s 127.0.0.1:%s, monitoring http://127.0.0.1:%s\n' \
          "$s" "$pid" "$port" "$NATS_MONITOR_PORT"
      elif [[ "$s" == rabbitmq ]] && port_open "$port"; then
        printf '%-12s running  pid %-7s 127.0.0.1:%s, stream :%s, management http://127.0.0.1:%s\n' \
          "$s" "$pid" "$port" "$RABBITMQ_STREAM_PORT" "$RABBITMQ_MANAGEMENT_PORT"
      elif port_open "$port"; then
        printf '%-12s running  pid %-7s 127.0.0.1:%s\n' "$s" "$pid" "$port"
      else
        printf '%-12s starting pid %-7s 127.0.0.1:%s not open yet\n' "$s" "$pid" "$port"; rc=3
      fi
    else
      printf '%-12s stopped\n' "$s"; rc=3
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

# rabbitmq-tool TOOL ARGS...: RabbitMQ's CLI with the node's environment (cookie, node name,
# epmd port), as the rabbitmq user.
cmd_rabbitmq_tool() {
  (( $# )) || die "rabbitmq-tool: name a tool, e.g. rabbitmqctl list_queues"
  local tool="$1"; shift
  case "$tool" in
    rabbitmqctl|rabbitmq-diagnostics|rabbitmq-plugins|rabbitmq-queues|rabbitmq-streams|rabbitmq-upgrade) ;;
    *) die "rabbitmq-tool: unknown tool '$tool' (rabbitmqctl, rabbitmq-diagnostics, rabbitmq-plugins,
       rabbitmq-queues, rabbitmq-streams, rabbitmq-upgrade)" ;;
  esac
  [[ $EUID -eq 0 ]] || die "rabbitmq-tool: run as root (it runs the tool as the $RABBITMQ_OS_USER user)"
  [[ -s "$RABBITMQ_DIR/home/.erlang.cookie" ]] || die "rabbitmq-tool: no $RABBITMQ_DIR yet (run up rabbitmq)"
  rabbitmq_ctl "$tool" "$@"
}

# --- main ---------------------------------------------------------------------------------
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; }

main() {
  local cmd="${1:-}"; shift || true
  case "$cmd" in
    kafka-start) cmd=up;   set -- kafka ;;
    kafka-stop)  cmd=down; set -- kafka ;;
    kafka-tool)  cmd_kafka_tool "$@" ;;
    rabbitmq-tool) cmd_rabbitmq_tool "$@"; return $? ;;
    start)       cmd=up ;;
    tls)         (( $# == 0 )) || die "tls: takes no service names" ;;
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
    install|up|down|restart|tls) ;;
    *) usage; die "unknown command '$cmd'" ;;
  esac

  [[ $EUID -eq 0 ]] || die "run as root (installs packages; runs mariadbd/postgres/kafka/brokers)"
  mkdir -p "$STATE"
  # One services.sh at a time per checkout (fd 9; daemons are started without it).
  exec 9>"$STATE/.lock"
  flock 9

  local i
  case "$cmd" in
    install) cmd_install "${svcs[@]}" ;;
    tls)
      local debs=()
      command -v openssl >/dev/null || debs+=(openssl)
      command -v keytool >/dev/null || debs+=(openjdk-17-jre-headless)
      (( ${#debs[@]} == 0 )) || install_debs "${debs[@]}"
      tls_ensure
      log "tls: the test certificates are in $TLS_DIR"
      ;;
    down|restart)
      # mariadb-tls -> mariadb_tls_down, and so on.
      for ((i = ${#svcs[@]} - 1; i >= 0; i--)); do "${svcs[i]//-/_}_down"; done
      ;;&
    up|restart)
      cmd_install "${svcs[@]}"
      reserve_ports
      # Before any secured server starts: they all read the certificates at start.
      if needs_tls "${svcs[@]}"; then tls_ensure; tls_check_running "${svcs[@]}"; fi
      for s in "${svcs[@]}"; do "${s//-/_}_up"; done
      env_lines >"$STATE/env"
      env_lines
      ;;
  esac
}

main "$@"
