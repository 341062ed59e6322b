//! The hint on a TOML file's unknown key: the accepted key closest to it, or the TOML name
//! of a Debezium key.

/// Debezium's names of settings a TOML connector spells differently, for the hint on an
/// unknown key: a Kafka Connect user writing `database.hostname` is pointed at `host`.
const DEBEZIUM_NAMES: &[(&str, &str)] = &[
    ("database.hostname", "host"),
    ("database.port", "port"),
    ("database.user", "user"),
    ("database.password", "password"),
    ("database.server.id", "server_id"),
    ("database.dbname", "dbname"),
    ("slot.name", "slot_name"),
    ("publication.name", "publication_name"),
    ("publication.autocreate.mode", "publication_autocreate"),
    ("status.update.interval.ms", "status_interval"),
    ("connect.timeout.ms", "connect_timeout"),
    ("table.include.list", "tables"),
    ("bootstrap.servers", "bootstrap_servers"),
];

/// `; did you mean `x`?` for a TOML parser's unknown-key message (serde's wording:
/// "unknown field `k`, expected one of `a`, `b`" or "expected `a` or `b`"), naming the
/// accepted key closest to the unknown one (Jaro-Winkler similarity of at least 0.8), or
/// the TOML name of a Debezium key; empty when nothing is close.
pub(super) fn did_you_mean(message: &str) -> String {
    did_you_mean_also(message, &[])
}

/// [`did_you_mean`] for a table deserialized in parts, whose accepted keys are `also`
/// besides those the message lists (`[connectors.sink]`: the login and TLS keys every sink
/// shares are read apart from the sink's own).
pub(super) fn did_you_mean_also(message: &str, also: &[&str]) -> String {
    let Some((unknown, expected)) = unknown_field(message) else {
        return String::new();
    };
    if let Some((_, toml)) = DEBEZIUM_NAMES.iter().find(|(d, _)| *d == unknown) {
        return format!(
            "\nhint: `{unknown}` is Debezium's name; in outboxd's TOML it is `{toml}` \
             (connectors/README.md lists every key under both names)"
        );
    }
    let candidates = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .chain(also.iter().copied());
    let best = candidates
        .map(|c| (strsim::jaro_winkler(unknown, c), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match best {
        Some((_, c)) => format!("\nhint: did you mean `{c}`?"),
        None => String::new(),
    }
}

/// The unknown key and the rest of serde's message (the accepted keys, each in backticks)
/// when `message` is serde's "unknown field `k`, expected ...".
fn unknown_field(message: &str) -> Option<(&str, &str)> {
    message.strip_prefix("unknown field `")?.split_once('`')
}

/// The candidate an unknown dotted key (a Debezium / Kafka Connect key) is most likely a
/// typo of: the one fewest edits away (Damerau-Levenshtein: a swapped pair of letters is
/// one edit), at most 2 edits, 3 for a key longer than 20 characters; `None` when no
/// candidate is that close. Edits rather than the TOML hint's similarity: dotted keys share
/// long prefixes (`database.`, `transforms.outbox.`), which make unrelated keys look alike.
pub(super) fn closest_key<'a>(
    unknown: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let most = if unknown.len() > 20 { 3 } else { 2 };
    candidates
        .into_iter()
        .filter(|c| *c != unknown)
        .map(|c| (strsim::damerau_levenshtein(unknown, c), c))
        .filter(|(d, _)| *d <= most)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The key among `present` (a file's keys) that looks like a misspelling of `wanted`, a key
/// the file lacks: as [`closest_key`], the other way round.
pub(super) fn misspelt_as<'a>(
    wanted: &str,
    present: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    closest_key(wanted, present)
}

#[cfg(test)]
mod tests {
    use super::{closest_key, did_you_mean};

    #[test]
    fn dotted_keys_get_the_one_fewest_edits_away() {
        let known = ["database.hostname", "database.port", "table.include.list"];
        assert_eq!(
            closest_key("database.hostnmae", known),
            Some("database.hostname")
        );
        assert_eq!(
            closest_key("table.inlcude.lst", known),
            Some("table.include.list")
        );
        assert_eq!(closest_key("database.foo", known), None);
        assert_eq!(closest_key("database.port", known), None);
        assert_eq!(
            super::misspelt_as("database.hostname", ["database.hostnmae", "database.port"]),
            Some("database.hostnmae")
        );
    }

    #[test]
    fn unknown_keys_get_the_closest_accepted_one() {
        let m = "unknown field `server_idd`, expected one of `kind`, `host`, `port`, `server_id`, `start`";
        assert_eq!(did_you_mean(m), "\nhint: did you mean `server_id`?");
        let m = "unknown field `prot`, expected one of `kind`, `host`, `port`, `user`";
        assert_eq!(did_you_mean(m), "\nhint: did you mean `port`?");
        let m = "unknown field `database.password`, expected one of `password`, `password_env`";
        assert!(did_you_mean(m).contains("in outboxd's TOML it is `password`"));
        let m = "unknown field `zzzzzz`, expected `store` or `path`";
        assert_eq!(did_you_mean(m), "");
        assert_eq!(did_you_mean("invalid type: integer, expected a string"), "");
    }

    #[test]
    fn keys_read_apart_are_candidates_too() {
        use super::did_you_mean_also;
        let m = "unknown field `pasword`, expected one of `url`, `stream`";
        assert_eq!(did_you_mean(m), "");
        assert_eq!(
            did_you_mean_also(m, &["user", "password"]),
            "\nhint: did you mean `password`?"
        );
    }
}
