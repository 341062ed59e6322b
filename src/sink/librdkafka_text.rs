//! librdkafka's words: every piece of librdkafka text outboxd reads, in one table.
//!
//! outboxd decides from librdkafka's error codes wherever librdkafka gives one (the error
//! callback's `_AUTHENTICATION`, `_SSL`, `_ALL_BROKERS_DOWN`, ...; delivery reports; the
//! transactional API's errors; CreateTopics answers). Some things it only says in words: a
//! `security.protocol` mismatch (a connection closed in a telling state), a coordinator that
//! is still starting, a fenced producer's log lines, whether an OAUTHBEARER failure is about
//! getting a token or the broker refusing it, the HTTP status of a failed OIDC token request,
//! and the topic a transaction could not add. This module is the only place that reads that
//! text: [`PATTERNS`] lists each pattern with what it means ([`Meaning`]) and where
//! librdkafka writes it, [`classify`] matches a line against the table, and the functions
//! below it turn the meanings into what the rest of `sink` asks ([`protocol_mismatch`],
//! [`log_line`], [`token_reason`], [`token_source`], [`starting_coordinator_retried`],
//! [`txn_refusal`]). No other module calls `contains` on librdkafka's text.
//!
//! The text is librdkafka 2.12.1's, as `rdkafka-sys` 4.10.0+2.12.1 bundles it (Cargo.lock);
//! each row names the source file that writes it. A librdkafka upgrade that rewords one of
//! them fails that row's unit test only if the test's line is updated from a real run: the
//! lines in the tests are real ones (from the test brokers, as the comments say) or, where
//! noted, put together from librdkafka's format string.

use rdkafka::error::RDKafkaErrorCode;

/// What a piece of librdkafka text means to outboxd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Meaning {
    /// `[thrd:<name>]: ` at the start: librdkafka's thread prefix (`log.thread.name`), not
    /// part of what it says.
    ThreadPrefix,
    /// A log line of facility `FAIL`: a broker connection failed (`<broker>: <error>`).
    BrokerConnectionFailed,
    /// librdkafka's own guess after a TLS handshake the peer closed: the listener speaks
    /// plaintext (`security.protocol` asks for TLS of a PLAINTEXT listener).
    GuessPlaintextListener,
    /// librdkafka's own guess after a plaintext connection closed while asking ApiVersion:
    /// the listener expects TLS.
    GuessTlsListener,
    /// The connection was closed (by the peer).
    ConnectionClosed,
    /// It happened during the TLS handshake.
    InTlsHandshake,
    /// It happened at the first request, ApiVersion.
    InApiVersionQuery,
    /// The broker name of a TLS connection (`ssl://`, `sasl_ssl://`).
    TlsBrokerName,
    /// The producer was fenced by a newer instance with its `transactional.id`.
    Fenced,
    /// No broker of the cluster is up (`N/M brokers are down`).
    AllBrokersDown,
    /// The line is about SASL or TLS.
    SaslOrTls,
    /// A coordinator is loading or not available yet (Kafka error codes 14 and 15).
    StartingCoordinator,
    /// librdkafka retries the request on its own.
    Retrying,
    /// An `_AUTHENTICATION` error about an OAUTHBEARER token (not one of SCRAM/PLAIN).
    OauthbearerToken,
    /// An `_AUTHENTICATION` error whose SASL handshake request failed because the
    /// connection did (`Local: Broker transport failure`): no credentials were refused.
    HandshakeTransportFailure,
    /// librdkafka could not get a token (as opposed to a broker refusing one).
    TokenNotAcquired,
    /// outboxd's own token source (`sink::oauth`) said it retries.
    OutboxdRetries,
    /// The token source is outboxd's AWS MSK IAM signer.
    MskIamToken,
    /// The token source is a token file.
    TokenFileToken,
    /// librdkafka's OIDC token request failed (`... (<HTTP status>)`).
    OidcTokenRequestFailed,
    /// The transaction coordinator would not add a topic's partition to the transaction.
    TxnPartitionNotAdded,
    /// ... because the principal may not write to the topic.
    TxnTopicAuthorizationFailed,
    /// ... because the topic is invalid.
    TxnInvalidTopic,
}

/// Where in the text a pattern must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// Anywhere.
    Within,
    /// At the start.
    Start,
    /// At the end (trailing white space aside).
    End,
    /// The whole text (surrounding white space aside).
    Whole,
}

/// One row of [`PATTERNS`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pattern {
    /// What the text means.
    pub meaning: Meaning,
    /// The log facilities the row applies to (`[]`: any line, and error strings).
    pub facilities: &'static [&'static str],
    /// Where the text must be.
    pub place: Place,
    /// Any one of these; `[]`: any text (the facility alone decides).
    pub texts: &'static [&'static str],
    /// Where librdkafka 2.12.1 writes it (file: function or format string). Documentation
    /// that travels with the row; only the tests read it.
    #[cfg_attr(not(test), allow(dead_code))]
    pub source: &'static str,
}

impl Pattern {
    /// Whether a line of facility `fac` (`None`: an error string) with text `text` matches.
    fn matches(&self, fac: Option<&str>, text: &str) -> bool {
        if !self.facilities.is_empty() && !fac.is_some_and(|f| self.facilities.contains(&f)) {
            return false;
        }
        if self.texts.is_empty() {
            return true;
        }
        self.texts.iter().any(|t| match self.place {
            Place::Within => text.contains(t),
            Place::Start => text.starts_with(t),
            Place::End => text.trim_end().ends_with(t),
            Place::Whole => text.trim() == *t,
        })
    }
}

/// Every pattern outboxd matches in librdkafka's log lines and error strings.
pub(crate) const PATTERNS: &[Pattern] = &[
    Pattern {
        meaning: Meaning::ThreadPrefix,
        facilities: &[],
        place: Place::Start,
        texts: &["[thrd:"],
        source: "rdkafka.c rd_kafka_log0: \"[thrd:%s]: \" (log.thread.name=true, the default)",
    },
    Pattern {
        meaning: Meaning::BrokerConnectionFailed,
        facilities: &["FAIL"],
        place: Place::Within,
        texts: &[],
        source: "rdkafka_broker.c rd_kafka_broker_fail: facility FAIL, \"%s: %s\" (broker name, error)",
    },
    Pattern {
        meaning: Meaning::GuessPlaintextListener,
        facilities: &[],
        place: Place::Within,
        texts: &["connecting to a PLAINTEXT broker listener?"],
        source: "rdkafka_ssl.c rd_kafka_transport_ssl_handshake: \"SSL handshake failed: %s%s\"",
    },
    Pattern {
        meaning: Meaning::GuessTlsListener,
        facilities: &[],
        place: Place::Within,
        texts: &["connecting to a SSL listener?"],
        source: "rdkafka_broker.c rd_kafka_broker_set_error: a disconnect in state APIVERSION_QUERY without TLS",
    },
    Pattern {
        meaning: Meaning::ConnectionClosed,
        facilities: &[],
        place: Place::Within,
        texts: &["Disconnected", "closed by peer"],
        source: "rdkafka_transport.c (\"Disconnected: connection closed by peer: receive 0 after POLLIN\"), rdkafka_ssl.c (\"Disconnected: SSL connection closed by peer\")",
    },
    Pattern {
        meaning: Meaning::InTlsHandshake,
        facilities: &[],
        place: Place::Within,
        texts: &["in state SSL_HANDSHAKE"],
        source: "rdkafka_broker.c rd_kafka_broker_set_error: \"after %dms in state %s\"",
    },
    Pattern {
        meaning: Meaning::InApiVersionQuery,
        facilities: &[],
        place: Place::Within,
        texts: &["in state APIVERSION_QUERY"],
        source: "rdkafka_broker.c rd_kafka_broker_set_error: \"after %dms in state %s\"",
    },
    Pattern {
        meaning: Meaning::TlsBrokerName,
        facilities: &[],
        place: Place::Start,
        texts: &["ssl://", "sasl_ssl://"],
        source: "rdkafka_broker.c rd_kafka_secproto_names: a broker name's protocol prefix (none for plaintext)",
    },
    Pattern {
        meaning: Meaning::Fenced,
        facilities: &[],
        place: Place::Within,
        texts: &[
            "has been fenced by a newer instance",
            "Producer attempted an operation with an old epoch",
        ],
        source: "rdkafka.c rd_kafka_err_descs: _FENCED, INVALID_PRODUCER_EPOCH (in FATAL/TXNERR lines)",
    },
    Pattern {
        meaning: Meaning::AllBrokersDown,
        facilities: &[],
        place: Place::Within,
        texts: &["brokers are down"],
        source: "rdkafka_broker.c rd_kafka_broker_set_state: \"%i/%i brokers are down\"",
    },
    Pattern {
        meaning: Meaning::SaslOrTls,
        facilities: &[],
        place: Place::Within,
        texts: &["SASL", "SSL"],
        source: "rdkafka_request.c \"SASL authentication error: %s\", rdkafka_ssl.c \"SSL handshake failed: %s\", ...",
    },
    Pattern {
        meaning: Meaning::StartingCoordinator,
        facilities: &[],
        place: Place::Within,
        texts: &["Coordinator load in progress", "Coordinator not available"],
        source: "rdkafka.c rd_kafka_err_descs: COORDINATOR_LOAD_IN_PROGRESS (14), COORDINATOR_NOT_AVAILABLE (15)",
    },
    Pattern {
        meaning: Meaning::Retrying,
        facilities: &[],
        place: Place::End,
        texts: &["retrying"],
        source: "rdkafka_idempotence.c rd_kafka_idemp_request_pid_failed: GETPID \"%s: retrying\"",
    },
    Pattern {
        meaning: Meaning::HandshakeTransportFailure,
        facilities: &[],
        place: Place::Within,
        texts: &["mechanism handshake failed: Local: Broker transport failure"],
        source: "rdkafka_request.c rd_kafka_handle_SaslHandshake: \"SASL %s mechanism handshake failed: %s: broker's supported mechanisms: %s\" with rd_kafka_err2str(_TRANSPORT)",
    },
    Pattern {
        meaning: Meaning::OauthbearerToken,
        facilities: &[],
        place: Place::Within,
        texts: &["OAUTHBEARER", "invalid_token"],
        source: "rdkafka_sasl_oauthbearer.c (\"Failed to acquire SASL OAUTHBEARER token: %s\", \"OAUTHBEARER cannot log in ...\"); the broker's SASL answer {\"status\":\"invalid_token\"} in rdkafka_request.c \"SASL authentication error: %s\"",
    },
    Pattern {
        meaning: Meaning::TokenNotAcquired,
        facilities: &[],
        place: Place::Within,
        texts: &["Failed to acquire SASL OAUTHBEARER token", "no token available"],
        source: "rdkafka_sasl_oauthbearer.c rd_kafka_oauthbearer_set_token_failure, rd_kafka_sasl_oauthbearer_client_new (\"... there is no token available; last error: %s\")",
    },
    Pattern {
        meaning: Meaning::OutboxdRetries,
        facilities: &[],
        place: Place::Within,
        texts: &[super::oauth::RETRIED],
        source: "not librdkafka's: outboxd's token sources (sink::oauth::RETRIED), carried in librdkafka's \"Failed to acquire SASL OAUTHBEARER token: %s\"",
    },
    Pattern {
        meaning: Meaning::MskIamToken,
        facilities: &[],
        place: Place::Within,
        texts: &["MSK IAM"],
        source: "not librdkafka's: outboxd's MSK IAM token source (sink::oauth), carried in librdkafka's \"Failed to acquire SASL OAUTHBEARER token: %s\"",
    },
    Pattern {
        meaning: Meaning::TokenFileToken,
        facilities: &[],
        place: Place::Within,
        texts: &["token file"],
        source: "not librdkafka's: outboxd's token file source (sink::oauth::token_file), carried in librdkafka's \"Failed to acquire SASL OAUTHBEARER token: %s\"",
    },
    Pattern {
        meaning: Meaning::OidcTokenRequestFailed,
        facilities: &["OIDC", "JWT"],
        place: Place::Within,
        texts: &["Failed to retrieve"],
        source: "rdkafka_sasl_oauthbearer_oidc.c: OIDC/JWT \"Failed to retrieve OIDC token from \\\"%s\\\": %s (%d)\"",
    },
    Pattern {
        meaning: Meaning::TxnPartitionNotAdded,
        facilities: &["ADDPARTS"],
        place: Place::Within,
        texts: &["Failed to add partition \""],
        source: "rdkafka_txnmgr.c rd_kafka_txn_handle_AddPartitionsToTxn: ADDPARTS \"Failed to add partition \\\"%.*s\\\" [%d] to transaction: %s\"",
    },
    Pattern {
        meaning: Meaning::TxnTopicAuthorizationFailed,
        facilities: &[],
        place: Place::Whole,
        texts: &["Broker: Topic authorization failed"],
        source: "rdkafka.c rd_kafka_err_descs: TOPIC_AUTHORIZATION_FAILED (the %s of the ADDPARTS line)",
    },
    Pattern {
        meaning: Meaning::TxnInvalidTopic,
        facilities: &[],
        place: Place::Whole,
        texts: &["Broker: Invalid topic"],
        source: "rdkafka.c rd_kafka_err_descs: TOPIC_EXCEPTION (the %s of the ADDPARTS line)",
    },
];

/// The meanings [`classify`] found in a text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Meanings(u32);

impl Meanings {
    /// Whether the text means `m`.
    pub(crate) fn has(self, m: Meaning) -> bool {
        self.0 & (1 << m as u32) != 0
    }

    fn add(&mut self, m: Meaning) {
        self.0 |= 1 << m as u32;
    }
}

/// Every [`Meaning`] of librdkafka's text `text`: a log line of facility `fac`, or an error
/// string (`fac` `None`), matched against [`PATTERNS`].
pub(crate) fn classify(fac: Option<&str>, text: &str) -> Meanings {
    let mut found = Meanings::default();
    for p in PATTERNS {
        if !found.has(p.meaning) && p.matches(fac, text) {
            found.add(p.meaning);
        }
    }
    found
}

/// Whether `text` (of facility `fac`) means `m`: only `m`'s rows of [`PATTERNS`].
fn means(m: Meaning, fac: Option<&str>, text: &str) -> bool {
    PATTERNS
        .iter()
        .any(|p| p.meaning == m && p.matches(fac, text))
}

/// `message` without librdkafka's thread prefix (`[thrd:<name>]: `), if it has one.
pub(crate) fn without_thread(message: &str) -> &str {
    if !means(Meaning::ThreadPrefix, None, message) {
        return message;
    }
    message.split_once("]: ").map_or(message, |(_, rest)| rest)
}

/// Which side of a `security.protocol` mismatch a closed connection points to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mismatch {
    /// TLS asked of a listener without it.
    TlsToPlaintext,
    /// No TLS, but the listener expects it.
    PlaintextToTls,
}

/// Whether librdkafka's description of a failed broker connection (`error`, without the
/// thread prefix: `<broker>: <what>`) is a listener closing it in a way that means a
/// `security.protocol` mismatch: librdkafka's own guesses ("connecting to a PLAINTEXT broker
/// listener?", "connecting to a SSL listener?"), or a connection closed by the peer in state
/// `SSL_HANDSHAKE`, or in state `APIVERSION_QUERY` of a client without TLS (its broker name
/// has no `ssl://` / `sasl_ssl://` prefix; librdkafka rdkafka_broker.c, rdkafka_ssl.c).
pub(crate) fn protocol_mismatch(error: &str) -> Option<Mismatch> {
    let m = classify(None, error);
    if m.has(Meaning::GuessPlaintextListener) {
        return Some(Mismatch::TlsToPlaintext);
    }
    if m.has(Meaning::GuessTlsListener) {
        return Some(Mismatch::PlaintextToTls);
    }
    if !m.has(Meaning::ConnectionClosed) {
        return None;
    }
    if m.has(Meaning::InTlsHandshake) {
        Some(Mismatch::TlsToPlaintext)
    } else if m.has(Meaning::InApiVersionQuery) && !m.has(Meaning::TlsBrokerName) {
        Some(Mismatch::PlaintextToTls)
    } else {
        None
    }
}

/// A broker connection failure (a `FAIL` line), as the link reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BrokerFailure<'a> {
    /// librdkafka's description without the thread prefix: `<broker>: <what>`.
    pub error: &'a str,
    /// What tells one broker's failures from another's: the line's first `: `-separated
    /// field (the thread prefix when there is one, `[thrd:<broker>]`; else the broker name).
    pub broker: &'a str,
    /// The `security.protocol` mismatch it means, if any ([`protocol_mismatch`]).
    pub mismatch: Option<Mismatch>,
}

/// A librdkafka log line, read for the connection state ([`super::link::KafkaLink`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogLine<'a> {
    /// The line as librdkafka wrote it.
    pub message: &'a str,
    /// A broker connection failed (facility `FAIL`).
    pub failure: Option<BrokerFailure<'a>>,
    /// librdkafka's OIDC token request failed with this HTTP status (-1: no answer).
    pub oidc_status: Option<i32>,
    /// The producer was fenced ([`Meaning::Fenced`]).
    pub fenced: bool,
    /// No broker is up ([`Meaning::AllBrokersDown`]).
    pub all_brokers_down: bool,
    /// About SASL or TLS ([`Meaning::SaslOrTls`]).
    pub sasl_or_tls: bool,
}

/// librdkafka's log line `message` of facility `fac`, read.
pub(crate) fn log_line<'a>(fac: &str, message: &'a str) -> LogLine<'a> {
    let m = classify(Some(fac), message);
    let failure = m.has(Meaning::BrokerConnectionFailed).then(|| {
        let error = without_thread(message);
        BrokerFailure {
            error,
            broker: message.split(": ").next().unwrap_or_default(),
            mismatch: protocol_mismatch(error),
        }
    });
    LogLine {
        message,
        failure,
        oidc_status: m
            .has(Meaning::OidcTokenRequestFailed)
            .then(|| http_status(message))
            .flatten(),
        fenced: m.has(Meaning::Fenced),
        all_brokers_down: m.has(Meaning::AllBrokersDown),
        sasl_or_tls: m.has(Meaning::SaslOrTls),
    }
}

/// The HTTP status at the end of an OIDC/JWT line: `... (<status>)`.
fn http_status(message: &str) -> Option<i32> {
    let open = message.rfind('(')?;
    message[open + 1..]
        .trim_end()
        .trim_end_matches(')')
        .parse()
        .ok()
}

/// What an `_AUTHENTICATION` error says about an OAUTHBEARER token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenReason {
    /// librdkafka could not get a token; `outboxd_retries`: outboxd's own token source said
    /// it retries.
    NotAcquired {
        /// outboxd's token source retries ([`super::oauth::RETRIED`]).
        outboxd_retries: bool,
    },
    /// The broker refused the token (or something else about it that a retry does not
    /// change).
    Refused,
}

/// What an `_AUTHENTICATION` error's `reason` says about an OAUTHBEARER token; `None` when
/// it is not about one (a refused SCRAM or PLAIN login).
/// Whether an `_AUTHENTICATION` error's `reason` says only that the connection failed during
/// the SASL handshake (a transient outage, not refused credentials).
pub(crate) fn handshake_transport_failure(reason: &str) -> bool {
    classify(None, reason).has(Meaning::HandshakeTransportFailure)
}

pub(crate) fn token_reason(reason: &str) -> Option<TokenReason> {
    let m = classify(None, reason);
    if !m.has(Meaning::OauthbearerToken) {
        return None;
    }
    Some(if m.has(Meaning::TokenNotAcquired) {
        TokenReason::NotAcquired {
            outboxd_retries: m.has(Meaning::OutboxdRetries),
        }
    } else {
        TokenReason::Refused
    })
}

/// Which token source a failed OAUTHBEARER login's `reason` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenSource {
    /// outboxd's AWS MSK IAM signer.
    MskIam,
    /// A token file.
    TokenFile,
    /// Anything else: an OIDC token endpoint.
    Oidc,
}

/// The token source a failed OAUTHBEARER login's `reason` names.
pub(crate) fn token_source(reason: &str) -> TokenSource {
    let m = classify(None, reason);
    if m.has(Meaning::MskIamToken) {
        TokenSource::MskIam
    } else if m.has(Meaning::TokenFileToken) {
        TokenSource::TokenFile
    } else {
        TokenSource::Oidc
    }
}

/// Whether a warning `message` is a request librdkafka retries because a coordinator is
/// still starting (loading, or not available yet).
pub(crate) fn starting_coordinator_retried(message: &str) -> bool {
    let m = classify(None, message);
    m.has(Meaning::Retrying) && m.has(Meaning::StartingCoordinator)
}

/// The topic and Kafka's error in an `ADDPARTS` line of a topic the transaction coordinator
/// would not add to the transaction for good: "Failed to add partition "<topic>" [<n>] to
/// transaction: Broker: Topic authorization failed" (or "Broker: Invalid topic").
pub(crate) fn txn_refusal(fac: &str, message: &str) -> Option<(String, RDKafkaErrorCode)> {
    const FAILED: &str = "Failed to add partition \"";
    if !means(Meaning::TxnPartitionNotAdded, Some(fac), message) {
        return None;
    }
    let rest = &message[message.find(FAILED)? + FAILED.len()..];
    let (topic, rest) = rest.split_once('"')?;
    let (_, why) = rest.split_once("to transaction: ")?;
    let why = classify(None, why);
    let code = if why.has(Meaning::TxnTopicAuthorizationFailed) {
        RDKafkaErrorCode::TopicAuthorizationFailed
    } else if why.has(Meaning::TxnInvalidTopic) {
        RDKafkaErrorCode::InvalidTopic
    } else {
        return None;
    };
    Some((topic.to_string(), code))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real lines, as librdkafka 2.12.1 wrote them in outboxd's tests (the test brokers of
    // tests/common), unless marked "from the format string".

    /// A plaintext client on the SASL_SSL listener (test broker, `FAIL`).
    const PLAINTEXT_ON_TLS: &str = "[thrd:localhost:42094/bootstrap]: localhost:42094/bootstrap: Disconnected: connection closed by peer: receive 0 after POLLIN (after 4ms in state APIVERSION_QUERY)";
    /// An SSL client on the PLAINTEXT listener (test broker, `FAIL`).
    const TLS_ON_PLAINTEXT: &str = "[thrd:ssl://127.0.0.1:42092/bootstrap]: ssl://127.0.0.1:42092/bootstrap: Disconnected: SSL connection closed by peer (after 0ms in state SSL_HANDSHAKE)";
    /// A refused connection (`FAIL`).
    const REFUSED: &str = "[thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms in state CONNECT)";
    /// A topic without WRITE permission in a transaction (test broker, `ADDPARTS`).
    const ADDPARTS: &str = "[thrd:sasl_ssl://localhost:41094/bootstrap]: sasl_ssl://localhost:41094/1: Failed to add partition \"shop.Denied\" [2] to transaction: Broker: Topic authorization failed";

    fn only(m: Meaning) -> impl Fn(Option<&str>, &str) -> bool {
        move |fac, text| classify(fac, text).has(m)
    }

    #[test]
    fn every_meaning_has_a_row_and_every_row_a_source() {
        for p in PATTERNS {
            assert!(!p.source.is_empty(), "{:?}", p.meaning);
        }
        let mut meanings: Vec<Meaning> = PATTERNS.iter().map(|p| p.meaning).collect();
        meanings.sort();
        meanings.dedup();
        assert_eq!(meanings.len(), PATTERNS.len(), "one row per meaning");
        assert!(PATTERNS.len() < 32, "Meanings is a u32 bit set");
    }

    #[test]
    fn thread_prefix() {
        let is = only(Meaning::ThreadPrefix);
        assert!(is(Some("FAIL"), REFUSED));
        assert_eq!(
            without_thread(REFUSED),
            "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms in state CONNECT)"
        );
        let bare = "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed";
        assert!(!is(Some("FAIL"), bare));
        assert_eq!(without_thread(bare), bare);
    }

    #[test]
    fn broker_connection_failed() {
        let is = only(Meaning::BrokerConnectionFailed);
        assert!(is(Some("FAIL"), REFUSED));
        assert!(!is(Some("ERROR"), REFUSED));
        assert!(!is(None, REFUSED));
        let line = log_line("FAIL", REFUSED);
        let f = line.failure.expect("a FAIL line");
        assert_eq!(f.broker, "[thrd:127.0.0.1:1/bootstrap]");
        assert_eq!(f.mismatch, None);
        assert!(log_line("ERROR", REFUSED).failure.is_none());
    }

    #[test]
    fn guess_plaintext_listener() {
        // From the format strings (rdkafka_ssl.c, rdkafka_broker.c): "SSL handshake failed:
        // %s%s" with the disconnect and librdkafka's guess.
        let line = "b:1/bootstrap: SSL handshake failed: Disconnected: connecting to a PLAINTEXT broker listener?";
        assert!(only(Meaning::GuessPlaintextListener)(None, line));
        assert_eq!(protocol_mismatch(line), Some(Mismatch::TlsToPlaintext));
    }

    #[test]
    fn guess_tls_listener() {
        // From the format string (rdkafka_broker.c rd_kafka_broker_set_error).
        let line = "b:1/bootstrap: Disconnected while requesting ApiVersion: might be caused by incorrect security.protocol configuration (connecting to a SSL listener?) or broker version is < 0.10 (see api.version.request)";
        assert!(only(Meaning::GuessTlsListener)(None, line));
        assert_eq!(protocol_mismatch(line), Some(Mismatch::PlaintextToTls));
    }

    #[test]
    fn connection_closed() {
        let is = only(Meaning::ConnectionClosed);
        assert!(is(None, without_thread(PLAINTEXT_ON_TLS)));
        assert!(is(None, without_thread(TLS_ON_PLAINTEXT)));
        assert!(!is(None, without_thread(REFUSED)));
        // An idle connection closed (after connections.max.idle.ms) is closed too, but in
        // state UP: no mismatch.
        let idle = "b:1/1: Disconnected (after 600000ms in state UP)";
        assert!(is(None, idle));
        assert_eq!(protocol_mismatch(idle), None);
    }

    #[test]
    fn in_tls_handshake() {
        let error = without_thread(TLS_ON_PLAINTEXT);
        assert!(only(Meaning::InTlsHandshake)(None, error));
        assert_eq!(protocol_mismatch(error), Some(Mismatch::TlsToPlaintext));
        let line = log_line("FAIL", TLS_ON_PLAINTEXT);
        assert_eq!(
            line.failure.map(|f| (f.error, f.mismatch)),
            Some((error, Some(Mismatch::TlsToPlaintext)))
        );
    }

    #[test]
    fn in_api_version_query() {
        let error = without_thread(PLAINTEXT_ON_TLS);
        assert!(only(Meaning::InApiVersionQuery)(None, error));
        assert_eq!(protocol_mismatch(error), Some(Mismatch::PlaintextToTls));
        // A refused connection is no mismatch.
        assert_eq!(protocol_mismatch(without_thread(REFUSED)), None);
    }

    #[test]
    fn tls_broker_name() {
        let is = only(Meaning::TlsBrokerName);
        assert!(is(None, without_thread(TLS_ON_PLAINTEXT)));
        assert!(!is(None, without_thread(PLAINTEXT_ON_TLS)));
        // A TLS client closed at its first request is no mismatch (the broker may be one
        // before 0.10, or closing for another reason).
        let tls_client = "sasl_ssl://b:1/bootstrap: Disconnected: connection closed by peer (after 3ms in state APIVERSION_QUERY)";
        assert!(is(None, tls_client));
        assert_eq!(protocol_mismatch(tls_client), None);
    }

    #[test]
    fn fenced() {
        // From the format strings: rdkafka.c rd_kafka_set_fatal_error0 (FATAL "Fatal error:
        // %s: %s") and rdkafka_idempotence.c rd_kafka_idemp_check_error ("Producer fenced by
        // newer instance: %s"); rdkafka_txnmgr.c TXNERR "Fatal transaction error: %s (%s)".
        for line in [
            "Fatal error: Local: This instance has been fenced by a newer instance: Producer fenced by newer instance: Failed to acquire transactional PID from broker TxnCoordinator/1: Broker: Producer attempted an operation with an old epoch",
            "Fatal transaction error: ProduceRequest for shop.Order [0] with 3 message(s) failed: Broker: Producer attempted an operation with an old epoch (broker 1 PID{Id:1000,Epoch:0}, base seq 0): transactional producer fenced by newer producer instance (_FENCED)",
        ] {
            assert!(only(Meaning::Fenced)(Some("TXNERR"), line), "{line}");
            assert!(log_line("FATAL", line).fenced);
        }
        assert!(!log_line("FAIL", REFUSED).fenced);
    }

    #[test]
    fn all_brokers_down() {
        // rdkafka_broker.c "%i/%i brokers are down", as the error event logs it.
        assert!(only(Meaning::AllBrokersDown)(
            Some("ERROR"),
            "1/1 brokers are down"
        ));
        assert!(log_line("ERROR", "1/1 brokers are down").all_brokers_down);
        assert!(!log_line("ERROR", "Broker: Not coordinator").all_brokers_down);
    }

    #[test]
    fn sasl_or_tls() {
        let is = only(Meaning::SaslOrTls);
        assert!(is(
            Some("ERROR"),
            "sasl_ssl://k1:9092/bootstrap: SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 5ms in state AUTH_REQ)"
        ));
        assert!(is(
            Some("ERROR"),
            "ssl://127.0.0.1:42093/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified, verify that ssl.ca.location is correctly configured or root CA certificates are installed (install ca-certificates package) (after 4ms in state SSL_HANDSHAKE)"
        ));
        assert!(!is(Some("ERROR"), "1/1 brokers are down"));
    }

    #[test]
    fn starting_coordinator() {
        // As librdkafka logs them (GETPID) while a fresh broker creates __transaction_state.
        for m in [
            "Failed to acquire idempotence PID from broker 127.0.0.1:39092/1: Broker: \
             Coordinator load in progress: retrying",
            "Failed to acquire transactional PID from broker TxnCoordinator/1: Broker: \
             Coordinator not available: retrying",
        ] {
            assert!(only(Meaning::StartingCoordinator)(Some("GETPID"), m), "{m}");
            assert!(starting_coordinator_retried(m), "{m}");
        }
        // Not retried.
        assert!(!starting_coordinator_retried(
            "Failed to acquire idempotence PID: Coordinator load in progress"
        ));
    }

    #[test]
    fn retrying() {
        let is = only(Meaning::Retrying);
        let other = "Failed to acquire idempotence PID from broker 1: Broker: Cluster \
                     authorization failed: retrying";
        assert!(is(Some("GETPID"), other));
        assert!(is(Some("GETPID"), &format!("{other} \n")));
        // Retried, but not a starting coordinator.
        assert!(!starting_coordinator_retried(other));
        assert!(!is(Some("GETPID"), "retrying later: no"));
    }

    #[test]
    fn oauthbearer_token() {
        let is = only(Meaning::OauthbearerToken);
        let acquire = r#"Failed to acquire SASL OAUTHBEARER token: {"error":"invalid_client"}"#;
        assert!(is(None, acquire));
        // The broker refused the token (its SASL answer).
        let broker =
            "SASL authentication error: {\"status\":\"invalid_token\"} (after 1ms in state AUTH_REQ)";
        assert!(is(None, broker));
        assert_eq!(token_reason(broker), Some(TokenReason::Refused));
        // A refused SCRAM login is not about a token.
        let scram = "SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512";
        assert!(!is(None, scram));
        assert_eq!(token_reason(scram), None);
    }

    #[test]
    fn token_not_acquired() {
        let is = only(Meaning::TokenNotAcquired);
        for reason in [
            r#"Failed to acquire SASL OAUTHBEARER token: {"error":"invalid_client"}"#,
            // rdkafka_sasl_oauthbearer.c, as the OAUTHBEARER tests see it.
            "OAUTHBEARER cannot log in because there is no token available; last error: Failed to retrieve OIDC token",
        ] {
            assert!(is(None, reason), "{reason}");
            assert_eq!(
                token_reason(reason),
                Some(TokenReason::NotAcquired {
                    outboxd_retries: false
                })
            );
        }
        // An expired token in a token file: not acquired, and outboxd does not retry it.
        let expired =
            "Failed to acquire SASL OAUTHBEARER token: Must supply an unexpired token: now 2 > 1";
        assert_eq!(
            token_reason(expired),
            Some(TokenReason::NotAcquired {
                outboxd_retries: false
            })
        );
    }

    #[test]
    fn outboxd_retries() {
        let ours = format!(
            "Failed to acquire SASL OAUTHBEARER token: no AWS credentials for MSK IAM ... {}",
            super::super::oauth::RETRIED
        );
        assert!(only(Meaning::OutboxdRetries)(None, &ours));
        assert_eq!(
            token_reason(&ours),
            Some(TokenReason::NotAcquired {
                outboxd_retries: true
            })
        );
    }

    #[test]
    fn msk_iam_token() {
        let reason = format!(
            "Failed to acquire SASL OAUTHBEARER token: no MSK IAM token within 10s (AWS credentials not reachable?) {}",
            super::super::oauth::RETRIED
        );
        assert!(only(Meaning::MskIamToken)(None, &reason));
        assert_eq!(token_source(&reason), TokenSource::MskIam);
    }

    #[test]
    fn token_file_token() {
        let reason = "Failed to acquire SASL OAUTHBEARER token: the token in the token file /t (sasl.oauthbearer.token.endpoint.url) expired at 2026-12-03T06:33:30Z (exp claim): whatever writes the file is not keeping it current; it must replace the token before it expires";
        assert!(only(Meaning::TokenFileToken)(None, reason));
        assert_eq!(token_source(reason), TokenSource::TokenFile);
        assert_eq!(
            token_source("Failed to acquire SASL OAUTHBEARER token: denied"),
            TokenSource::Oidc
        );
    }

    #[test]
    fn oidc_token_request_failed() {
        let line = r#"[thrd:background]: Failed to retrieve OIDC token from "http://idp/token": {"error":"invalid_client"} (401)"#;
        assert!(only(Meaning::OidcTokenRequestFailed)(Some("OIDC"), line));
        assert_eq!(log_line("OIDC", line).oidc_status, Some(401));
        assert_eq!(
            log_line(
                "JWT",
                r#"Failed to retrieve OIDC token from "u": Couldn't connect to server (-1)"#
            )
            .oidc_status,
            Some(-1)
        );
        // Another facility: not the token request.
        assert_eq!(log_line("FAIL", line).oidc_status, None);
    }

    #[test]
    fn txn_partition_not_added() {
        assert!(only(Meaning::TxnPartitionNotAdded)(
            Some("ADDPARTS"),
            ADDPARTS
        ));
        assert!(!only(Meaning::TxnPartitionNotAdded)(
            Some("TXNERR"),
            ADDPARTS
        ));
        assert_eq!(txn_refusal("TXNERR", ADDPARTS), None);
        // The partitions not attempted because of it, other errors: none.
        for other in ["Operation not attempted", "Coordinator not available"] {
            let l = ADDPARTS.replace("Topic authorization failed", other);
            assert_eq!(txn_refusal("ADDPARTS", &l), None, "{l}");
        }
    }

    #[test]
    fn txn_topic_authorization_failed() {
        assert!(only(Meaning::TxnTopicAuthorizationFailed)(
            None,
            "Broker: Topic authorization failed"
        ));
        assert_eq!(
            txn_refusal("ADDPARTS", ADDPARTS),
            Some((
                "shop.Denied".to_string(),
                RDKafkaErrorCode::TopicAuthorizationFailed
            ))
        );
    }

    #[test]
    fn txn_invalid_topic() {
        assert!(only(Meaning::TxnInvalidTopic)(
            None,
            "Broker: Invalid topic"
        ));
        let line = ADDPARTS.replace("Topic authorization failed", "Invalid topic");
        assert_eq!(
            txn_refusal("ADDPARTS", &line).map(|(_, c)| c),
            Some(RDKafkaErrorCode::InvalidTopic)
        );
    }

    #[test]
    fn a_sasl_handshake_cut_by_the_connection_is_no_refusal() {
        // The SASL_SSL test broker, under load (a CI run: edges_mariadb).
        let cut = "GroupCoordinator: SASL SCRAM-SHA-256 mechanism handshake failed: Local: Broker transport failure: broker's supported mechanisms: (n/a) (after 0ms in state DOWN)";
        assert!(handshake_transport_failure(cut));
        let refused = "SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512";
        assert!(!handshake_transport_failure(refused));
        // Put together from the format string: the broker does not offer the mechanism.
        let unsupported = "SASL SCRAM-SHA-256 mechanism handshake failed: Broker: Unsupported SASL mechanism: broker's supported mechanisms: PLAIN";
        assert!(!handshake_transport_failure(unsupported));
    }
}
