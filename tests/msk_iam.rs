//! AWS MSK IAM tokens from the AWS default credential chain (issue 31), as the relay's Kafka
//! clients get them in their token refresh callback: credentials from the environment, and
//! web identity (what EKS service accounts set: `AWS_WEB_IDENTITY_TOKEN_FILE` +
//! `AWS_ROLE_ARN`) against a fake STS endpoint this test runs on loopback
//! (`AWS_ENDPOINT_URL_STS`); the token's lifetime (900 s, or less when the credentials
//! expire first), credentials reused until shortly before they expire and fetched again
//! then, and no credentials at all.
//!
//! The signature itself is checked against botocore's in the unit tests
//! (`src/sink/oauth/msk_iam.rs`). No MSK cluster can be reached from here: that the brokers
//! accept these tokens is AWS's documented procedure, not something these tests show.
//!
//! One test function: the scenarios set the process environment one after another, and the
//! instance metadata service is switched off (`AWS_EC2_METADATA_DISABLED`) so nothing leaves
//! the machine.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use base64::Engine;

/// The signed URL inside a token, and its query parameters.
fn decode(token: &str) -> (String, BTreeMap<String, String>) {
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .expect("base64url without padding");
    let url = String::from_utf8(url).unwrap();
    let params = url
        .split_once('?')
        .unwrap()
        .1
        .split('&')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    (url, params)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A fake STS: answers `AssumeRoleWithWebIdentity` with fixed keys that expire
/// `expires_in_s` after the request; counts requests and keeps the last form.
struct FakeSts {
    port: u16,
    requests: AtomicUsize,
    expires_in_s: AtomicI64,
    last_form: Mutex<String>,
}

impl FakeSts {
    fn start() -> Arc<FakeSts> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let sts = Arc::new(FakeSts {
            port: listener.local_addr().unwrap().port(),
            requests: AtomicUsize::new(0),
            expires_in_s: AtomicI64::new(600),
            last_form: Mutex::new(String::new()),
        });
        let served = sts.clone();
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                    let app = axum::Router::new().fallback(move |body: String| {
                        let sts = served.clone();
                        async move { sts.answer(body) }
                    });
                    axum::serve(listener, app).await.unwrap();
                })
        });
        sts
    }

    fn answer(&self, body: String) -> ([(&'static str, &'static str); 1], String) {
        self.requests.fetch_add(1, Ordering::SeqCst);
        *self.last_form.lock().unwrap() = body;
        let expires = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
            + self.expires_in_s.load(Ordering::SeqCst);
        let xml = format!(
            r#"<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:outbox:relay</SubjectFromWebIdentityToken>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::123456789012:assumed-role/outboxd/outboxd-test</Arn>
      <AssumedRoleId>AROAEXAMPLE:outboxd-test</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <AccessKeyId>ASIAWEBIDENTITY</AccessKeyId>
      <SecretAccessKey>webIdentitySecretKeyEXAMPLE</SecretAccessKey>
      <SessionToken>web-identity-session-token</SessionToken>
      <Expiration>{}</Expiration>
    </Credentials>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>00000000-0000-0000-0000-000000000000</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>"#,
            outboxd::value::utc_seconds(expires)
        );
        ([("content-type", "text/xml")], xml)
    }
}

/// Sets the AWS environment to exactly `vars` (every other AWS_* variable removed), with the
/// instance metadata service off and no config files.
fn aws_env(vars: &[(&str, &str)]) {
    for (k, _) in std::env::vars() {
        if k.starts_with("AWS_") {
            std::env::remove_var(&k);
        }
    }
    std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
    std::env::set_var("AWS_CONFIG_FILE", "/nonexistent/outboxd-test/config");
    std::env::set_var(
        "AWS_SHARED_CREDENTIALS_FILE",
        "/nonexistent/outboxd-test/credentials",
    );
    for (k, v) in vars {
        std::env::set_var(k, v);
    }
}

#[test]
fn msk_iam_tokens_from_the_default_credential_chain() {
    // 1. Keys in the environment.
    aws_env(&[
        ("AWS_ACCESS_KEY_ID", "AKIDENVIRONMENT"),
        ("AWS_SECRET_ACCESS_KEY", "environmentSecretKeyEXAMPLE"),
        ("AWS_SESSION_TOKEN", "environment-session-token"),
    ]);
    let before = now_ms();
    let (token, principal, expires_ms) =
        outboxd::oauth_token("source=aws-msk-iam region=eu-west-1").expect("a token");
    let (url, p) = decode(&token);
    assert!(
        url.starts_with("https://kafka.eu-west-1.amazonaws.com/?Action=kafka-cluster%3AConnect&"),
        "{url}"
    );
    assert!(
        p["X-Amz-Credential"].starts_with("AKIDENVIRONMENT%2F"),
        "{url}"
    );
    assert!(
        p["X-Amz-Credential"].ends_with("%2Feu-west-1%2Fkafka-cluster%2Faws4_request"),
        "{url}"
    );
    assert_eq!(p["X-Amz-Security-Token"], "environment-session-token");
    assert_eq!(p["X-Amz-Expires"], "900");
    assert_eq!(p["X-Amz-SignedHeaders"], "host");
    assert!(p["User-Agent"].starts_with("outboxd%2F"), "{url}");
    assert_eq!(principal, "aws-msk-iam");
    // Valid 900 s from its X-Amz-Date (whole seconds): librdkafka refreshes at 80 %.
    assert!(
        expires_ms >= before - 1000 + 900_000 && expires_ms <= now_ms() + 900_000,
        "expires {expires_ms}, signed at about {before}"
    );

    // 2. Web identity (EKS service accounts): the token file and role from the
    //    environment, STS answering on loopback with keys that expire in 10 minutes.
    let sts = FakeSts::start();
    let dir = std::env::temp_dir().join(format!("outboxd-msk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let web_token = dir.join("token");
    std::fs::write(&web_token, "eks-projected-service-account-token").unwrap();
    let endpoint = format!("http://127.0.0.1:{}", sts.port);
    aws_env(&[
        ("AWS_WEB_IDENTITY_TOKEN_FILE", web_token.to_str().unwrap()),
        ("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/outboxd"),
        ("AWS_ROLE_SESSION_NAME", "outboxd-test"),
        ("AWS_ENDPOINT_URL_STS", &endpoint),
        ("AWS_REGION", "us-east-2"),
    ]);
    let before = now_ms();
    let (token, _, expires_ms) =
        outboxd::oauth_token("source=aws-msk-iam region=us-east-2").expect("a web identity token");
    let (url, p) = decode(&token);
    assert!(
        url.starts_with("https://kafka.us-east-2.amazonaws.com/"),
        "{url}"
    );
    assert!(
        p["X-Amz-Credential"].starts_with("ASIAWEBIDENTITY%2F"),
        "{url}"
    );
    assert_eq!(p["X-Amz-Security-Token"], "web-identity-session-token");
    assert_eq!(sts.requests.load(Ordering::SeqCst), 1);
    let form = sts.last_form.lock().unwrap().clone();
    for part in [
        "Action=AssumeRoleWithWebIdentity",
        "RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Foutboxd",
        "RoleSessionName=outboxd-test",
        "WebIdentityToken=eks-projected-service-account-token",
    ] {
        assert!(form.contains(part), "{part:?} in the STS request {form}");
    }
    // The keys expire in 600 s: the token with them (not 900 s).
    assert!(
        (before + 590_000..=now_ms() + 601_000).contains(&expires_ms),
        "a token ends with its credentials: {expires_ms} vs {before}"
    );
    // A refresh reuses the keys while they are good for more than 5 minutes...
    outboxd::oauth_token("source=aws-msk-iam region=us-east-2").unwrap();
    assert_eq!(sts.requests.load(Ordering::SeqCst), 1, "cached credentials");
    // ...and asks STS again once they are within 5 minutes of expiring.
    // (Another cluster region: a provider of its own, whose keys expire in 200 s.)
    sts.expires_in_s.store(200, Ordering::SeqCst);
    outboxd::oauth_token("source=aws-msk-iam region=ca-central-1").unwrap();
    assert_eq!(sts.requests.load(Ordering::SeqCst), 2);
    outboxd::oauth_token("source=aws-msk-iam region=ca-central-1").unwrap();
    assert_eq!(
        sts.requests.load(Ordering::SeqCst),
        3,
        "credentials within 5 minutes of their expiry are fetched again"
    );

    // 3. No credentials anywhere: an error that says where outboxd looked, no secret, and
    //    marked as retried (credentials may appear: a pod's token file, a role).
    aws_env(&[]);
    let e = outboxd::oauth_token("source=aws-msk-iam region=ap-south-1").unwrap_err();
    assert!(
        e.contains("no AWS credentials for MSK IAM from the AWS default credential chain"),
        "{e}"
    );
    assert!(e.ends_with("(outboxd retries)"), "{e}");
    for secret in ["environmentSecretKeyEXAMPLE", "webIdentitySecretKeyEXAMPLE"] {
        assert!(!e.contains(secret), "{e}");
    }
    // The region must be known.
    let e = outboxd::oauth_token("source=aws-msk-iam").unwrap_err();
    assert!(e.contains("awsRegion"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
