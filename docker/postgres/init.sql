-- Roles and database for outboxd on PostgreSQL 15. Idempotent: safe to run on every start.
-- Needs psql (uses \gexec and \connect).
--
-- Run by scripts/services.sh (as the postgres superuser over the unix socket) after every
-- start, and by the postgres image from /docker-entrypoint-initdb.d/ on first start.

\set ON_ERROR_STOP on

-- outboxd_admin: superuser. Tests use it to create databases, tables and publications.
SELECT 'CREATE ROLE outboxd_admin'
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'outboxd_admin') \gexec
ALTER ROLE outboxd_admin WITH SUPERUSER LOGIN PASSWORD 'admin-secret';

-- outboxd: the relay. LOGIN + REPLICATION is what a pgoutput slot needs:
--   * CREATE_REPLICATION_SLOT / pg_create_logical_replication_slot / START_REPLICATION
--     and pg_drop_replication_slot need REPLICATION (or superuser);
--   * reading pg_replication_slots / pg_publication(_tables) needs nothing more.
-- Publications are the part it cannot do alone: CREATE PUBLICATION ... FOR TABLE t needs
-- CREATE on the database AND ownership of t (FOR ALL TABLES / TABLES IN SCHEMA need
-- superuser). So either the owner (e.g. outboxd_admin) creates the publication, as with
-- Debezium's publication.autocreate.mode=disabled, or the table owner's role is granted to
-- outboxd (GRANT <owner role> TO outboxd), which counts as ownership.
-- No SELECT on the outbox table is needed to stream it (outboxd takes no snapshot).
SELECT 'CREATE ROLE outboxd'
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'outboxd') \gexec
ALTER ROLE outboxd WITH NOSUPERUSER LOGIN REPLICATION PASSWORD 'outboxd-secret';

-- Database outboxd, owned by the admin.
SELECT 'CREATE DATABASE outboxd OWNER outboxd_admin'
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'outboxd') \gexec
ALTER DATABASE outboxd OWNER TO outboxd_admin;
-- CREATE: lets outboxd create publications for tables it owns (or whose owner role it has).
GRANT CONNECT, CREATE ON DATABASE outboxd TO outboxd;
