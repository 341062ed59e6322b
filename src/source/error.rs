//! What a source session's failure is: its database's error, or the connector no longer this
//! member's. Sources send it into the delivery loop ([`super::Outlet::fail`]); the loop
//! carries it on inside the connector's failure (`pipeline::Error::Source`).

use super::mysql::MysqlError;
use super::postgres::PgError;
use crate::error::Class;
use crate::lease::NotOwner;

/// A source session's failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SourceError {
    /// The MySQL/MariaDB source.
    #[error(transparent)]
    Mysql(#[from] MysqlError),
    /// The PostgreSQL source.
    #[error(transparent)]
    Postgres(#[from] PgError),
    /// The group gave the connector to another member: the source does not reconnect.
    #[error(transparent)]
    NotOwner(#[from] NotOwner),
}

impl SourceError {
    /// Whether to retry: decided by the database's own classifier; a connector handed over
    /// is definite for this member.
    pub fn class(&self) -> Class {
        match self {
            SourceError::Mysql(e) => e.class(),
            SourceError::Postgres(e) => e.class(),
            SourceError::NotOwner(_) => Class::Definite,
        }
    }
}
