-- The mutual-TLS user of the secured MariaDB instance. Idempotent: safe to run on every start.
--
-- Run by scripts/services.sh (as root over the unix socket) after docker/mariadb/init.sql
-- on every start of `mariadb-tls`, and by the mariadb image (compose profile `tls`) from
-- /docker-entrypoint-initdb.d/ on first start. The users of init.sql exist there too: with
-- require_secure_transport=ON they need TLS, but no client certificate.

SET SESSION sql_log_bin = 0;

-- outboxd_mtls: the relay's grants (see init.sql), but a login also needs a client
-- certificate, signed by the server's ssl_ca, whose subject is exactly CN=outboxd
-- (.state/tls/client.pem) — a password alone is refused.
CREATE USER IF NOT EXISTS 'outboxd_mtls'@'127.0.0.1' IDENTIFIED BY 'mtls-secret' REQUIRE SUBJECT '/CN=outboxd';
CREATE USER IF NOT EXISTS 'outboxd_mtls'@'localhost' IDENTIFIED BY 'mtls-secret' REQUIRE SUBJECT '/CN=outboxd';
CREATE USER IF NOT EXISTS 'outboxd_mtls'@'%'         IDENTIFIED BY 'mtls-secret' REQUIRE SUBJECT '/CN=outboxd';
ALTER USER 'outboxd_mtls'@'127.0.0.1' IDENTIFIED BY 'mtls-secret' REQUIRE SUBJECT '/CN=outboxd';
ALTER USER 'outboxd_mtls'@'localhost' IDENTIFIED BY 'mtls-secret' REQUIRE SUBJECT '/CN=outboxd';
ALTER USER 'outboxd_mtls'@'%'         IDENTIFIED BY 'mtls-secret' REQUIRE SUBJECT '/CN=outboxd';
GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'outboxd_mtls'@'127.0.0.1';
GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'outboxd_mtls'@'localhost';
GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'outboxd_mtls'@'%';

FLUSH PRIVILEGES;
