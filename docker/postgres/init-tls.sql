-- The mutual-TLS role of the secured PostgreSQL instance. Idempotent: safe to run on every
-- start. Needs psql (uses \gexec).
--
-- Run by scripts/services.sh (as the postgres superuser over the unix socket) after
-- docker/postgres/init.sql on every start of `postgres-tls`, and by the postgres image
-- (compose profile `tls`) from /docker-entrypoint-initdb.d/ on first start.

\set ON_ERROR_STOP on

-- outboxd_mtls: the same as outboxd (see init.sql), but it logs in by client certificate
-- (pg_hba-tls.conf: `cert`, CN=outboxd mapped by pg_ident-tls.conf), so it has no password.
SELECT 'CREATE ROLE outboxd_mtls'
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'outboxd_mtls') \gexec
ALTER ROLE outboxd_mtls WITH NOSUPERUSER LOGIN REPLICATION PASSWORD NULL;
GRANT CONNECT, CREATE ON DATABASE outboxd TO outboxd_mtls;
