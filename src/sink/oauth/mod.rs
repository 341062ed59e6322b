//! OAUTHBEARER tokens outboxd makes itself, for librdkafka's token refresh callback.
//!
//! With `sasl.oauthbearer.method=oidc` librdkafka fetches and refreshes tokens itself (its
//! background thread, for every client, idle or not); nothing here takes part. With the
//! `default` method it asks the application for a token when a client starts and again at
//! 80 % of the token's lifetime (or 10 s after a failure): rdkafka turns that into
//! [`ClientContext::generate_oauth_token`](rdkafka::ClientContext::generate_oauth_token),
//! which every client context of outboxd answers with [`generate`], from the client's
//! `sasl.oauthbearer.config` ([`TokenSource`]): AWS MSK IAM's signed token, or a token file.
//!
//! The callback runs on whichever thread polls the client — a tokio worker among them — and
//! must return the token, while AWS credentials are resolved asynchronously (STS, the
//! metadata services). So tokens are made on one thread of their own with its own
//! runtime ([`TokenService`]); the callback hands it the request and waits for the answer
//! up to [`TOKEN_TIMEOUT`]. A failure names the setting to look at and never holds a
//! secret; one that a later attempt may cure (credentials not reachable right now) ends in
//! [`RETRIED`], which [`KafkaLink`](super::KafkaLink) reads as transient.

pub mod aws_credentials;
pub mod msk_iam;
mod token_file;

use std::error::Error;
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use rdkafka::client::OAuthToken;

use crate::config::kafka_oauth::{MskIam, TokenSource};

/// How long a client waits for a token (credentials from STS or a metadata service
/// included) before its refresh counts as failed (librdkafka tries again 10 s later).
pub const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);

/// The end of a token failure a later attempt may cure: librdkafka asks again 10 s after a
/// failure (rdkafka_sasl_oauthbearer.c), and the link does not stop the connector for it.
pub const RETRIED: &str = "(outboxd retries)";

/// The principal name librdkafka keeps with an MSK token (client-side only: MSK takes the
/// principal from the signature).
const MSK_PRINCIPAL: &str = "aws-msk-iam";

/// A token for the client whose `sasl.oauthbearer.config` is `config`: what every client
/// context's `generate_oauth_token` returns.
pub fn generate(config: Option<&str>) -> Result<OAuthToken, Box<dyn Error>> {
    let source = match config.and_then(TokenSource::parse) {
        Some(Ok(source)) => source,
        Some(Err(why)) => return Err(why.into()),
        None => return Err("sasl.mechanism=OAUTHBEARER needs a token source: set sasl.oauthbearer.token.endpoint.url with OIDC client credentials (sasl.oauthbearer.method=oidc), a token file (sasl.oauthbearer.token.endpoint.url=file:...) or AWS MSK IAM".into()),
    };
    match source {
        TokenSource::File { path } => {
            token_file::read(std::path::Path::new(&path), SystemTime::now()).map_err(Into::into)
        }
        TokenSource::MskIam(msk) => service().request(msk).map_err(Into::into),
    }
}

/// A request to the token thread, with where to answer.
struct Request {
    msk: MskIam,
    reply: mpsc::SyncSender<Result<OAuthToken, String>>,
}

/// The thread that makes MSK IAM tokens (see the module docs).
struct TokenService {
    requests: Mutex<mpsc::Sender<Request>>,
}

/// The process's token thread, started on first use.
fn service() -> &'static TokenService {
    static SERVICE: OnceLock<TokenService> = OnceLock::new();
    SERVICE.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("outboxd-oauth".into())
            .spawn(move || serve(rx))
            .expect("a thread for OAUTHBEARER tokens");
        TokenService {
            requests: Mutex::new(tx),
        }
    })
}

impl TokenService {
    /// An MSK token, made on the token thread; waits up to [`TOKEN_TIMEOUT`].
    fn request(&self, msk: MskIam) -> Result<OAuthToken, String> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(Request { msk, reply })
            .map_err(|_| "the OAUTHBEARER token thread is gone".to_string())?;
        answer.recv_timeout(TOKEN_TIMEOUT).map_err(|_| {
            format!(
                "no MSK IAM token within {}s (AWS credentials not reachable?) {RETRIED}",
                TOKEN_TIMEOUT.as_secs()
            )
        })?
    }
}

/// The token thread: one request after another on a runtime of its own, credentials cached.
fn serve(requests: mpsc::Receiver<Request>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            for r in requests {
                let _ = r.reply.send(Err(format!(
                    "cannot start the OAUTHBEARER token runtime: {e}"
                )));
            }
            return;
        }
    };
    let mut cache = aws_credentials::CredentialCache::default();
    for r in requests {
        let answer = runtime.block_on(msk_token(&mut cache, &r.msk));
        let _ = r.reply.send(answer);
    }
}

/// An MSK IAM token for `msk`: its region, credentials from the cache or the chain, signed
/// now.
async fn msk_token(
    cache: &mut aws_credentials::CredentialCache,
    msk: &MskIam,
) -> Result<OAuthToken, String> {
    let region = match &msk.region {
        Some(r) => r.clone(),
        None => region_from_chain(msk).await?,
    };
    let credentials = tokio::time::timeout(TOKEN_TIMEOUT, cache.get(msk, &region))
        .await
        .map_err(|_| {
            format!(
                "AWS credentials for MSK IAM did not arrive within {}s {RETRIED}",
                TOKEN_TIMEOUT.as_secs()
            )
        })?
        .map_err(|why| format!("{why} {RETRIED}"))?;
    let signed = msk_iam::token(
        &region,
        &credentials,
        SystemTime::now(),
        &msk_iam::user_agent(),
    )?;
    Ok(OAuthToken {
        token: signed.token,
        principal_name: MSK_PRINCIPAL.to_string(),
        lifetime_ms: millis_since_epoch(signed.expires_at),
    })
}

/// The AWS region chain (`AWS_REGION`, the profile's `region`, instance metadata) for a
/// cluster whose host names do not say it.
async fn region_from_chain(msk: &MskIam) -> Result<String, String> {
    let mut chain = aws_config::default_provider::region::DefaultRegionChain::builder();
    if let Some(p) = &msk.profile {
        chain = chain.profile_name(p);
    }
    chain
        .build()
        .region()
        .await
        .map(|r| r.to_string())
        .ok_or_else(|| {
            "AWS MSK IAM needs the cluster's region: the bootstrap servers are not MSK host names (*.kafka.<region>.amazonaws.com), and AWS_REGION and the profile's region are not set; set awsRegion=\"<region>\" in sasl.jaas.config".to_string()
        })
}

/// `at` in milliseconds since the Unix epoch (librdkafka's token lifetime).
pub(crate) fn millis_since_epoch(at: SystemTime) -> i64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `sasl.oauthbearer.config` of `props` with the MSK region filled in from `bootstrap`
/// when the settings name none and the bootstrap host names say it (`None`: nothing to
/// change).
pub fn with_region_from(bootstrap: &str, config: &str) -> Option<String> {
    let Some(Ok(TokenSource::MskIam(mut msk))) = TokenSource::parse(config) else {
        return None;
    };
    if msk.region.is_some() {
        return None;
    }
    msk.region = bootstrap
        .split(',')
        .find_map(crate::config::kafka_oauth::msk_region_of);
    msk.region.as_ref()?;
    Some(TokenSource::MskIam(msk).to_config())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_comes_from_msk_host_names() {
        let config = "source=aws-msk-iam profile=p";
        assert_eq!(
            with_region_from(
                "b-1.c.x.c2.kafka.eu-central-1.amazonaws.com:9098,b-2.c.x.c2.kafka.eu-central-1.amazonaws.com:9098",
                config
            )
            .as_deref(),
            Some("source=aws-msk-iam region=eu-central-1 profile=p")
        );
        assert_eq!(with_region_from("localhost:9092", config), None);
        assert_eq!(
            with_region_from(
                "b-1.kafka.us-east-1.amazonaws.com:9098",
                "source=aws-msk-iam region=eu-west-1"
            ),
            None,
            "a configured region wins"
        );
        assert_eq!(
            with_region_from("b-1.kafka.us-east-1.amazonaws.com:9098", "principal=x"),
            None
        );
    }

    #[test]
    fn a_client_without_a_token_source_is_told_what_to_set() {
        let e = generate(None).err().unwrap().to_string();
        assert!(e.contains("sasl.oauthbearer.token.endpoint.url"), "{e}");
        let e = generate(Some("source=file")).err().unwrap().to_string();
        assert!(e.contains("path"), "{e}");
    }
}
