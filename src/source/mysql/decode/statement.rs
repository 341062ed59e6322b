//! Enough of MySQL's SQL to know what the statement of a QUERY_EVENT (or
//! EXECUTE_LOAD_QUERY_EVENT) does to tables, without ever keeping or showing its text (a
//! statement holds row values).
//!
//! A ROW binlog carries every row change as a rows event; statements appear only for DDL, for
//! transaction control, and for DML written by a session whose `binlog_format` is `STATEMENT`
//! or `MIXED` (MySQL "Replication Formats", MariaDB "Binary Log Formats"). What matters to
//! outboxd:
//!
//! * **Writes** ([`Effect::Writes`]): `INSERT`, `REPLACE` (also `INSERT ... SELECT`),
//!   `LOAD DATA` / `LOAD XML` (MariaDB logs them as BEGIN_LOAD_QUERY + EXECUTE_LOAD_QUERY),
//!   `CREATE TABLE ... SELECT`: the target table, the only table such a statement writes
//!   rows into.
//! * **Tables that stop existing under their name**: `DROP TABLE` (not `TEMPORARY`),
//!   `DROP DATABASE` / `DROP SCHEMA`, `RENAME TABLE a TO b, ...`, `ALTER TABLE a ... RENAME
//!   [TO|AS] b`; and tables that start existing: `CREATE [OR REPLACE] TABLE`.
//! * **XA outcomes** ([`xa_outcome`]): `XA COMMIT <xid>` / `XA ROLLBACK <xid>`.
//!
//! The lexer follows MySQL's "Comments", "Schema Object Names" and "String Literals":
//! `# ...` and `-- ...` line comments, `/* ... */` block comments, executable comments
//! (`/*! ... */`, `/*!50100 ... */`, MariaDB `/*M! ... */`) read as code, backquoted names
//! (a doubled backquote is one), `'...'` strings (backslash escapes unless
//! `NO_BACKSLASH_ESCAPES`, a doubled quote is one), `"..."` strings or, under `ANSI_QUOTES`,
//! names (read as a name wherever a name is expected, so both modes work), `X'..'` hex
//! strings, and `;` between statements (the server logs one statement per event; the text
//! after a `CREATE` or `ALTER` is a stored program's body, which writes nothing when it is
//! defined). MariaDB's `SET STATEMENT ... FOR <statement>` and `ANALYZE <statement>` are
//! read as the statement they run. Bytes are not assumed to be UTF-8. Nothing here
//! allocates in proportion to the statement except the names it returns, and nothing
//! panics on any input.
//!
//! Not recognisable from the text, and so not reported: rows a statement writes through a
//! trigger, a stored function or a view (MySQL logs the calling statement only).

use crate::event::TableName;

/// The statement's SQL mode bits that change how it is read (the QUERY_EVENT's
/// `Q_SQL_MODE_CODE` status variable).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SqlMode {
    /// `ANSI_QUOTES`: `"..."` quotes names.
    pub ansi_quotes: bool,
    /// `NO_BACKSLASH_ESCAPES`: a backslash in a string is an ordinary character.
    pub no_backslash_escapes: bool,
}

impl SqlMode {
    /// `MODE_ANSI_QUOTES` in the sql_mode bit set (MySQL and MariaDB alike).
    pub const ANSI_QUOTES: u64 = 0x0000_0004;
    /// `MODE_NO_BACKSLASH_ESCAPES` in the sql_mode bit set (MySQL and MariaDB alike).
    pub const NO_BACKSLASH_ESCAPES: u64 = 0x0010_0000;

    /// The mode of an sql_mode bit set.
    pub fn from_bits(bits: u64) -> Self {
        Self {
            ansi_quotes: bits & Self::ANSI_QUOTES != 0,
            no_backslash_escapes: bits & Self::NO_BACKSLASH_ESCAPES != 0,
        }
    }
}

/// How a statement writes rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteVerb {
    /// `INSERT` (also `INSERT ... SELECT`, `INSERT ... ON DUPLICATE KEY UPDATE`).
    Insert,
    /// `REPLACE`.
    Replace,
    /// `LOAD DATA` / `LOAD XML`.
    Load,
}

impl WriteVerb {
    /// The statement's keyword(s): `INSERT`, `REPLACE`, `LOAD DATA`.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteVerb::Insert => "INSERT",
            WriteVerb::Replace => "REPLACE",
            WriteVerb::Load => "LOAD DATA",
        }
    }
}

/// What a statement does to a table, in statement order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Writes rows into `table`.
    Writes {
        /// The target table.
        table: TableName,
        /// How.
        verb: WriteVerb,
    },
    /// `table` is dropped.
    Drops(TableName),
    /// Every table of database `0` is dropped.
    DropsDatabase(String),
    /// `from` is renamed to `to`.
    Renames {
        /// The old name.
        from: TableName,
        /// The new name.
        to: TableName,
    },
    /// `table` is created (or, `CREATE OR REPLACE`, replaced).
    Creates(TableName),
}

/// An XA transaction id as the server logs it: `X'<gtrid>',X'<bqual>',<formatID>` (XA
/// specification; MySQL "XA Transaction SQL Statements").
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Xid {
    /// The format id (1 unless the application chose another).
    pub format_id: i64,
    /// Global transaction id, at most 64 bytes.
    pub gtrid: Vec<u8>,
    /// Branch qualifier, at most 64 bytes.
    pub bqual: Vec<u8>,
}

impl std::fmt::Display for Xid {
    /// The server's own form, `X'786131',X'',1`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        write!(
            f,
            "X'{}',X'{}',{}",
            hex(&self.gtrid),
            hex(&self.bqual),
            self.format_id
        )
    }
}

/// One token. Slices point into the statement; quoted forms keep their raw inner bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok<'a> {
    /// An unquoted name, keyword or number.
    Word(&'a [u8]),
    /// A backquoted name (inner bytes, doubled backquotes not yet undone).
    Backquoted(&'a [u8]),
    /// `"..."`: a string, or a name under `ANSI_QUOTES` (inner bytes).
    DoubleQuoted(&'a [u8]),
    /// `'...'` (inner bytes, escapes not yet undone).
    Str(&'a [u8]),
    /// `X'..'` (the hex digits).
    Hex(&'a [u8]),
    /// Any other single byte: `.`, `,`, `(`, `)`, `;`, `=`, ...
    Punct(u8),
}

/// Splits a statement into tokens, skipping whitespace and comments.
struct Lexer<'a> {
    s: &'a [u8],
    i: usize,
    mode: SqlMode,
    /// Inside an executable comment: its closing `*/` is skipped.
    in_executable: bool,
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

impl<'a> Lexer<'a> {
    fn new(s: &'a [u8], mode: SqlMode) -> Self {
        Self {
            s,
            i: 0,
            mode,
            in_executable: false,
        }
    }

    fn peek_at(&self, k: usize) -> Option<u8> {
        self.s.get(self.i + k).copied()
    }

    /// Skips whitespace and comments; false at the end of the input.
    fn skip_trivia(&mut self) -> bool {
        loop {
            let Some(b) = self.peek_at(0) else {
                return false;
            };
            match b {
                b if b.is_ascii_whitespace() || b == 0 => self.i += 1,
                b'#' => self.skip_line(),
                b'-' if self.peek_at(1) == Some(b'-')
                    && self
                        .peek_at(2)
                        .is_none_or(|c| c.is_ascii_whitespace() || c.is_ascii_control()) =>
                {
                    self.skip_line()
                }
                b'/' if self.peek_at(1) == Some(b'*') => {
                    let executable = match (self.peek_at(2), self.peek_at(3)) {
                        (Some(b'!'), _) => Some(3),
                        (Some(b'M'), Some(b'!')) => Some(4),
                        _ => None,
                    };
                    match executable {
                        Some(skip) if !self.in_executable => {
                            // Code to the server: read on inside it, without the version.
                            self.i += skip;
                            while self.peek_at(0).is_some_and(|c| c.is_ascii_digit()) {
                                self.i += 1;
                            }
                            self.in_executable = true;
                        }
                        _ => {
                            // A plain comment (or a hint `/*+ ... */`) ends at the first `*/`.
                            self.i += 2;
                            match find(&self.s[self.i..], b"*/") {
                                Some(end) => self.i += end + 2,
                                None => self.i = self.s.len(),
                            }
                        }
                    }
                }
                b'*' if self.in_executable && self.peek_at(1) == Some(b'/') => {
                    self.i += 2;
                    self.in_executable = false;
                }
                _ => return true,
            }
        }
    }

    fn skip_line(&mut self) {
        match self.s[self.i..].iter().position(|&c| c == b'\n') {
            Some(n) => self.i += n + 1,
            None => self.i = self.s.len(),
        }
    }

    /// The inner bytes of a quoted token starting at the opening `quote`; a doubled quote
    /// stays in the slice (and so does a backslash escape when `escapes`).
    fn quoted(&mut self, quote: u8, escapes: bool) -> &'a [u8] {
        let start = self.i + 1;
        let mut j = start;
        while j < self.s.len() {
            let c = self.s[j];
            if escapes && c == b'\\' {
                j += 2;
                continue;
            }
            if c == quote {
                if self.s.get(j + 1) == Some(&quote) {
                    j += 2;
                    continue;
                }
                self.i = j + 1;
                return &self.s[start..j];
            }
            j += 1;
        }
        // Unterminated: the rest of the input.
        self.i = self.s.len();
        &self.s[start.min(self.s.len())..]
    }

    fn next_tok(&mut self) -> Option<Tok<'a>> {
        if !self.skip_trivia() {
            return None;
        }
        let b = self.s[self.i];
        let escapes = !self.mode.no_backslash_escapes;
        Some(match b {
            b'`' => Tok::Backquoted(self.quoted(b'`', false)),
            b'\'' => Tok::Str(self.quoted(b'\'', escapes)),
            b'"' => Tok::DoubleQuoted(self.quoted(b'"', escapes && !self.mode.ansi_quotes)),
            b'x' | b'X' if self.peek_at(1) == Some(b'\'') => {
                self.i += 1;
                Tok::Hex(self.quoted(b'\'', false))
            }
            b if is_word_byte(b) => {
                let start = self.i;
                while self.peek_at(0).is_some_and(is_word_byte) {
                    self.i += 1;
                }
                Tok::Word(&self.s[start..self.i])
            }
            other => {
                self.i += 1;
                Tok::Punct(other)
            }
        })
    }
}

impl<'a> Iterator for Lexer<'a> {
    type Item = Tok<'a>;

    fn next(&mut self) -> Option<Tok<'a>> {
        self.next_tok()
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Undoes doubled quotes (and, for strings, backslash escapes) of a quoted token's bytes.
fn unquote(raw: &[u8], quote: u8, escapes: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        if escapes && c == b'\\' && i + 1 < raw.len() {
            out.push(match raw[i + 1] {
                b'n' => b'\n',
                b't' => b'\t',
                b'r' => b'\r',
                b'0' => 0,
                b'Z' => 0x1a,
                other => other,
            });
            i += 2;
            continue;
        }
        if c == quote && raw.get(i + 1) == Some(&quote) {
            i += 1;
        }
        out.push(c);
        i += 1;
    }
    out
}

fn is_kw(tok: Option<&Tok<'_>>, kw: &str) -> bool {
    matches!(tok, Some(Tok::Word(w)) if w.eq_ignore_ascii_case(kw.as_bytes()))
}

/// One statement's tokens, read front to back.
struct Cursor<'a> {
    toks: Vec<Tok<'a>>,
    i: usize,
    mode: SqlMode,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<&Tok<'a>> {
        self.toks.get(self.i)
    }

    fn bump(&mut self) -> Option<Tok<'a>> {
        let t = self.toks.get(self.i).copied();
        self.i += 1;
        t
    }

    /// Consumes keyword `kw` when it is next.
    fn eat(&mut self, kw: &str) -> bool {
        if is_kw(self.peek(), kw) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// Consumes every keyword of `kws` that comes next, in any order.
    fn eat_any(&mut self, kws: &[&str]) {
        while kws.iter().any(|k| is_kw(self.peek(), k)) {
            self.i += 1;
        }
    }

    fn eat_punct(&mut self, p: u8) -> bool {
        if self.peek() == Some(&Tok::Punct(p)) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// A name part: an unquoted word, a backquoted name, or `"..."` (a name under
    /// `ANSI_QUOTES`; a string would be a syntax error where a name is expected).
    fn ident(&mut self) -> Option<String> {
        let name = match self.peek()? {
            Tok::Word(w) => w.to_vec(),
            Tok::Backquoted(raw) => unquote(raw, b'`', false),
            Tok::DoubleQuoted(raw) => unquote(raw, b'"', !self.mode.ansi_quotes),
            _ => return None,
        };
        self.i += 1;
        Some(String::from_utf8_lossy(&name).into_owned())
    }

    /// `name` or `db.name`; unqualified names are in `default_db`.
    fn table(&mut self, default_db: &str) -> Option<TableName> {
        let first = self.ident()?;
        if self.eat_punct(b'.') {
            let second = self.ident()?;
            Some(TableName::new(first, second))
        } else {
            Some(TableName::new(default_db, first))
        }
    }

    /// `IF EXISTS` / `IF NOT EXISTS`, when next.
    fn eat_if_exists(&mut self) {
        if is_kw(self.peek(), "IF") {
            self.i += 1;
            self.eat("NOT");
            self.eat("EXISTS");
        }
    }

    /// `WAIT n` / `NOWAIT`, when next (MariaDB).
    fn eat_wait(&mut self) {
        if self.eat("WAIT") {
            self.bump();
        } else {
            self.eat("NOWAIT");
        }
    }
}

/// Splits `text` into statements (at `;` outside quotes and comments) and returns their
/// tokens, at most `limit` tokens per statement (the rest is not needed to classify it).
fn statements(text: &[u8], mode: SqlMode, limit: usize) -> Vec<Vec<Tok<'_>>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for tok in Lexer::new(text, mode) {
        if tok == Tok::Punct(b';') {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if cur.len() < limit {
            cur.push(tok);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Tokens looked at per statement: enough for any prefix up to the names that matter. An
/// `ALTER TABLE` with a longer list of changes before its `RENAME` is scanned that far only
/// (a rename found there is still reported: it is what makes the table disappear).
const TOKENS_PER_STATEMENT: usize = 10_000;

/// What the statement(s) in `text` do to tables, in order. `default_db` is the QUERY_EVENT's
/// database (the session's default database), used for unqualified names.
pub fn effects(text: &[u8], default_db: &str, mode: SqlMode) -> Vec<Effect> {
    let mut out = Vec::new();
    for toks in statements(text, mode, TOKENS_PER_STATEMENT) {
        let defines_a_program = is_kw(toks.first(), "CREATE") || is_kw(toks.first(), "ALTER");
        let mut c = Cursor { toks, i: 0, mode };
        statement_effects(&mut c, default_db, &mut out);
        if defines_a_program {
            // The server logs each statement it runs in a QUERY event of its own; the only
            // logged text with `;` inside is a stored program's definition (`CREATE
            // TRIGGER ... BEGIN ...; INSERT INTO outbox ...; END`, `CREATE PROCEDURE`,
            // `CREATE EVENT`, `ALTER EVENT ... DO BEGIN ... END`): its body runs later, and
            // what it writes is logged then. Nothing after a CREATE or ALTER is a statement.
            break;
        }
    }
    out
}

fn statement_effects(c: &mut Cursor<'_>, db: &str, out: &mut Vec<Effect>) {
    // Prefixes that run the statement after them, which the server logs as written.
    let first = loop {
        let Some(Tok::Word(word)) = c.bump() else {
            return;
        };
        if word.eq_ignore_ascii_case(b"SET") && c.eat("STATEMENT") {
            // MariaDB `SET STATEMENT var = value [, ...] FOR <statement>`: the statement
            // after the first `FOR` outside parentheses.
            let mut depth = 0usize;
            loop {
                match c.bump() {
                    None => return,
                    Some(Tok::Punct(b'(')) => depth += 1,
                    Some(Tok::Punct(b')')) => depth = depth.saturating_sub(1),
                    Some(Tok::Word(w)) if depth == 0 && w.eq_ignore_ascii_case(b"FOR") => break,
                    Some(_) => {}
                }
            }
        } else if word.eq_ignore_ascii_case(b"ANALYZE") {
            // MariaDB `ANALYZE [FORMAT = JSON] <statement>` runs the statement; `ANALYZE
            // TABLE` writes no rows.
            if c.eat("FORMAT") {
                c.eat_punct(b'=');
                c.bump();
            }
        } else {
            break word.to_ascii_uppercase();
        }
    };
    match first.as_slice() {
        b"INSERT" => {
            c.eat_any(&["LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE"]);
            c.eat("INTO");
            if let Some(table) = c.table(db) {
                out.push(Effect::Writes {
                    table,
                    verb: WriteVerb::Insert,
                });
            }
        }
        b"REPLACE" => {
            c.eat_any(&["LOW_PRIORITY", "DELAYED"]);
            c.eat("INTO");
            if let Some(table) = c.table(db) {
                out.push(Effect::Writes {
                    table,
                    verb: WriteVerb::Replace,
                });
            }
        }
        b"LOAD" => {
            if !(c.eat("DATA") || c.eat("XML")) {
                return;
            }
            // ... INFILE 'file' [REPLACE | IGNORE] INTO TABLE name
            while let Some(t) = c.bump() {
                if is_kw(Some(&t), "INTO") && c.eat("TABLE") {
                    if let Some(table) = c.table(db) {
                        out.push(Effect::Writes {
                            table,
                            verb: WriteVerb::Load,
                        });
                    }
                    return;
                }
            }
        }
        b"DROP" => {
            if c.eat("TEMPORARY") {
                return;
            }
            if c.eat("DATABASE") || c.eat("SCHEMA") {
                c.eat_if_exists();
                if let Some(name) = c.ident() {
                    out.push(Effect::DropsDatabase(name));
                }
                return;
            }
            if !(c.eat("TABLE") || c.eat("TABLES")) {
                return;
            }
            c.eat_if_exists();
            loop {
                let Some(table) = c.table(db) else {
                    return;
                };
                out.push(Effect::Drops(table));
                if !c.eat_punct(b',') {
                    return;
                }
            }
        }
        b"RENAME" => {
            if !(c.eat("TABLE") || c.eat("TABLES")) {
                return;
            }
            c.eat_if_exists();
            loop {
                let Some(from) = c.table(db) else {
                    return;
                };
                c.eat_wait();
                if !c.eat("TO") {
                    return;
                }
                let Some(to) = c.table(db) else {
                    return;
                };
                out.push(Effect::Renames { from, to });
                if !c.eat_punct(b',') {
                    return;
                }
            }
        }
        b"ALTER" => {
            c.eat_any(&["ONLINE", "IGNORE"]);
            if !c.eat("TABLE") {
                return;
            }
            c.eat_if_exists();
            let Some(from) = c.table(db) else {
                return;
            };
            c.eat_wait();
            let mut depth = 0usize;
            while let Some(t) = c.bump() {
                match t {
                    Tok::Punct(b'(') => depth += 1,
                    Tok::Punct(b')') => depth = depth.saturating_sub(1),
                    Tok::Word(w) if depth == 0 && w.eq_ignore_ascii_case(b"RENAME") => {
                        if ["COLUMN", "INDEX", "KEY", "CONSTRAINT"]
                            .iter()
                            .any(|k| is_kw(c.peek(), k))
                        {
                            continue;
                        }
                        if !(c.eat("TO") || c.eat("AS")) {
                            c.eat_punct(b'=');
                        }
                        if let Some(to) = c.table(db) {
                            out.push(Effect::Renames {
                                from: from.clone(),
                                to,
                            });
                        }
                        return;
                    }
                    _ => {}
                }
            }
        }
        b"CREATE" => {
            if c.eat("OR") && !c.eat("REPLACE") {
                return;
            }
            if c.eat("TEMPORARY") || !c.eat("TABLE") {
                return;
            }
            c.eat_if_exists();
            let Some(table) = c.table(db) else {
                return;
            };
            out.push(Effect::Creates(table.clone()));
            // `CREATE TABLE t ... [AS] SELECT ...` also writes rows (a ROW binlog logs them as
            // rows after a plain CREATE TABLE; only a statement keeps the SELECT).
            let mut depth = 0usize;
            while let Some(t) = c.bump() {
                match t {
                    Tok::Punct(b'(') => depth += 1,
                    Tok::Punct(b')') => depth = depth.saturating_sub(1),
                    Tok::Word(w) if w.eq_ignore_ascii_case(b"SELECT") && depth <= 1 => {
                        out.push(Effect::Writes {
                            table,
                            verb: WriteVerb::Insert,
                        });
                        return;
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// An `XA COMMIT` / `XA ROLLBACK` statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XaStatement {
    /// The XA transaction.
    pub xid: Xid,
    /// `XA COMMIT` (true) or `XA ROLLBACK` (false).
    pub committed: bool,
    /// `XA COMMIT ... ONE PHASE`: the transaction was never prepared.
    pub one_phase: bool,
}

/// `XA COMMIT <xid> [ONE PHASE]` or `XA ROLLBACK <xid>`; `None` for any other statement.
/// `xid` is `gtrid [, bqual [, formatID]]`, each string a `'...'` or `X'..'` literal.
pub fn xa_outcome(text: &[u8], mode: SqlMode) -> Option<XaStatement> {
    let toks: Vec<Tok<'_>> = Lexer::new(text, mode).take(16).collect();
    let mut c = Cursor { toks, i: 0, mode };
    if !c.eat("XA") {
        return None;
    }
    let committed = if c.eat("COMMIT") {
        true
    } else if c.eat("ROLLBACK") {
        false
    } else {
        return None;
    };
    let string = |c: &mut Cursor<'_>| -> Option<Vec<u8>> {
        let v = match c.peek()? {
            Tok::Str(raw) => unquote(raw, b'\'', !mode.no_backslash_escapes),
            Tok::DoubleQuoted(raw) => unquote(raw, b'"', !mode.no_backslash_escapes),
            Tok::Hex(digits) => hex(digits)?,
            _ => return None,
        };
        c.i += 1;
        Some(v)
    };
    let gtrid = string(&mut c)?;
    let mut bqual = Vec::new();
    let mut format_id = 1i64;
    if c.eat_punct(b',') {
        bqual = string(&mut c)?;
        if c.eat_punct(b',') {
            let negative = c.eat_punct(b'-');
            let Some(Tok::Word(n)) = c.bump() else {
                return None;
            };
            let n: i64 = std::str::from_utf8(n).ok()?.parse().ok()?;
            format_id = if negative { -n } else { n };
        }
    }
    if gtrid.len() > 64 || bqual.len() > 64 {
        return None;
    }
    let one_phase = committed && c.eat("ONE") && c.eat("PHASE");
    Some(XaStatement {
        xid: Xid {
            format_id,
            gtrid,
            bqual,
        },
        committed,
        one_phase,
    })
}

fn hex(digits: &[u8]) -> Option<Vec<u8>> {
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks(2)
        .map(|p| {
            let s = std::str::from_utf8(p).ok()?;
            u8::from_str_radix(s, 16).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(db: &str, name: &str) -> TableName {
        TableName::new(db, name)
    }

    fn writes(sql: &str, db: &str) -> Vec<(TableName, WriteVerb)> {
        effects(sql.as_bytes(), db, SqlMode::default())
            .into_iter()
            .filter_map(|e| match e {
                Effect::Writes { table, verb } => Some((table, verb)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn inserts_replaces_and_loads_name_their_target() {
        use WriteVerb::*;
        let cases: &[(&str, Vec<(TableName, WriteVerb)>)] = &[
            (
                "INSERT INTO outbox VALUES (1)",
                vec![(t("shop", "outbox"), Insert)],
            ),
            (
                "insert outbox values (1)",
                vec![(t("shop", "outbox"), Insert)],
            ),
            (
                "INSERT LOW_PRIORITY IGNORE INTO `other`.`out``box` (a) VALUES (1)",
                vec![(t("other", "out`box"), Insert)],
            ),
            (
                "INSERT HIGH_PRIORITY INTO other . outbox SELECT * FROM shop.outbox",
                vec![(t("other", "outbox"), Insert)],
            ),
            (
                "INSERT INTO t SELECT * FROM outbox",
                vec![(t("shop", "t"), Insert)],
            ),
            (
                "REPLACE DELAYED INTO outbox SET a = 1",
                vec![(t("shop", "outbox"), Replace)],
            ),
            (
                "replace outbox values (1)",
                vec![(t("shop", "outbox"), Replace)],
            ),
            (
                "LOAD DATA LOCAL INFILE '/tmp/SQL_LOAD_MB-1-0' INTO TABLE `outbox` FIELDS \
                 TERMINATED BY '\\t' ENCLOSED BY '' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' \
                 (`id`, `payload`)",
                vec![(t("shop", "outbox"), Load)],
            ),
            (
                "LOAD DATA CONCURRENT INFILE 'in to table.txt' REPLACE INTO TABLE s.outbox",
                vec![(t("s", "outbox"), Load)],
            ),
            (
                "LOAD XML INFILE 'x.xml' INTO TABLE outbox",
                vec![(t("shop", "outbox"), Load)],
            ),
            (
                "INSERT INTO outbox PARTITION (p0) VALUES ('INTO other', 'x''y')",
                vec![(t("shop", "outbox"), Insert)],
            ),
            ("UPDATE outbox SET a = 1", vec![]),
            ("DELETE FROM outbox", vec![]),
            ("SELECT 'INSERT INTO outbox'", vec![]),
            ("", vec![]),
        ];
        for (sql, want) in cases {
            assert_eq!(&writes(sql, "shop"), want, "{sql}");
        }
    }

    #[test]
    fn comments_are_skipped_and_executable_comments_read() {
        let cases = [
            "/* INSERT INTO decoy */ INSERT INTO outbox VALUES (1)",
            "-- INSERT INTO decoy\nINSERT INTO outbox VALUES (1)",
            "# INSERT INTO decoy\n  INSERT /* x */ INTO /*+ hint */ outbox VALUES (1)",
            "/*!40000 INSERT INTO outbox */",
            "INSERT /*!IGNORE*/ INTO outbox VALUES (1)",
            "INSERT /*M!100301 IGNORE */ INTO outbox VALUES (1)",
            "/*!50100 INSERT */ INTO outbox VALUES (1)",
        ];
        for sql in cases {
            assert_eq!(
                writes(sql, "shop"),
                vec![(t("shop", "outbox"), WriteVerb::Insert)],
                "{sql}"
            );
        }
        // `--x` is not a comment: `INSERT` is not the statement's first word.
        assert!(writes("SELECT 1 --x\nINSERT INTO outbox", "shop").is_empty());
        assert!(writes("/* unterminated INSERT INTO outbox", "shop").is_empty());
    }

    #[test]
    fn statements_run_by_mariadb_prefixes_count() {
        for sql in [
            "SET STATEMENT max_statement_time = 100 FOR INSERT INTO outbox VALUES (1)",
            "set statement sql_mode = '', x = (1) for insert outbox values (1)",
            "SET STATEMENT a = 1 FOR SET STATEMENT b = 2 FOR INSERT INTO outbox VALUES (1)",
            "ANALYZE INSERT INTO outbox SELECT 1",
            "ANALYZE FORMAT = JSON INSERT INTO outbox SELECT 1",
            "/* app */ ANALYZE FORMAT=JSON SET STATEMENT a = 1 FOR INSERT INTO outbox VALUES (1)",
        ] {
            assert_eq!(
                writes(sql, "shop"),
                vec![(t("shop", "outbox"), WriteVerb::Insert)],
                "{sql}"
            );
        }
        assert_eq!(
            writes(
                "SET STATEMENT a = 1 FOR REPLACE INTO outbox VALUES (1)",
                "shop"
            ),
            vec![(t("shop", "outbox"), WriteVerb::Replace)]
        );
        for sql in [
            "SET @a = 'INSERT INTO outbox'",
            "SET STATEMENT a = 1",
            "SET STATEMENT a = 1 FOR SELECT * FROM outbox",
            "ANALYZE TABLE outbox",
            "ANALYZE SELECT * FROM outbox",
        ] {
            assert!(writes(sql, "shop").is_empty(), "{sql}");
        }
        // A long run of prefixes is read without recursion.
        let deep = format!("{}INSERT INTO outbox VALUES (1)", "ANALYZE ".repeat(5000));
        assert_eq!(writes(&deep, "shop").len(), 1);
    }

    #[test]
    fn a_stored_programs_body_writes_nothing_when_it_is_defined() {
        let e = |sql: &str| effects(sql.as_bytes(), "shop", SqlMode::default());
        for sql in [
            "CREATE DEFINER=`app`@`%` TRIGGER orders_outbox AFTER INSERT ON orders FOR EACH ROW \
             BEGIN SET @x = 1; INSERT INTO outbox (a) VALUES (NEW.id); END",
            "CREATE DEFINER=`app`@`%` PROCEDURE p() BEGIN INSERT INTO orders VALUES (1); \
             INSERT INTO outbox VALUES (1); DROP TABLE outbox; END",
            "CREATE OR REPLACE DEFINER=`app`@`%` FUNCTION f() RETURNS INT BEGIN \
             INSERT INTO outbox VALUES (1); RETURN 1; END",
            "CREATE DEFINER=`app`@`%` EVENT e ON SCHEDULE EVERY 1 HOUR DO BEGIN \
             INSERT INTO outbox VALUES (1); RENAME TABLE outbox TO x; END",
            "ALTER DEFINER=`app`@`%` EVENT e DO BEGIN SET @a = 1; INSERT INTO outbox VALUES (1); END",
            "/*!50003 CREATE*/ /*!50017 DEFINER=`app`@`%`*/ /*!50003 TRIGGER t AFTER INSERT ON \
             orders FOR EACH ROW BEGIN SET @x = 1; INSERT INTO outbox VALUES (1); END */",
        ] {
            assert!(e(sql).is_empty(), "{sql}: {:?}", e(sql));
        }
    }

    #[test]
    fn double_quotes_name_a_table_under_ansi_quotes() {
        let ansi = SqlMode::from_bits(SqlMode::ANSI_QUOTES);
        let got = effects(br#"INSERT INTO "shop"."outbox" VALUES (1)"#, "x", ansi);
        assert_eq!(
            got,
            vec![Effect::Writes {
                table: t("shop", "outbox"),
                verb: WriteVerb::Insert
            }]
        );
    }

    #[test]
    fn every_statement_of_a_multi_statement_text_counts() {
        let got = writes(
            "SET @a = 'x;y'; INSERT INTO a VALUES (';'); ; INSERT INTO outbox VALUES (1);",
            "shop",
        );
        assert_eq!(
            got,
            vec![
                (t("shop", "a"), WriteVerb::Insert),
                (t("shop", "outbox"), WriteVerb::Insert)
            ]
        );
        // A backslash-escaped quote does not end the string, unless NO_BACKSLASH_ESCAPES.
        let text = br"INSERT INTO a VALUES ('it\'s; INSERT INTO outbox')";
        assert_eq!(effects(text, "s", SqlMode::default()).len(), 1);
        let raw = SqlMode::from_bits(SqlMode::NO_BACKSLASH_ESCAPES);
        assert_eq!(effects(text, "s", raw).len(), 2);
    }

    #[test]
    fn ddl_effects() {
        let e = |sql: &str| effects(sql.as_bytes(), "shop", SqlMode::default());
        assert_eq!(
            e("DROP TABLE `outbox` /* generated by server */"),
            vec![Effect::Drops(t("shop", "outbox"))]
        );
        assert_eq!(
            e("drop table if exists a, other.`b`"),
            vec![
                Effect::Drops(t("shop", "a")),
                Effect::Drops(t("other", "b"))
            ]
        );
        assert!(e("DROP TEMPORARY TABLE outbox").is_empty());
        assert_eq!(
            e("DROP DATABASE IF EXISTS `shop`"),
            vec![Effect::DropsDatabase("shop".into())]
        );
        assert_eq!(
            e("RENAME TABLE outbox TO outbox_old, outbox_new TO outbox"),
            vec![
                Effect::Renames {
                    from: t("shop", "outbox"),
                    to: t("shop", "outbox_old")
                },
                Effect::Renames {
                    from: t("shop", "outbox_new"),
                    to: t("shop", "outbox")
                },
            ]
        );
        assert_eq!(
            e("RENAME TABLE IF EXISTS outbox NOWAIT TO x.y"),
            vec![Effect::Renames {
                from: t("shop", "outbox"),
                to: t("x", "y")
            }]
        );
        assert_eq!(
            e("ALTER TABLE outbox ADD COLUMN c INT DEFAULT (1), RENAME TO outbox2"),
            vec![Effect::Renames {
                from: t("shop", "outbox"),
                to: t("shop", "outbox2")
            }]
        );
        assert_eq!(
            e("ALTER ONLINE TABLE outbox RENAME AS archive.outbox"),
            vec![Effect::Renames {
                from: t("shop", "outbox"),
                to: t("archive", "outbox")
            }]
        );
        assert!(e("ALTER TABLE outbox RENAME COLUMN a TO b").is_empty());
        assert!(e("ALTER TABLE outbox RENAME INDEX a TO b, ADD x INT").is_empty());
        assert!(e("ALTER TABLE outbox ADD CHECK (x IN ('RENAME'))").is_empty());
        assert_eq!(
            e("CREATE OR REPLACE TABLE outbox (id INT)"),
            vec![Effect::Creates(t("shop", "outbox"))]
        );
        assert_eq!(
            e("CREATE TABLE IF NOT EXISTS `s`.`outbox` LIKE t"),
            vec![Effect::Creates(t("s", "outbox"))]
        );
        assert!(e("CREATE TEMPORARY TABLE outbox (id INT)").is_empty());
        assert_eq!(
            e("CREATE TABLE outbox (id INT) AS SELECT id FROM t"),
            vec![
                Effect::Creates(t("shop", "outbox")),
                Effect::Writes {
                    table: t("shop", "outbox"),
                    verb: WriteVerb::Insert
                }
            ]
        );
        assert_eq!(
            e("CREATE TABLE outbox (SELECT 1 AS id)").len(),
            2,
            "a parenthesised SELECT"
        );
        assert_eq!(
            e("CREATE TABLE outbox (c INT CHECK (c IN (SELECT 1)))").len(),
            1,
            "a SELECT inside a column definition is no row source"
        );
        assert!(e("TRUNCATE TABLE outbox").is_empty());
    }

    #[test]
    fn xa_outcomes_as_the_server_logs_them() {
        let m = SqlMode::default();
        let xid = |g: &[u8], b: &[u8], f: i64| Xid {
            format_id: f,
            gtrid: g.to_vec(),
            bqual: b.to_vec(),
        };
        let outcome = |text: &[u8]| xa_outcome(text, m).map(|x| (x.xid, x.committed, x.one_phase));
        assert_eq!(
            outcome(b"XA COMMIT X'786131',X'',1"),
            Some((xid(b"xa1", b"", 1), true, false))
        );
        assert_eq!(
            outcome(b"XA ROLLBACK X'786132',X'6232',7"),
            Some((xid(b"xa2", b"b2", 7), false, false))
        );
        assert_eq!(
            outcome(b"xa commit 'a''b', 'c', -3 ONE PHASE"),
            Some((xid(b"a'b", b"c", -3), true, true))
        );
        assert_eq!(
            outcome(b"XA COMMIT 'x'"),
            Some((xid(b"x", b"", 1), true, false))
        );
        assert_eq!(xid(b"xa1", b"", 1).to_string(), "X'786131',X'',1");
        for bad in [
            &b"XA END X'786131',X'',1"[..],
            b"XA COMMIT",
            b"XA COMMIT X'7'",
            b"XA COMMIT X'zz'",
            b"XA COMMIT 'a', 'b', x",
            b"COMMIT",
        ] {
            assert_eq!(xa_outcome(bad, m), None, "{}", String::from_utf8_lossy(bad));
        }
        let long = format!("XA COMMIT '{}'", "a".repeat(65));
        assert_eq!(xa_outcome(long.as_bytes(), m), None);
    }

    #[test]
    fn non_utf8_and_hostile_bytes_never_panic() {
        let names = effects(
            b"INSERT INTO `\xff\xfe` VALUES (1)",
            "d\u{e9}",
            SqlMode::default(),
        );
        assert_eq!(names.len(), 1);
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let alphabet: &[u8] = b"`'\"\\/*!-#;.,()= \nXxINSERTDROPRENAMEALTERintoTO\x00\xff\xc3M0123";
        for len in 0..400 {
            let mut s = Vec::with_capacity(len);
            for _ in 0..len {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                s.push(alphabet[(seed % alphabet.len() as u64) as usize]);
            }
            for bits in [0, SqlMode::ANSI_QUOTES, SqlMode::NO_BACKSLASH_ESCAPES] {
                let mode = SqlMode::from_bits(bits);
                let _ = effects(&s, "db", mode);
                let _ = xa_outcome(&s, mode);
            }
        }
        for s in [
            &b"'"[..],
            b"`",
            b"\"",
            b"/*",
            b"/*!",
            b"--",
            b"X'",
            b"\\",
            b"a.",
            b"INSERT INTO a.",
        ] {
            let _ = effects(s, "db", SqlMode::default());
        }
    }
}
