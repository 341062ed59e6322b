//! Whether the connector's publication carries the rows of its outbox tables, read in one
//! query ([`Coverage::read`]), what does not carry them now ([`Coverage::uncovered`]), and
//! what changed between two reads ([`Coverage::lapse_since`]) — shared by `run` (at start,
//! and while streaming: [`Watch`]), `check` and `status`.
//!
//! # Why it is watched while streaming
//!
//! pgoutput decodes each change with the catalog of its time (a historic snapshot), the
//! publication's membership included. Rows committed while the outbox table is not in the
//! publication (`ALTER PUBLICATION ... DROP TABLE`, the table dropped and created again
//! outside a `FOR TABLE` publication, publishing of INSERTs switched off) are never sent —
//! pgoutput sends nothing at all for them, not even an empty transaction on PostgreSQL 15 —
//! and no later fix of the publication brings them back out of the slot. The session would
//! stay streaming and confirm the slot past them on the next keepalive. So the session reads
//! the coverage every `status_interval` and confirms the slot only up to a WAL position a
//! read proved covered ([`Watch::proven`]); a read that finds the outbox not carried, or
//! carried by another catalog entry than the read before (removed and added back, dropped and
//! re-created), stops the connector.
//!
//! # What a read proves
//!
//! Each read returns `pg_current_wal_insert_lsn()` with the catalog it saw. A catalog change
//! committed before a read's WAL position is normally visible to that read's snapshot, but
//! not always: a commit record is written before the transaction becomes visible (and under
//! synchronous replication it stays invisible until a standby confirms it). So a read proves
//! coverage only up to the WAL position of the read *before* it, taken one interval earlier:
//! two consecutive reads that saw the same entries carrying the outbox prove that nothing
//! committed before the first one's WAL position removed it ([`Watch::observe`]).
//!
//! A table removed and added back (`pg_publication_rel` gets a new row), a publication or a
//! schema membership re-created, or a table re-created in a `FOR TABLE` publication shows as
//! another catalog entry (another OID), so even a gap shorter than the interval is seen. What
//! no read can see: a publish option switched off and on between two reads, and anything
//! that happened while no session streamed (outboxd stopped): a session compares its first
//! read with the previous session's last one only within one run of the connector.

use std::collections::HashMap;

use super::{parse_lsn, quote_ident, quote_table};
use crate::config::{PostgresSourceConfig, PublicationAutocreate};
use crate::event::TableName;
use crate::position::Lsn;
use crate::source::postgres::error::{CoverageLoss, PgError};

/// How the publication includes an outbox table (PostgreSQL catalogs `pg_publication`,
/// `pg_publication_rel`, `pg_publication_namespace`). The OIDs identify the catalog entry: a
/// table removed from a publication and added back gets a new `pg_publication_rel` row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Membership {
    /// `FOR ALL TABLES`.
    AllTables,
    /// `FOR TABLES IN SCHEMA` (PostgreSQL 15+): the `pg_publication_namespace` row's OID.
    Schema(u32),
    /// `FOR TABLE`: the `pg_publication_rel` row's OID.
    Table(u32),
    /// Not included.
    None,
}

impl Membership {
    fn included(self) -> bool {
        self != Membership::None
    }
}

/// The publication's row of `pg_publication`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publication {
    /// Its OID (a publication dropped and created again gets another).
    pub oid: u32,
    /// `pubinsert`: publishes INSERTs.
    pub insert: bool,
    /// `pubupdate`.
    pub update: bool,
    /// `pubdelete`.
    pub delete: bool,
    /// `puballtables`: `FOR ALL TABLES`.
    pub all_tables: bool,
    /// `pubviaroot`: `publish_via_partition_root`, changes of a partition published as
    /// changes of the partitioned table at the root.
    pub via_root: bool,
}

/// An outbox table as the catalog has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    /// `pg_class.oid`.
    pub oid: u32,
    /// A partitioned table (`relkind = 'p'`).
    pub partitioned: bool,
    /// Its partitions, at every level (`pg_partition_tree`), for a partitioned table.
    pub partitions: Vec<TableName>,
    /// `UNLOGGED` (`relpersistence = 'u'`), or, partitioned, with an unlogged partition:
    /// its rows are not written to the WAL, so logical decoding never sees them.
    pub unlogged: bool,
}

/// An outbox table and how the publication includes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableCoverage {
    /// The configured outbox table.
    pub table: TableName,
    /// The table (`None`: no table or partitioned table of that name).
    pub relation: Option<Relation>,
    /// How the publication includes it.
    pub membership: Membership,
    /// The `FOR TABLE ... WHERE (...)` row filter of its `pg_publication_rel` entry
    /// (PostgreSQL 15+), as `pg_get_expr` shows it: rows it does not match are never
    /// published.
    pub row_filter: Option<String>,
}

/// Why the publication does not carry the rows of an outbox table now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Uncovered {
    /// The publication does not exist.
    NoPublication,
    /// It does not publish INSERTs.
    NoInserts,
    /// The outbox table does not exist (dropped or renamed).
    NoTable(TableName),
    /// The table is not in the publication.
    NotMember(TableName),
    /// The table is partitioned and the publication publishes its partitions' rows under the
    /// partitions' names (`publish_via_partition_root` off).
    NotViaRoot(TableName),
    /// The table (or a partition of it) is `UNLOGGED`: no publication carries its rows.
    /// PostgreSQL refuses that for a table in a `FOR TABLE` publication, not under `FOR ALL
    /// TABLES` or `FOR TABLES IN SCHEMA`.
    Unlogged(TableName),
}

/// How the entries carrying an outbox table changed between two reads that both found it
/// carried: rows committed in between may not have been.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replaced {
    /// The publication was dropped and created again.
    Publication,
    /// The table was removed from the publication and added back.
    Member(TableName),
    /// The table was dropped and created again, in a `FOR TABLE` publication.
    Table(TableName),
}

/// Coverage lost between two reads: now, or for a while in between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lapse {
    /// Not carried now.
    Uncovered(Uncovered),
    /// Carried again now, by other entries.
    Replaced(Replaced),
}

/// One read of the publication and the outbox tables.
#[derive(Debug, Clone)]
pub struct Coverage {
    /// The publication (`None`: it does not exist).
    pub publication: Option<Publication>,
    /// Each outbox table, in configured order.
    pub tables: Vec<TableCoverage>,
    /// `pg_current_wal_insert_lsn()` in the same statement.
    pub wal: Lsn,
    /// The server's clock then, UTC (`2025-01-31 12:00:00 UTC`), for messages: outbox rows
    /// carry the server's time.
    pub at: String,
}

/// The coverage query; `{namespace}` is the `FOR TABLES IN SCHEMA` membership (PostgreSQL
/// 15+) or `NULL::oid`.
const QUERY: &str = "\
WITH pub AS (
  SELECT oid, pubinsert, pubupdate, pubdelete, puballtables, pubviaroot
  FROM pg_publication WHERE pubname = $1
), t AS (
  SELECT u.ord, c.oid AS reloid, c.relkind, c.relnamespace, c.relpersistence
  FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS u(nsp, rel, ord)
  LEFT JOIN (pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace)
    ON n.nspname = u.nsp AND c.relname = u.rel AND c.relkind IN ('r', 'p')
)
SELECT pg_current_wal_insert_lsn()::text,
       to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC',
       pub.oid, pub.pubinsert, pub.pubupdate, pub.pubdelete, pub.puballtables, pub.pubviaroot,
       t.reloid, t.relkind = 'p',
       (SELECT pr.oid FROM pg_publication_rel pr
         WHERE pr.prpubid = pub.oid AND pr.prrelid = t.reloid),
       {namespace},
       {row_filter},
       CASE WHEN t.relkind = 'p' THEN ARRAY(
         SELECT pn.nspname::text FROM pg_partition_tree(t.reloid::regclass) pt
         JOIN pg_class pc ON pc.oid = pt.relid JOIN pg_namespace pn ON pn.oid = pc.relnamespace
         WHERE pt.relid <> t.reloid ORDER BY pt.relid) END,
       CASE WHEN t.relkind = 'p' THEN ARRAY(
         SELECT pc.relname::text FROM pg_partition_tree(t.reloid::regclass) pt
         JOIN pg_class pc ON pc.oid = pt.relid
         WHERE pt.relid <> t.reloid ORDER BY pt.relid) END,
       t.relpersistence = 'u' OR (t.relkind = 'p' AND EXISTS (
         SELECT 1 FROM pg_partition_tree(t.reloid::regclass) pt
         JOIN pg_class pc ON pc.oid = pt.relid WHERE pc.relpersistence = 'u'))
FROM t LEFT JOIN pub ON true
ORDER BY t.ord";

const NAMESPACE_15: &str = "(SELECT pns.oid FROM pg_publication_namespace pns \
     WHERE pns.pnpubid = pub.oid AND pns.pnnspid = t.relnamespace)";

const ROW_FILTER_15: &str = "(SELECT pg_get_expr(pr.prqual, pr.prrelid) FROM pg_publication_rel \
     pr WHERE pr.prpubid = pub.oid AND pr.prrelid = t.reloid)";

impl Coverage {
    /// Reads publication `cfg.publication_name` and how it includes outbox `tables`, in one
    /// statement, on a server of `server_version_num` `version_num`.
    ///
    /// Errors: the SQL errors of [`PgError::from_sql`] (a lost connection is transient).
    pub async fn read(
        client: &tokio_postgres::Client,
        cfg: &PostgresSourceConfig,
        tables: &[TableName],
        version_num: i32,
    ) -> Result<Coverage, PgError> {
        let (namespace, row_filter) = if version_num >= 150_000 {
            (NAMESPACE_15, ROW_FILTER_15)
        } else {
            ("NULL::oid", "NULL::text")
        };
        let sql = QUERY
            .replace("{namespace}", namespace)
            .replace("{row_filter}", row_filter);
        let schemas: Vec<&str> = tables.iter().map(|t| t.schema.as_str()).collect();
        let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
        let rows = client
            .query(&sql, &[&cfg.publication_name, &schemas, &names])
            .await
            .map_err(|e| PgError::from_sql(&e, cfg))?;
        let first = rows.first().ok_or_else(|| PgError::Vanished {
            what: "the coverage query's rows".to_string(),
        })?;
        let wal = parse_lsn(first.get(0))?.ok_or_else(|| PgError::Vanished {
            what: "pg_current_wal_insert_lsn()'s value".to_string(),
        })?;
        let publication = first.get::<_, Option<u32>>(2).map(|oid| Publication {
            oid,
            insert: first.get(3),
            update: first.get(4),
            delete: first.get(5),
            all_tables: first.get(6),
            via_root: first.get(7),
        });
        let mut out = Vec::with_capacity(tables.len());
        for (table, row) in tables.iter().zip(&rows) {
            let relation = row.get::<_, Option<u32>>(8).map(|oid| {
                let schemas: Vec<String> =
                    row.get::<_, Option<Vec<String>>>(13).unwrap_or_default();
                let names: Vec<String> = row.get::<_, Option<Vec<String>>>(14).unwrap_or_default();
                Relation {
                    oid,
                    unlogged: row.get::<_, Option<bool>>(15).unwrap_or(false),
                    partitioned: row.get::<_, Option<bool>>(9).unwrap_or(false),
                    partitions: schemas
                        .into_iter()
                        .zip(names)
                        .map(|(s, n)| TableName::new(s, n))
                        .collect(),
                }
            });
            let membership = match (&publication, &relation) {
                (Some(p), _) if p.all_tables => Membership::AllTables,
                (Some(_), Some(_)) => match (row.get::<_, Option<u32>>(10), row.get(11)) {
                    (Some(rel), _) => Membership::Table(rel),
                    (None, Some(schema)) => Membership::Schema(schema),
                    (None, None) => Membership::None,
                },
                _ => Membership::None,
            };
            out.push(TableCoverage {
                table: table.clone(),
                relation,
                membership,
                row_filter: row.get(12),
            });
        }
        Ok(Coverage {
            publication,
            tables: out,
            wal,
            at: first.get(1),
        })
    }

    /// What does not carry the outbox rows now, in configured order (empty: everything is
    /// carried).
    pub fn uncovered(&self) -> Vec<Uncovered> {
        let Some(p) = &self.publication else {
            return vec![Uncovered::NoPublication];
        };
        let mut out = Vec::new();
        if !p.insert {
            out.push(Uncovered::NoInserts);
        }
        for t in &self.tables {
            match &t.relation {
                None => out.push(Uncovered::NoTable(t.table.clone())),
                Some(_) if !t.membership.included() => {
                    out.push(Uncovered::NotMember(t.table.clone()))
                }
                Some(r) if r.unlogged => out.push(Uncovered::Unlogged(t.table.clone())),
                Some(r) if r.partitioned && !p.via_root => {
                    out.push(Uncovered::NotViaRoot(t.table.clone()))
                }
                Some(_) => {}
            }
        }
        out
    }

    /// How the entries carrying the outbox changed since `earlier`, a read that found
    /// everything carried; `None` when nothing did (a table re-created under a `FOR ALL
    /// TABLES` or `FOR TABLES IN SCHEMA` membership is carried from its creation on).
    pub fn replaced_since(&self, earlier: &Coverage) -> Option<Replaced> {
        match (&earlier.publication, &self.publication) {
            (Some(a), Some(b)) if a.oid != b.oid => return Some(Replaced::Publication),
            _ => {}
        }
        let reloid = |t: &TableCoverage| t.relation.as_ref().map(|r| r.oid);
        for (a, b) in earlier.tables.iter().zip(&self.tables) {
            if matches!(b.membership, Membership::Table(_)) && reloid(a) != reloid(b) {
                return Some(Replaced::Table(b.table.clone()));
            }
            if a.membership != b.membership {
                return Some(Replaced::Member(b.table.clone()));
            }
        }
        None
    }

    /// The lapse this read shows after `earlier` (a read that found everything carried):
    /// what is not carried now, else what was replaced in between.
    pub fn lapse_since(&self, earlier: &Coverage) -> Option<Lapse> {
        if let Some(u) = self.uncovered().into_iter().next() {
            return Some(Lapse::Uncovered(u));
        }
        self.replaced_since(earlier).map(Lapse::Replaced)
    }

    /// The outbox tables the publication carries only the rows of that match a row filter,
    /// with the filter: the others are never published, so never delivered.
    pub fn row_filters(&self) -> Vec<(&TableName, &str)> {
        self.tables
            .iter()
            .filter_map(|t| Some((&t.table, t.row_filter.as_deref()?)))
            .collect()
    }

    /// The partitions of partitioned outbox tables, each with its outbox table.
    pub fn partitions(&self) -> HashMap<TableName, TableName> {
        let mut out = HashMap::new();
        for t in &self.tables {
            for p in t.relation.iter().flat_map(|r| &r.partitions) {
                out.insert(p.clone(), t.table.clone());
            }
        }
        out
    }
}

impl Uncovered {
    /// What is wrong, in words, naming publication `publication`.
    pub fn describe(&self, publication: &str) -> String {
        match self {
            Uncovered::NoPublication => format!("publication {publication:?} does not exist"),
            Uncovered::NoInserts => {
                format!("publication {publication:?} does not publish INSERTs")
            }
            Uncovered::NoTable(t) => {
                format!("outbox table {t} does not exist (dropped or renamed)")
            }
            Uncovered::NotMember(t) => {
                format!("publication {publication:?} does not include outbox table {t}")
            }
            Uncovered::NotViaRoot(t) => format!(
                "outbox table {t} is partitioned and publication {publication:?} has \
                 publish_via_partition_root off: its rows come out under the partitions' names"
            ),
            Uncovered::Unlogged(t) => format!(
                "outbox table {t} (or a partition of it) is UNLOGGED: its rows are not written \
                 to the WAL, so no publication carries them"
            ),
        }
    }
}

/// What a row filter on outbox `table` in `publication` means, in words.
pub fn describe_row_filter(publication: &str, table: &TableName, filter: &str) -> String {
    format!(
        "publication {publication:?} carries only the rows of outbox table {table} that match \
         its row filter WHERE {filter}: outbox rows it filters out are never published, so \
         never delivered (drop the filter, `ALTER PUBLICATION ... SET TABLE` without WHERE, \
         unless leaving those events out is what you want)"
    )
}

impl Lapse {
    /// What happened, in words, naming publication `publication`.
    pub fn describe(&self, publication: &str) -> String {
        match self {
            Lapse::Uncovered(u) => u.describe(publication),
            Lapse::Replaced(Replaced::Publication) => {
                format!("publication {publication:?} was dropped and created again")
            }
            Lapse::Replaced(Replaced::Member(t)) => format!(
                "outbox table {t} was removed from publication {publication:?} and added back \
                 (or its row filter or column list there was changed, which does the same)"
            ),
            Lapse::Replaced(Replaced::Table(t)) => format!(
                "outbox table {t} was dropped and created again, and added to publication \
                 {publication:?} again"
            ),
        }
    }
}

impl Lapse {
    /// The definite stop of connector `connector` for this lapse: coverage was proven up to
    /// WAL position `proven`, by a read at `since` (server time, UTC).
    pub fn error(
        &self,
        connector: &str,
        cfg: &PostgresSourceConfig,
        proven: Lsn,
        since: &str,
    ) -> PgError {
        let p = quote_ident(&cfg.publication_name);
        let at_start = |what: &str| {
            if cfg.publication_autocreate == PublicationAutocreate::Filtered {
                format!(
                    " (with publication_autocreate = filtered outboxd does {what} when it starts)"
                )
            } else {
                String::new()
            }
        };
        let lost = "outbox rows committed while it did not carry the table never come out of \
                    the replication slot, not even after the publication is fixed";
        let undecodable = "changes written while it did not exist cannot be decoded through it \
                           at all";
        let step = "the stream then stops at the first change written while it did not exist, \
                    if there is one, and that stop says how to step past them";
        let (rows, fix) = match self {
            Lapse::Uncovered(Uncovered::NotMember(t)) => (
                lost.to_string(),
                format!(
                    "add the table back: `ALTER PUBLICATION {p} ADD TABLE {}`{}",
                    quote_table(t),
                    at_start("this")
                ),
            ),
            Lapse::Uncovered(Uncovered::NoTable(t)) => (
                lost.to_string(),
                format!(
                    "create outbox table {t} again (or fix {}) and include it in publication \
                     {:?}{}",
                    cfg.format.key("tables", "table.include.list"),
                    cfg.publication_name,
                    at_start("the latter")
                ),
            ),
            Lapse::Uncovered(Uncovered::NoPublication) => (
                undecodable.to_string(),
                format!(
                    "create it again (outboxd does when it starts, unless publication_autocreate \
                     is disabled); {step}"
                ),
            ),
            Lapse::Uncovered(Uncovered::Unlogged(t)) => (
                "outbox rows committed while it was unlogged are not in the WAL, so they never \
                 come out of the replication slot"
                    .to_string(),
                format!("`ALTER TABLE {} SET LOGGED`", quote_table(t)),
            ),
            Lapse::Uncovered(Uncovered::NoInserts) => (
                lost.to_string(),
                format!("`ALTER PUBLICATION {p} SET (publish = 'insert')`"),
            ),
            Lapse::Uncovered(Uncovered::NotViaRoot(_)) => (
                "outbox rows committed meanwhile come out under their partitions' names; \
                 outboxd maps the partitions that still exist to the outbox table, so after \
                 the restart it delivers those rows, except the rows of a partition dropped \
                 since"
                    .to_string(),
                format!(
                    "`ALTER PUBLICATION {p} SET (publish_via_partition_root = true)`{}",
                    at_start("this")
                ),
            ),
            Lapse::Replaced(Replaced::Publication) => (
                undecodable.to_string(),
                format!("it exists again now; {step}"),
            ),
            Lapse::Replaced(Replaced::Member(_)) => (
                lost.to_string(),
                "the table is back in the publication now".to_string(),
            ),
            Lapse::Replaced(Replaced::Table(_)) => (
                "outbox rows committed to the new table before it was added to the \
                 publication never come out of the replication slot"
                    .to_string(),
                "the new table is in the publication now".to_string(),
            ),
        };
        PgError::CoverageLost(Box::new(CoverageLoss {
            connector: connector.to_string(),
            what: self.describe(&cfg.publication_name),
            rows,
            fix,
            proven,
            since: since.to_string(),
        }))
    }
}

/// The coverage as a streaming session watches it: the last read, and the WAL position up to
/// which coverage is proven (see the module documentation).
#[derive(Debug, Clone)]
pub struct Watch {
    last: Coverage,
    proven: Lsn,
}

impl Watch {
    /// Watching from `first`, a read that found everything carried, in a session that
    /// starts streaming at `start` (what lies before it was handed on by earlier sessions or
    /// is before the checkpoint: never confirmed beyond it).
    pub fn new(first: Coverage, start: Lsn) -> Self {
        Self {
            last: first,
            proven: start,
        }
    }

    /// The WAL position up to which coverage is proven: the slot may be confirmed up to it.
    pub fn proven(&self) -> Lsn {
        self.proven
    }

    /// The last read.
    pub fn last(&self) -> &Coverage {
        &self.last
    }

    /// Takes read `now`: when it shows no lapse since the last one, coverage is proven up to
    /// the last read's WAL position; otherwise the lapse, and nothing more is proven.
    pub fn observe(&mut self, now: Coverage) -> Result<(), Lapse> {
        if let Some(lapse) = now.lapse_since(&self.last) {
            return Err(lapse);
        }
        self.proven = self.proven.max(self.last.wal);
        self.last = now;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outbox() -> TableName {
        TableName::new("public", "outbox")
    }

    fn read(wal: u64, publication: Option<Publication>, table: TableCoverage) -> Coverage {
        Coverage {
            publication,
            tables: vec![table],
            wal: Lsn(wal),
            at: "2025-01-01 00:00:00 UTC".into(),
        }
    }

    fn publication(oid: u32) -> Publication {
        Publication {
            oid,
            insert: true,
            update: false,
            delete: false,
            all_tables: false,
            via_root: true,
        }
    }

    fn member(reloid: u32, membership: Membership, partitioned: bool) -> TableCoverage {
        TableCoverage {
            table: outbox(),
            relation: Some(Relation {
                oid: reloid,
                partitioned,
                partitions: vec![],
                unlogged: false,
            }),
            membership,
            row_filter: None,
        }
    }

    #[test]
    fn a_read_proves_coverage_up_to_the_read_before_it() {
        let mut w = Watch::new(
            read(
                100,
                Some(publication(1)),
                member(10, Membership::Table(20), false),
            ),
            Lsn(50),
        );
        assert_eq!(w.proven(), Lsn(50));
        w.observe(read(
            200,
            Some(publication(1)),
            member(10, Membership::Table(20), false),
        ))
        .unwrap();
        assert_eq!(w.proven(), Lsn(100), "one read late");
        w.observe(read(
            300,
            Some(publication(1)),
            member(10, Membership::Table(20), false),
        ))
        .unwrap();
        assert_eq!(w.proven(), Lsn(200));
    }

    #[test]
    fn lapses_are_seen_and_prove_nothing() {
        let first = || {
            read(
                100,
                Some(publication(1)),
                member(10, Membership::Table(20), false),
            )
        };
        let cases = [
            (
                read(
                    200,
                    Some(publication(1)),
                    member(10, Membership::None, false),
                ),
                Lapse::Uncovered(Uncovered::NotMember(outbox())),
            ),
            (
                read(
                    200,
                    Some(publication(1)),
                    member(10, Membership::Table(21), false),
                ),
                Lapse::Replaced(Replaced::Member(outbox())),
            ),
            (
                read(
                    200,
                    Some(publication(1)),
                    member(11, Membership::Table(20), false),
                ),
                Lapse::Replaced(Replaced::Table(outbox())),
            ),
            (
                read(
                    200,
                    Some(publication(2)),
                    member(10, Membership::Table(20), false),
                ),
                Lapse::Replaced(Replaced::Publication),
            ),
            (
                read(200, None, member(10, Membership::None, false)),
                Lapse::Uncovered(Uncovered::NoPublication),
            ),
            (
                read(
                    200,
                    Some(publication(1)),
                    TableCoverage {
                        table: outbox(),
                        relation: None,
                        membership: Membership::None,
                        row_filter: None,
                    },
                ),
                Lapse::Uncovered(Uncovered::NoTable(outbox())),
            ),
            (
                read(
                    200,
                    Some(Publication {
                        insert: false,
                        ..publication(1)
                    }),
                    member(10, Membership::Table(20), false),
                ),
                Lapse::Uncovered(Uncovered::NoInserts),
            ),
            (
                read(
                    200,
                    Some(Publication {
                        via_root: false,
                        ..publication(1)
                    }),
                    member(10, Membership::Table(20), true),
                ),
                Lapse::Uncovered(Uncovered::NotViaRoot(outbox())),
            ),
        ];
        for (now, want) in cases {
            let mut w = Watch::new(first(), Lsn(50));
            assert_eq!(w.observe(now), Err(want));
            assert_eq!(w.proven(), Lsn(50));
        }
    }

    #[test]
    fn a_table_recreated_under_all_tables_stays_carried() {
        let all = Publication {
            all_tables: true,
            ..publication(1)
        };
        let mut w = Watch::new(
            read(
                100,
                Some(all.clone()),
                member(10, Membership::AllTables, false),
            ),
            Lsn(50),
        );
        w.observe(read(
            200,
            Some(all),
            member(11, Membership::AllTables, false),
        ))
        .unwrap();
        assert_eq!(w.proven(), Lsn(100));
    }
}
