-- Users for outboxd on MariaDB 10.11. Idempotent: safe to run on every start.
--
-- Run by scripts/services.sh (as root over the unix socket) after every start, and by
-- the mariadb image from /docker-entrypoint-initdb.d/ on first start.
--
-- Hosts: '127.0.0.1' (TCP on loopback, what the local test harness uses), 'localhost'
-- (the unix socket) and '%' (other containers on the compose network; the local harness
-- binds to 127.0.0.1 only, so there '%' is reachable from loopback only).

-- Account management is not application data: keep it out of the binlog, so it never
-- shows up in the CDC stream and does not advance the GTID position on each start.
SET SESSION sql_log_bin = 0;

-- outboxd_admin: everything, WITH GRANT OPTION. Tests use it to create databases and
-- tables and to write outbox rows.
CREATE USER IF NOT EXISTS 'outboxd_admin'@'127.0.0.1' IDENTIFIED BY 'admin-secret';
CREATE USER IF NOT EXISTS 'outboxd_admin'@'localhost' IDENTIFIED BY 'admin-secret';
CREATE USER IF NOT EXISTS 'outboxd_admin'@'%'         IDENTIFIED BY 'admin-secret';
ALTER USER 'outboxd_admin'@'127.0.0.1' IDENTIFIED BY 'admin-secret';
ALTER USER 'outboxd_admin'@'localhost' IDENTIFIED BY 'admin-secret';
ALTER USER 'outboxd_admin'@'%'         IDENTIFIED BY 'admin-secret';
GRANT ALL PRIVILEGES ON *.* TO 'outboxd_admin'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'outboxd_admin'@'localhost' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'outboxd_admin'@'%'         WITH GRANT OPTION;

-- outboxd: the relay. The minimal set on MariaDB 10.11 (verified with scripts/services.sh):
--   REPLICATION SLAVE   COM_REGISTER_SLAVE + COM_BINLOG_DUMP (the binlog stream itself,
--                       by file:pos or by GTID via @slave_connect_state).
--   BINLOG MONITOR      SHOW MASTER STATUS, SHOW BINARY LOGS, SHOW BINLOG EVENTS.
--                       (Since 10.5.2 "REPLICATION CLIENT" is an alias of BINLOG MONITOR;
--                       SHOW GRANTS prints BINLOG MONITOR.)
--   SELECT              information_schema / table metadata for preflight checks and for
--                       reading column names of tables logged before binlog_row_metadata=FULL.
-- Not needed: @@gtid_binlog_pos, @@gtid_current_pos, @@binlog_format and the other
-- variables are readable by any user; REPLICATION SLAVE ADMIN / REPLICATION MASTER ADMIN /
-- SUPER are only for managing replication, not for reading the binlog.
CREATE USER IF NOT EXISTS 'outboxd'@'127.0.0.1' IDENTIFIED BY 'outboxd-secret';
CREATE USER IF NOT EXISTS 'outboxd'@'localhost' IDENTIFIED BY 'outboxd-secret';
CREATE USER IF NOT EXISTS 'outboxd'@'%'         IDENTIFIED BY 'outboxd-secret';
ALTER USER 'outboxd'@'127.0.0.1' IDENTIFIED BY 'outboxd-secret';
ALTER USER 'outboxd'@'localhost' IDENTIFIED BY 'outboxd-secret';
ALTER USER 'outboxd'@'%'         IDENTIFIED BY 'outboxd-secret';
GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'outboxd'@'127.0.0.1';
GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'outboxd'@'localhost';
GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'outboxd'@'%';

FLUSH PRIVILEGES;
