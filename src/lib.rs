//! outboxd: a CDC relay for the transactional outbox.
//!
//! Tails the MySQL/MariaDB ROW binlog and the PostgreSQL logical replication slot (pgoutput),
//! keeps the INSERTs into the outbox table(s), turns each into a Kafka record the way Debezium's
//! Outbox Event Router does, delivers it, and checkpoints the source position (GTID set, MariaDB
//! GTID position, `file:pos` or LSN) only once Kafka has acknowledged everything before it.
//!
//! Layout (ARCHITECTURE.md in the repository has the map and the invariants): [`source`]
//! (decoders, sessions, adapters per database) yields [`event::SourceEvent`]s; [`router`]
//! turns row changes into `sink::KafkaRecord`s; `sink` delivers them; `pipeline`
//! acknowledges in order and `checkpoint`s; `connector` supervises one connector;
//! [`commands`] are the CLI's subcommands.
//!
//! The library serves the `outboxd` binary ([`cli`], [`commands`], [`init_process`]), the
//! offline binlog tests and the benchmarks (the decoders, [`router`], [`event`],
//! [`position`], [`value`]); everything else is `pub(crate)`.

pub(crate) mod active_topics;
pub(crate) mod checkpoint;
pub mod cli;
pub(crate) mod clock;
pub mod commands;
pub mod config;
pub mod connect;
pub(crate) mod connector;
pub mod cutover;
pub(crate) mod error;
pub mod event;
/// Entry points of the fuzz targets (`fuzz/`); not an API.
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod group;
pub(crate) mod health;
pub(crate) mod http;
pub(crate) mod lease;
pub(crate) mod log_levels;
pub(crate) mod metrics;
pub(crate) mod pipeline;
pub mod position;
pub(crate) mod preflight;
pub(crate) mod record;
pub(crate) mod requirement;
pub(crate) mod rest;
pub(crate) mod retry;
pub mod router;
pub(crate) mod secret;
pub(crate) mod sink;
pub mod source;
pub(crate) mod supervisor;
pub(crate) mod tls;
pub mod typemap;
pub mod value;

/// Process-wide TLS set-up, first thing in `main` (see `tls::init_process`).
pub use tls::init_process;

/// The OAUTHBEARER token outboxd's Kafka clients get for `sasl.oauthbearer.config` text of
/// outboxd's own token sources (AWS MSK IAM, a token file), as (token, principal, expiry in
/// ms since the epoch): what every client context's token refresh callback returns. For the
/// integration tests of MSK IAM's credential chain (`tests/msk_iam.rs`), which need a
/// process of their own to set the AWS environment.
#[doc(hidden)]
pub fn oauth_token(config: &str) -> Result<(String, String, i64), String> {
    sink::oauth::generate(Some(config))
        .map(|t| (t.token, t.principal_name, t.lifetime_ms))
        .map_err(|e| e.to_string())
}
