//! A TLS failure that is the server certificate's validity period, not the trust settings:
//! an expired certificate is renewed on the server, and no `rootcert`, truststore or CA
//! change on this side helps, so the error says so instead of pointing at them.
//!
//! The causes recognised: rustls' (PostgreSQL, and the TLS probe of `check` for Kafka),
//! `certificate expired: verification time T (UNIX), but certificate is not valid after N
//! (S seconds ago)` and `not valid yet` alike, or the bare `Expired` / `NotValidYet`; and
//! OpenSSL's X.509 verify result as native-tls appends it (MySQL/MariaDB), `certificate has
//! expired` / `certificate is not yet valid`. librdkafka reports only `certificate verify
//! failed` for either: `check` probes the broker with rustls to tell.

/// What is wrong with the server certificate's validity period, from a TLS failure's
/// `cause`: `None` when it is something else (an unknown CA, another host name, ...).
///
/// The text says what happened (with the date when the cause gives it, UTC) and where it is
/// fixed: on the server for an expired certificate; the clocks for one not valid yet.
pub fn validity_problem(cause: &str) -> Option<String> {
    let lower = cause.to_ascii_lowercase();
    if let Some(after) = seconds_after(cause, "certificate is not valid after ") {
        return Some(expired(Some(after)));
    }
    if lower.contains("certificate has expired")
        || lower.contains("certificate expired")
        || (cause.contains("Expired") && !cause.contains("ExpiredRevocationList"))
    {
        return Some(expired(None));
    }
    if let Some(before) = seconds_after(cause, "certificate is not valid before ") {
        return Some(not_yet(Some(before)));
    }
    if lower.contains("certificate is not yet valid")
        || lower.contains("certificate not valid yet")
        || cause.contains("NotValidYet")
    {
        return Some(not_yet(None));
    }
    None
}

/// The advice after a TLS failure's `cause`: its [`validity_problem`] when it is one, else
/// `otherwise` (what to check of the settings here).
pub fn advice(cause: &str, otherwise: impl FnOnce() -> String) -> String {
    validity_problem(cause).unwrap_or_else(otherwise)
}

/// `; ` and the [`validity_problem`] of `cause`, or nothing: for a message that gives no
/// other advice.
pub fn note(cause: &str) -> String {
    validity_problem(cause).map_or_else(String::new, |p| format!("; {p}"))
}

fn expired(at: Option<i64>) -> String {
    let when = at.map_or_else(String::new, |s| {
        format!(" on {}", crate::value::utc_seconds(s))
    });
    format!(
        "the server's certificate expired{when}: renew it on the server (the CA certificates \
         and TLS settings here are not the cause)"
    )
}

fn not_yet(at: Option<i64>) -> String {
    let when = at.map_or_else(String::new, |s| {
        format!(" (valid from {})", crate::value::utc_seconds(s))
    });
    format!(
        "the server's certificate is not valid yet{when}: check this host's clock and the \
         server's certificate dates (the CA certificates and TLS settings here are not the \
         cause)"
    )
}

/// The integer after `prefix` in `text`.
fn seconds_after(text: &str, prefix: &str) -> Option<i64> {
    let rest = &text[text.find(prefix)? + prefix.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::{ServerName, UnixTime};

    use super::validity_problem;
    use crate::tls::TrustAnchors;

    /// rustls' verification of the expired test certificate against its CA, as the
    /// handshake makes it: the error as the connection reports it.
    fn rustls_verify_expired() -> String {
        let ca =
            TrustAnchors::from_pem_text("ca", include_str!("testdata/expired-ca.pem")).unwrap();
        let leaf = TrustAnchors::from_pem_text("leaf", include_str!("testdata/expired-server.pem"))
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.certs[0].clone()).unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        verifier
            .verify_server_cert(
                &leaf.certs[0],
                &[],
                &ServerName::try_from("localhost").unwrap(),
                &[],
                UnixTime::now(),
            )
            .unwrap_err()
            .to_string()
    }

    /// rustls' words for a real expired certificate (the test CA's, valid for January 2024
    /// only), as the PostgreSQL connection and `check`'s Kafka probe report them.
    #[test]
    fn an_expired_certificate_is_named_with_its_date() {
        let cause = rustls_verify_expired();
        assert!(cause.contains("certificate expired"), "{cause}");
        let said = validity_problem(&cause).unwrap();
        assert!(
            said.starts_with("the server's certificate expired on 2024-02-01T00:00:00"),
            "{said}"
        );
        assert!(said.contains("renew it on the server"), "{said}");
        // As the PostgreSQL connection reports it: no advice to check sslrootcert.
        let pg = crate::source::postgres::error::PgError::Tls {
            at: "localhost:5432/shop".into(),
            cause: cause.clone(),
            tls: crate::config::tls::PgTlsNames::of(crate::config::ConfigFormat::Toml),
        }
        .to_string();
        assert!(
            pg.contains("the server's certificate expired on 2024-02-01"),
            "{pg}"
        );
        assert!(!pg.contains("check rootcert"), "{pg}");
        // librdkafka's words for it name no cause: the advice says how to find out.
        let kafka = crate::sink::LinkFailure::Tls {
            bootstrap: "localhost:9093".into(),
            reason: "SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified".into(),
        }
        .to_string();
        assert!(
            kafka.contains("`outboxd check` verifies the certificate itself"),
            "{kafka}"
        );
        // OpenSSL's verify result, as native-tls appends it (MySQL/MariaDB).
        let openssl = "error:0A000086:SSL routines:tls_post_process_server_certificate:certificate verify failed:ssl/statem/statem_clnt.c:1889: (certificate has expired)";
        assert!(validity_problem(openssl)
            .unwrap()
            .starts_with("the server's certificate expired:"));
        assert!(validity_problem("invalid peer certificate: NotValidYet")
            .unwrap()
            .contains("not valid yet"));
        for other in [
            "invalid peer certificate: UnknownIssuer",
            "error:0A000086:SSL routines::certificate verify failed: (unable to get local issuer certificate)",
            "invalid peer certificate: certificate not valid for name \"x\"",
            "invalid certificate revocation list: ExpiredRevocationList",
        ] {
            assert_eq!(validity_problem(other), None, "{other}");
        }
    }
}
