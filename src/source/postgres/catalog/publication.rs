//! The connector's publication: reading it, the requirements it must meet (one rule set
//! for `run` and `check`: [`creation`] when it is missing, [`coverage`] when it exists), and
//! creating or extending it as `publication_autocreate` allows ([`ensure`]).

use std::collections::HashSet;

use tokio_postgres::error::SqlState;

use super::{quote_ident, quote_table};
use crate::config::{PostgresSourceConfig, PublicationAutocreate};
use crate::event::TableName;
use crate::preflight::{CheckResult, Status};
use crate::source::postgres::error::PgError;

/// A publication as the catalog describes it.
#[derive(Debug, Clone)]
pub struct PublicationInfo {
    /// Publishes INSERTs.
    pub pubinsert: bool,
    /// Publishes UPDATEs.
    pub pubupdate: bool,
    /// Publishes DELETEs.
    pub pubdelete: bool,
    /// `FOR ALL TABLES`.
    pub all_tables: bool,
    /// Tables it covers.
    pub tables: HashSet<TableName>,
}

/// Reads publication `name`, if it exists.
pub async fn info(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    name: &str,
) -> Result<Option<PublicationInfo>, PgError> {
    let Some(row) = client
        .query_opt(
            "SELECT pubinsert, pubupdate, pubdelete, puballtables FROM pg_publication \
             WHERE pubname = $1",
            &[&name],
        )
        .await
        .map_err(|e| PgError::from_sql(&e, cfg))?
    else {
        return Ok(None);
    };
    let rows = client
        .query(
            "SELECT schemaname::text, tablename::text FROM pg_publication_tables \
             WHERE pubname = $1",
            &[&name],
        )
        .await
        .map_err(|e| PgError::from_sql(&e, cfg))?;
    Ok(Some(PublicationInfo {
        pubinsert: row.get(0),
        pubupdate: row.get(1),
        pubdelete: row.get(2),
        all_tables: row.get(3),
        tables: rows
            .iter()
            .map(|r| TableName::new(r.get::<_, String>(0), r.get::<_, String>(1)))
            .collect(),
    }))
}

/// The statement that creates the publication for `tables` (`filtered`) or all tables.
pub fn create_sql(cfg: &PostgresSourceConfig, tables: &[TableName], all_tables: bool) -> String {
    let target = if all_tables {
        "ALL TABLES".to_string()
    } else {
        format!(
            "TABLE {}",
            tables
                .iter()
                .map(quote_table)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "CREATE PUBLICATION {} FOR {target} WITH (publish = 'insert')",
        quote_ident(&cfg.publication_name)
    )
}

/// The check's name: `publication <publication_name>`.
fn label(cfg: &PostgresSourceConfig) -> String {
    format!("publication {}", cfg.publication_name)
}

/// The requirement on a missing publication: `publication_autocreate` lets the connector
/// create it. `Ok(all_tables)`: how it is created (`FOR ALL TABLES`, or `FOR TABLE` the
/// outbox `tables`); `Err`: the failed check, naming the statement to run.
pub fn creation(
    connector: &str,
    cfg: &PostgresSourceConfig,
    tables: &[TableName],
) -> Result<bool, CheckResult> {
    match cfg.publication_autocreate {
        PublicationAutocreate::Disabled => Err(CheckResult::new(
            connector,
            &label(cfg),
            Status::Fail,
            format!(
                "publication {:?} does not exist and publication_autocreate is disabled; create \
                 it: {}",
                cfg.publication_name,
                create_sql(cfg, tables, false)
            ),
        )),
        PublicationAutocreate::AllTables => Ok(true),
        PublicationAutocreate::Filtered => Ok(false),
    }
}

/// The requirement on an existing publication `info`: it publishes INSERTs and covers the
/// outbox `tables`, or the connector may add them (`filtered`). `Ok`: the outbox tables the
/// connector adds (none: the publication is as needed); `Err`: the failed check, naming the
/// statement to run.
pub fn coverage<'t>(
    connector: &str,
    cfg: &PostgresSourceConfig,
    tables: &'t [TableName],
    info: &PublicationInfo,
) -> Result<Vec<&'t TableName>, CheckResult> {
    if !info.pubinsert {
        return Err(CheckResult::new(
            connector,
            &label(cfg),
            Status::Fail,
            format!(
                "publication {:?} does not publish INSERTs; run ALTER PUBLICATION {} SET \
                 (publish = 'insert')",
                cfg.publication_name,
                quote_ident(&cfg.publication_name)
            ),
        ));
    }
    let missing: Vec<&TableName> = tables
        .iter()
        .filter(|t| !info.all_tables && !info.tables.contains(t))
        .collect();
    if missing.is_empty() || cfg.publication_autocreate == PublicationAutocreate::Filtered {
        Ok(missing)
    } else {
        Err(uncovered(connector, cfg, &missing))
    }
}

/// The failed check of a publication that lacks outbox tables `missing`, naming the
/// `ALTER PUBLICATION` that adds them.
pub fn uncovered(
    connector: &str,
    cfg: &PostgresSourceConfig,
    missing: &[&TableName],
) -> CheckResult {
    CheckResult::new(
        connector,
        &label(cfg),
        Status::Fail,
        format!(
            "publication {:?} does not cover outbox table(s) {}; run `{}`",
            cfg.publication_name,
            missing
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            add_tables_sql(cfg, missing)
        ),
    )
}

fn add_tables_sql(cfg: &PostgresSourceConfig, tables: &[&TableName]) -> String {
    format!(
        "ALTER PUBLICATION {} ADD TABLE {}",
        quote_ident(&cfg.publication_name),
        tables
            .iter()
            .map(|t| quote_table(t))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Uses the connector's publication, creating it (or adding missing outbox tables to it) as
/// `publication_autocreate` allows ([`creation`], [`coverage`]).
///
/// Errors: a failed requirement ([`PgError::Requirement`]) and a role that may not create
/// or extend the publication ([`PgError::PublicationDenied`]) are definite.
pub async fn ensure(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    connector: &str,
    tables: &[TableName],
) -> Result<(), PgError> {
    let name = &cfg.publication_name;
    let info = match info(client, cfg, name).await? {
        Some(i) => i,
        None => {
            let sql = create_sql(cfg, tables, creation(connector, cfg, tables)?);
            if execute(client, cfg, &sql).await? {
                tracing::info!(publication = %name, "created the publication: {sql}");
            }
            info(client, cfg, name)
                .await?
                .ok_or_else(|| PgError::Vanished {
                    what: format!("publication {name:?} after creation"),
                })?
        }
    };
    let missing = coverage(connector, cfg, tables, &info)?;
    if missing.is_empty() {
        return Ok(());
    }
    let sql = add_tables_sql(cfg, &missing);
    if execute(client, cfg, &sql).await? {
        tracing::info!(publication = %name, "added outbox table(s) to the publication: {sql}");
    }
    Ok(())
}

/// Runs `sql` (creating or extending the publication): `true` when it did, `false` when
/// someone else had done it meanwhile (`DUPLICATE_OBJECT`).
async fn execute(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    sql: &str,
) -> Result<bool, PgError> {
    match client.batch_execute(sql).await {
        Ok(()) => Ok(true),
        Err(e) if e.code() == Some(&SqlState::DUPLICATE_OBJECT) => Ok(false),
        Err(e) if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) => {
            Err(PgError::PublicationDenied {
                publication: cfg.publication_name.clone(),
                user: cfg.user.clone(),
                sql: sql.to_string(),
                message: e
                    .as_db_error()
                    .map(|d| d.message().to_string())
                    .unwrap_or_else(|| e.to_string()),
            })
        }
        Err(e) => Err(PgError::from_sql(&e, cfg)),
    }
}
