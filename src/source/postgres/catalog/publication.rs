//! The connector's publication: the requirements it must meet (one rule set for `run` and
//! `check`: [`creation`] when it is missing, [`coverage`] when it exists, both on a
//! [`Coverage`] read), and creating or repairing it as `publication_autocreate` allows
//! ([`ensure`]).
//!
//! # Partitioned outbox tables
//!
//! A publication that includes a partitioned table publishes the rows of its partitions; with
//! `publish_via_partition_root` off (PostgreSQL's default) under each partition's own name and
//! OID, which is not the outbox table the router expects (and `pg_publication_tables` then
//! lists the partitions, not the table). outboxd creates its publications `WITH
//! (publish_via_partition_root = true)`: the rows then come out as rows of the partitioned
//! table, from partitions created later too (PostgreSQL documentation, `CREATE PUBLICATION`).
//! An existing publication without it is changed (`filtered`) or refused with the `ALTER
//! PUBLICATION ... SET (publish_via_partition_root = true)` that fixes it. Membership is read
//! from the catalogs (`pg_publication_rel` and friends, by OID), not from
//! `pg_publication_tables`.

use tokio_postgres::error::SqlState;

use super::coverage::{Coverage, Membership, Uncovered};
use super::{quote_ident, quote_table};
use crate::config::{PostgresSourceConfig, PublicationAutocreate};
use crate::event::TableName;
use crate::position::Lsn;
use crate::requirement::{CheckResult, Status};
use crate::source::postgres::error::PgError;

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
        "CREATE PUBLICATION {} FOR {target} WITH (publish = 'insert', \
         publish_via_partition_root = true)",
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

/// What the connector changes in an existing publication so that it carries the outbox rows
/// (`filtered` only; otherwise they are the statements a failed check names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Repairs<'c> {
    /// Outbox tables to add (`ALTER PUBLICATION ... ADD TABLE`).
    pub add: Vec<&'c TableName>,
    /// Partitioned outbox tables whose rows the publication would publish under their
    /// partitions' names: `publish_via_partition_root` must be turned on.
    pub via_root: Vec<&'c TableName>,
}

impl Repairs<'_> {
    /// Nothing to change.
    pub fn is_empty(&self) -> bool {
        self.add.is_empty() && self.via_root.is_empty()
    }

    /// The statements that make them, in order.
    pub fn statements(&self, cfg: &PostgresSourceConfig) -> Vec<String> {
        let p = quote_ident(&cfg.publication_name);
        let mut out = Vec::new();
        if !self.via_root.is_empty() {
            out.push(format!(
                "ALTER PUBLICATION {p} SET (publish_via_partition_root = true)"
            ));
        }
        if !self.add.is_empty() {
            out.push(format!(
                "ALTER PUBLICATION {p} ADD TABLE {}",
                self.add
                    .iter()
                    .map(|t| quote_table(t))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        out
    }

    /// What is missing, in words.
    pub fn describe(&self, cfg: &PostgresSourceConfig) -> String {
        let list = |ts: &[&TableName]| {
            ts.iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts = Vec::new();
        if !self.add.is_empty() {
            parts.push(format!(
                "publication {:?} does not cover outbox table(s) {}",
                cfg.publication_name,
                list(&self.add)
            ));
        }
        if !self.via_root.is_empty() {
            parts.push(format!(
                "publication {:?} has publish_via_partition_root off, so it would publish the \
                 rows of partitioned outbox table(s) {} under their partitions' names, which \
                 are not the outbox table",
                cfg.publication_name,
                list(&self.via_root)
            ));
        }
        parts.join("; ")
    }
}

/// The requirement on an existing publication as read (`cov`): it publishes INSERTs and
/// carries the rows of every outbox table that exists (a missing table is
/// [`super::table_check`]'s failure): it includes the table (`FOR TABLE`, `FOR TABLES IN
/// SCHEMA`, `FOR ALL TABLES`), and, for a partitioned one, publishes via the partition root.
/// `Ok`: what the connector changes (`filtered`; empty: the publication is as needed);
/// `Err`: the failed check, naming the statements to run.
pub fn coverage<'c>(
    connector: &str,
    cfg: &PostgresSourceConfig,
    cov: &'c Coverage,
) -> Result<Repairs<'c>, CheckResult> {
    let Some(p) = &cov.publication else {
        return Ok(Repairs::default());
    };
    if !p.insert {
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
    if let Some(t) = cov
        .tables
        .iter()
        .find(|t| t.relation.as_ref().is_some_and(|r| r.unlogged))
    {
        return Err(CheckResult::new(
            connector,
            &label(cfg),
            Status::Fail,
            format!(
                "{}; run `ALTER TABLE {} SET LOGGED` (a partitioned table: on its unlogged \
                 partitions)",
                Uncovered::Unlogged(t.table.clone()).describe(&cfg.publication_name),
                quote_table(&t.table)
            ),
        ));
    }
    let mut repairs = Repairs::default();
    for t in &cov.tables {
        let Some(rel) = &t.relation else { continue };
        if t.membership == Membership::None {
            repairs.add.push(&t.table);
        }
        if rel.partitioned && !p.via_root {
            repairs.via_root.push(&t.table);
        }
    }
    if repairs.is_empty() || cfg.publication_autocreate == PublicationAutocreate::Filtered {
        Ok(repairs)
    } else {
        Err(uncovered(connector, cfg, &repairs))
    }
}

/// The failed check of a publication that needs `repairs`, naming the statements that make
/// them.
pub fn uncovered(connector: &str, cfg: &PostgresSourceConfig, repairs: &Repairs) -> CheckResult {
    CheckResult::new(
        connector,
        &label(cfg),
        Status::Fail,
        format!(
            "{}; run `{}`",
            repairs.describe(cfg),
            repairs.statements(cfg).join("; ")
        ),
    )
}

/// What [`ensure`] found and did.
#[derive(Debug, Clone)]
pub struct Ensured {
    /// The coverage as read after any change: everything that exists is carried.
    pub coverage: Coverage,
    /// The WAL position right after this call created the publication (`None`: it existed).
    pub created_at: Option<Lsn>,
}

/// Uses the connector's publication, creating it (or repairing it: missing outbox tables,
/// `publish_via_partition_root`) as `publication_autocreate` allows ([`creation`],
/// [`coverage`]), on a server of `server_version_num` `version_num`. The outbox `tables`
/// exist (checked before).
///
/// Errors: a failed requirement ([`PgError::Requirement`]; also when the publication still
/// does not carry the outbox after the repairs), a role that may not create or change the
/// publication ([`PgError::PublicationDenied`]) are definite.
pub async fn ensure(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    connector: &str,
    tables: &[TableName],
    version_num: i32,
) -> Result<Ensured, PgError> {
    let name = &cfg.publication_name;
    let mut cov = Coverage::read(client, cfg, tables, version_num).await?;
    let mut created_at = None;
    if cov.publication.is_none() {
        let sql = create_sql(cfg, tables, creation(connector, cfg, tables)?);
        if execute(client, cfg, &sql).await? {
            let at = super::current_wal_insert_lsn(client, cfg).await?;
            tracing::info!(publication = %name, "created the publication at LSN {at}: {sql}");
            created_at = Some(at);
        }
        cov = Coverage::read(client, cfg, tables, version_num).await?;
        if cov.publication.is_none() {
            return Err(PgError::Vanished {
                what: format!("publication {name:?} after creation"),
            });
        }
    }
    let repairs = coverage(connector, cfg, &cov)?;
    if !repairs.is_empty() {
        for sql in repairs.statements(cfg) {
            if execute(client, cfg, &sql).await? {
                tracing::info!(publication = %name, "changed the publication to carry the outbox: {sql}");
            }
        }
        cov = Coverage::read(client, cfg, tables, version_num).await?;
    }
    if let Some(u) = cov.uncovered().into_iter().next() {
        // Repaired, or so it seemed (a concurrent change), and still not carried.
        let repairs = coverage(connector, cfg, &cov)?;
        let detail = if repairs.is_empty() {
            u.describe(name)
        } else {
            format!(
                "{}; run `{}`",
                repairs.describe(cfg),
                repairs.statements(cfg).join("; ")
            )
        };
        return Err(PgError::Requirement {
            check: label(cfg),
            detail,
        });
    }
    Ok(Ensured {
        coverage: cov,
        created_at,
    })
}

/// Runs `sql` (creating or changing the publication): `true` when it did, `false` when
/// someone else had done it meanwhile (`DUPLICATE_OBJECT`; what it means is read back after).
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

#[cfg(test)]
mod tests {
    use super::super::coverage::{Publication, Relation, TableCoverage};
    use super::*;
    use crate::config::{example_source, ConfigFormat, SourceConfig};

    fn cfg(mode: PublicationAutocreate) -> PostgresSourceConfig {
        let SourceConfig::Postgres(mut cfg) = example_source("postgres", ConfigFormat::Toml) else {
            panic!("a PostgreSQL source")
        };
        cfg.publication_name = "pub".into();
        cfg.publication_autocreate = mode;
        cfg
    }

    fn read(via_root: bool, membership: Membership, partitioned: bool) -> Coverage {
        Coverage {
            publication: Some(Publication {
                oid: 1,
                insert: true,
                update: false,
                delete: false,
                all_tables: false,
                via_root,
            }),
            tables: vec![TableCoverage {
                table: TableName::new("public", "outbox"),
                relation: Some(Relation {
                    oid: 10,
                    partitioned,
                    partitions: vec![],
                    unlogged: false,
                }),
                membership,
                row_filter: None,
            }],
            wal: Lsn(1),
            at: String::new(),
        }
    }

    /// A partitioned outbox needs publish_via_partition_root; a plain one does not. `filtered`
    /// repairs, any other mode fails naming the statements that repair.
    #[test]
    fn partitioned_outbox_tables_need_publish_via_partition_root() {
        let filtered = cfg(PublicationAutocreate::Filtered);
        let disabled = cfg(PublicationAutocreate::Disabled);
        let plain = read(false, Membership::Table(20), false);
        assert!(coverage("c", &disabled, &plain).unwrap().is_empty());
        let part = read(false, Membership::Table(20), true);
        let repairs = coverage("c", &filtered, &part).unwrap();
        assert_eq!(
            repairs.statements(&filtered),
            ["ALTER PUBLICATION \"pub\" SET (publish_via_partition_root = true)"]
        );
        let fail = coverage("c", &disabled, &part).unwrap_err();
        assert_eq!(fail.status, Status::Fail);
        assert!(
            fail.detail.contains("publish_via_partition_root off")
                && fail.detail.ends_with(
                    "run `ALTER PUBLICATION \"pub\" SET (publish_via_partition_root = true)`"
                ),
            "{}",
            fail.detail
        );
        let missing = read(false, Membership::None, true);
        assert_eq!(
            coverage("c", &filtered, &missing)
                .unwrap()
                .statements(&filtered),
            [
                "ALTER PUBLICATION \"pub\" SET (publish_via_partition_root = true)",
                "ALTER PUBLICATION \"pub\" ADD TABLE \"public\".\"outbox\""
            ]
        );
        assert!(
            coverage("c", &disabled, &read(true, Membership::Schema(5), true))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn created_publications_publish_via_the_partition_root() {
        let c = cfg(PublicationAutocreate::Filtered);
        assert_eq!(
            create_sql(&c, &[TableName::new("public", "outbox")], false),
            "CREATE PUBLICATION \"pub\" FOR TABLE \"public\".\"outbox\" WITH (publish = \
             'insert', publish_via_partition_root = true)"
        );
    }
}
