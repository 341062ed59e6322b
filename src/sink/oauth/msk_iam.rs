//! AWS MSK IAM's OAUTHBEARER token: a SigV4-presigned `GET` of
//! `https://kafka.<region>.amazonaws.com/?Action=kafka-cluster:Connect`, valid 900 s,
//! base64url-encoded without padding.
//!
//! This is what AWS's signers for non-Java clients make (aws-msk-iam-sasl-signer-python's
//! `generate_auth_token`, the Go and JavaScript ones) and what aws-msk-iam-auth's
//! `IAMOAuthBearerLoginCallbackHandler` makes for Java clients: service `kafka-cluster`,
//! signed header `host` only, the SHA-256 of the empty payload, the session token among the
//! signed query parameters (`X-Amz-Security-Token`), then a `User-Agent` parameter added
//! after signing (the signers' own name; outboxd's here). MSK's brokers verify the signature
//! and the `kafka-cluster:Connect` permission of the signing principal. The token expires
//! [`TOKEN_LIFETIME`] after its `X-Amz-Date`, or when the signing credentials do, whichever
//! comes first; librdkafka asks for a new one at 80 % of that (its OAUTHBEARER refresh).

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
};
use aws_sigv4::sign::v4;
use base64::Engine;

/// How long a presigned token is valid (`X-Amz-Expires`), as AWS's signers set it.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(900);

/// The SigV4 service name MSK's IAM access control signs for.
const SIGNING_NAME: &str = "kafka-cluster";

/// The action the token asks for (`Action=kafka-cluster:Connect`).
const ACTION: &str = "kafka-cluster:Connect";

/// A signed MSK IAM token.
#[derive(Clone, PartialEq, Eq)]
pub struct SignedToken {
    /// The base64url-encoded presigned URL (a secret while it is valid: never logged).
    pub token: String,
    /// When it stops being valid.
    pub expires_at: SystemTime,
}

impl std::fmt::Debug for SignedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedToken")
            .field("token", &"***")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// The host a token for `region` is signed for: `kafka.<region>.amazonaws.com`.
pub fn signing_host(region: &str) -> String {
    format!("kafka.{region}.amazonaws.com")
}

/// The presigned URL (not yet encoded) for `region`, signed with `credentials` at `now`
/// (`X-Amz-Date`, whole seconds), with `user_agent` as its `User-Agent` parameter. Errors
/// name what failed, never a key.
pub fn presigned_url(
    region: &str,
    credentials: &Credentials,
    now: SystemTime,
    user_agent: &str,
) -> Result<String, String> {
    let base = format!("https://{}/", signing_host(region));
    let unsigned = format!("{base}?Action={}", uri_encode(ACTION));
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(TOKEN_LIFETIME);
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SIGNING_NAME)
        .time(now)
        .settings(settings)
        .build()
        .map_err(|e| format!("SigV4 signing parameters: {e}"))?;
    let request = SignableRequest::new(
        "GET",
        unsigned.as_str(),
        std::iter::empty(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| format!("SigV4 request for {base}: {e}"))?;
    let (instructions, _signature) = sign(request, &params.into())
        .map_err(|e| format!("SigV4 signing failed: {e}"))?
        .into_parts();
    let mut url = unsigned;
    for (name, value) in instructions.params() {
        url.push('&');
        url.push_str(&uri_encode(name));
        url.push('=');
        url.push_str(&uri_encode(value));
    }
    url.push_str("&User-Agent=");
    url.push_str(&uri_encode(user_agent));
    Ok(url)
}

/// MSK's token for `region` from `credentials` at `now`: [`presigned_url`], base64url
/// without padding. It expires [`TOKEN_LIFETIME`] after `now` (whole seconds), or at the
/// credentials' own expiry if that is sooner.
pub fn token(
    region: &str,
    credentials: &Credentials,
    now: SystemTime,
    user_agent: &str,
) -> Result<SignedToken, String> {
    let url = presigned_url(region, credentials, now, user_agent)?;
    let signed_at = SystemTime::UNIX_EPOCH
        + Duration::from_secs(
            now.duration_since(SystemTime::UNIX_EPOCH)
                .map_err(|_| "the clock is before 1970".to_string())?
                .as_secs(),
        );
    let mut expires_at = signed_at + TOKEN_LIFETIME;
    if let Some(expiry) = credentials.expiry() {
        expires_at = expires_at.min(expiry);
    }
    Ok(SignedToken {
        token: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(url.as_bytes()),
        expires_at,
    })
}

/// outboxd's `User-Agent` parameter: `outboxd/<version>`.
pub fn user_agent() -> String {
    format!("outboxd/{}", env!("CARGO_PKG_VERSION"))
}

/// AWS's URI encoding (SigV4 "UriEncode"): every byte but `A-Z a-z 0-9 - _ . ~` as `%XX`.
fn uri_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AWS's documented example credentials (the SigV4 test suite's), a fixed time.
    fn fixed() -> (Credentials, SystemTime) {
        let creds = Credentials::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            Some("FQoGZXIvYXdzEXAMPLE/session+token==".to_string()),
            None,
            "test",
        );
        // 2024-05-01T12:34:56Z
        (
            creds,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_714_566_896),
        )
    }

    /// The signature botocore's `SigV4QueryAuth` computes for the same request (what
    /// aws-msk-iam-sasl-signer-python signs with): credentials and time of [`fixed`],
    /// region us-west-2, computed with botocore 1.43.11 by `tests/reference/msk_iam_presign.py`.
    const REFERENCE_URL: &str = "https://kafka.us-west-2.amazonaws.com/?Action=kafka-cluster%3AConnect&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20240501%2Fus-west-2%2Fkafka-cluster%2Faws4_request&X-Amz-Date=20240501T123456Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host&X-Amz-Security-Token=FQoGZXIvYXdzEXAMPLE%2Fsession%2Btoken%3D%3D&X-Amz-Signature=d8d7f3f3c307bba213dc91c37492708c83489e3a3ccc1e2a5eccd72e4fbd3af8";

    #[test]
    fn the_presigned_url_matches_the_reference_signer() {
        let (creds, now) = fixed();
        let url = presigned_url("us-west-2", &creds, now, "outboxd/test").unwrap();
        let (signed, agent) = url.rsplit_once("&User-Agent=").unwrap();
        assert_eq!(agent, "outboxd%2Ftest");
        let params = |u: &str| -> std::collections::BTreeMap<String, String> {
            u.split_once('?')
                .unwrap()
                .1
                .split('&')
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    (k.to_string(), v.to_string())
                })
                .collect()
        };
        assert!(signed.starts_with("https://kafka.us-west-2.amazonaws.com/?"));
        assert_eq!(params(signed), params(REFERENCE_URL));
    }

    #[test]
    fn the_token_is_base64url_and_expires_with_the_signature_or_the_credentials() {
        let (creds, now) = fixed();
        let t = token("us-west-2", &creds, now, "outboxd/test").unwrap();
        assert!(!t.token.contains('=') && !t.token.contains('+') && !t.token.contains('/'));
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&t.token)
            .unwrap();
        let url = String::from_utf8(url).unwrap();
        assert_eq!(
            url,
            presigned_url("us-west-2", &creds, now, "outboxd/test").unwrap()
        );
        assert_eq!(t.expires_at, now + TOKEN_LIFETIME);
        // Sub-second signing times: X-Amz-Date is whole seconds, so is the expiry.
        let t = token("us-west-2", &creds, now + Duration::from_millis(700), "x").unwrap();
        assert_eq!(t.expires_at, now + TOKEN_LIFETIME);
        // Credentials that expire first bound the token.
        let short = Credentials::new(
            "AKIDEXAMPLE",
            "secret",
            None,
            Some(now + Duration::from_secs(300)),
            "test",
        );
        let t = token("us-west-2", &short, now, "x").unwrap();
        assert_eq!(t.expires_at, now + Duration::from_secs(300));
        assert!(!format!("{t:?}").contains(&t.token));
    }

    #[test]
    fn uri_encoding_is_aws_s() {
        assert_eq!(uri_encode("a-b_c.d~e"), "a-b_c.d~e");
        assert_eq!(uri_encode("a/b+c=d:e f"), "a%2Fb%2Bc%3Dd%3Ae%20f");
    }
}
