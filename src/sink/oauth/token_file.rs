//! A token file: a serialized JWT that another process keeps current (a Kubernetes projected
//! service-account token, a sidecar's output), read again at each refresh — Kafka's
//! `sasl.oauthbearer.token.endpoint.url=file:/path` (`FileJwtRetriever`).
//!
//! The token is handed to librdkafka as it is; its `exp` claim (seconds since the epoch)
//! is the lifetime librdkafka refreshes against, its `sub` claim the principal name, as
//! Kafka's client-side `ClientJwtValidator` reads them (the signature is the brokers' to
//! check). The file may hold the JWT alone or a token endpoint's JSON answer with it in
//! `access_token`.

use std::path::Path;
use std::time::SystemTime;

use base64::Engine;
use rdkafka::client::OAuthToken;

/// The token in `path`, checked for the claims librdkafka needs and not expired at `now`.
/// Errors name the file and the setting, never the token.
pub fn read(path: &Path, now: SystemTime) -> Result<OAuthToken, String> {
    let setting = "sasl.oauthbearer.token.endpoint.url";
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "cannot read the token file {} ({setting}): {e} {}",
            path.display(),
            super::RETRIED
        )
    })?;
    let text = text.trim();
    let token = if text.starts_with('{') {
        serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|v| v.get("access_token")?.as_str().map(str::to_string))
            .ok_or_else(|| {
                format!(
                    "the token file {} ({setting}) is JSON without an access_token",
                    path.display()
                )
            })?
    } else {
        text.to_string()
    };
    let claims = claims(&token).map_err(|why| {
        format!(
            "the token in the token file {} ({setting}) is not a JWT: {why}",
            path.display()
        )
    })?;
    let exp = claims
        .get("exp")
        .and_then(serde_json::Value::as_f64)
        .ok_or_else(|| {
            format!(
                "the token in the token file {} ({setting}) has no exp claim",
                path.display()
            )
        })?;
    let sub = claims
        .get("sub")
        .and_then(serde_json::Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            format!(
                "the token in the token file {} ({setting}) has no sub claim",
                path.display()
            )
        })?;
    let lifetime_ms = (exp * 1000.0) as i64;
    // Definite (no RETRIED): the brokers refuse an expired token, and the connector stops
    // with exit 1 rather than waiting for a file that is no longer kept current (README
    // "TLS and SASL": "a token already expired ... stops the connector at startup").
    if lifetime_ms <= super::millis_since_epoch(now) {
        return Err(format!(
            "the token in the token file {} ({setting}) expired at {} (exp claim): whatever writes the file is not keeping it current; it must replace the token before it expires",
            path.display(),
            crate::value::utc_seconds(exp as i64),
        ));
    }
    Ok(OAuthToken {
        token,
        principal_name: sub.to_string(),
        lifetime_ms,
    })
}

/// The claims (payload) of a JWT in compact serialization (`header.payload.signature`).
fn claims(token: &str) -> Result<serde_json::Map<String, serde_json::Value>, &'static str> {
    let mut parts = token.split('.');
    let (_, Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not three dot-separated parts");
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| "its payload is not base64url")?;
    match serde_json::from_slice(&bytes) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        _ => Err("its payload is not a JSON object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn jwt(claims: &str) -> String {
        let e = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.c2ln", e(r#"{"alg":"RS256"}"#), e(claims))
    }

    #[test]
    fn a_jwt_its_expiry_and_principal() {
        let dir = std::env::temp_dir().join(format!("outboxd-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let token = jwt(r#"{"sub":"relay","exp":1060}"#);
        std::fs::write(&path, format!("{token}\n")).unwrap();
        let t = read(&path, now).unwrap();
        assert_eq!(
            (t.token.as_str(), t.principal_name.as_str(), t.lifetime_ms),
            (token.as_str(), "relay", 1_060_000)
        );
        std::fs::write(
            &path,
            format!(r#"{{"access_token":"{token}","token_type":"bearer"}}"#),
        )
        .unwrap();
        assert_eq!(read(&path, now).unwrap().token, token);
        let e = read(&path, now + Duration::from_secs(60)).err().unwrap();
        assert!(
            e.contains("expired") && !e.contains(super::super::RETRIED) && !e.contains(&token),
            "{e}"
        );
        std::fs::write(&path, jwt(r#"{"exp":1060}"#)).unwrap();
        assert!(read(&path, now).err().unwrap().contains("no sub claim"));
        std::fs::write(&path, "secret-not-a-jwt").unwrap();
        let e = read(&path, now).err().unwrap();
        assert!(
            e.contains("not a JWT") && !e.contains("secret-not-a-jwt"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
