//! AWS credentials for MSK IAM: the AWS SDK for Rust's default credential chain
//! (aws-config's `DefaultCredentialsChain`: environment `AWS_ACCESS_KEY_ID` /
//! `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN`, the shared config and credentials files'
//! profiles, web identity — `AWS_WEB_IDENTITY_TOKEN_FILE` + `AWS_ROLE_ARN`, what EKS service
//! accounts (IRSA) set — ECS/EKS container credentials, EC2 instance metadata), optionally
//! a named profile, optionally a role assumed with them (STS `AssumeRole`), as
//! aws-msk-iam-auth's `MSKCredentialProvider` does.
//!
//! Resolved credentials are kept until [`REFRESH_BEFORE`] ahead of their expiry (temporary
//! ones: web identity, roles, container and instance credentials), or for [`RECHECK_STATIC`]
//! when they do not expire (keys in the environment or a profile), so a token refresh does
//! not call STS or the metadata service each time.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use aws_config::default_provider::credentials::DefaultCredentialsChain;
use aws_config::sts::AssumeRoleProvider;
use aws_config::Region;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;

use crate::config::kafka_oauth::MskIam;

/// How long before their expiry cached temporary credentials are resolved again.
pub const REFRESH_BEFORE: Duration = Duration::from_secs(5 * 60);

/// How long credentials without an expiry are reused before the chain is asked again.
pub const RECHECK_STATIC: Duration = Duration::from_secs(15 * 60);

/// aws-msk-iam-auth's default session name of an assumed role.
pub const DEFAULT_SESSION_NAME: &str = "aws-msk-iam-auth";

/// The credential providers in use, each with its last credentials.
#[derive(Default)]
pub struct CredentialCache {
    providers: HashMap<String, Cached>,
}

/// One provider and what it last gave.
struct Cached {
    provider: SharedCredentialsProvider,
    last: Option<(Credentials, SystemTime)>,
}

/// Whether credentials resolved at `resolved_at` are still good to sign with at `now`.
pub fn still_fresh(credentials: &Credentials, resolved_at: SystemTime, now: SystemTime) -> bool {
    match credentials.expiry() {
        Some(expiry) => now + REFRESH_BEFORE < expiry,
        None => now < resolved_at + RECHECK_STATIC,
    }
}

impl CredentialCache {
    /// Credentials for `msk`'s profile and role, from the cache while fresh
    /// ([`still_fresh`]). `region` is the cluster's (the default STS region).
    pub async fn get(&mut self, msk: &MskIam, region: &str) -> Result<Credentials, String> {
        let key = format!(
            "{region}|{:?}|{:?}|{:?}|{:?}|{:?}",
            msk.profile, msk.role_arn, msk.role_session_name, msk.role_external_id, msk.sts_region
        );
        let now = SystemTime::now();
        if let Some(Cached {
            last: Some((c, at)),
            ..
        }) = self.providers.get(&key)
        {
            if still_fresh(c, *at, now) {
                return Ok(c.clone());
            }
        }
        if !self.providers.contains_key(&key) {
            let provider = provider(msk, region).await;
            self.providers.insert(
                key.clone(),
                Cached {
                    provider,
                    last: None,
                },
            );
        }
        let cached = self.providers.get_mut(&key).expect("inserted above");
        let credentials = cached
            .provider
            .provide_credentials()
            .await
            .map_err(|e| describe(msk, &e))?;
        cached.last = Some((credentials.clone(), now));
        Ok(credentials)
    }
}

/// The provider for `msk`: the default chain (with its profile), then the role assumed with
/// it.
pub async fn provider(msk: &MskIam, region: &str) -> SharedCredentialsProvider {
    let mut chain = DefaultCredentialsChain::builder().region(Region::new(region.to_string()));
    if let Some(profile) = &msk.profile {
        chain = chain.profile_name(profile);
    }
    let chain = chain.build().await;
    let Some(arn) = &msk.role_arn else {
        return SharedCredentialsProvider::new(chain);
    };
    let mut role = AssumeRoleProvider::builder(arn.clone())
        .session_name(
            msk.role_session_name
                .clone()
                .unwrap_or_else(|| DEFAULT_SESSION_NAME.to_string()),
        )
        .region(Region::new(
            msk.sts_region.clone().unwrap_or_else(|| region.to_string()),
        ));
    if let Some(id) = &msk.role_external_id {
        role = role.external_id(id.clone());
    }
    SharedCredentialsProvider::new(role.build_from_provider(chain).await)
}

/// Why no credentials were found, in words that say where outboxd looked (the SDK's error
/// chain: it names providers and files, never a key).
fn describe(msk: &MskIam, e: &aws_credential_types::provider::error::CredentialsError) -> String {
    let mut why = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        why.push_str(": ");
        why.push_str(&s.to_string());
        source = s.source();
    }
    let from = match (&msk.profile, &msk.role_arn) {
        (Some(p), Some(r)) => format!("AWS profile {p} (awsProfileName), assuming role {r} (awsRoleArn)"),
        (Some(p), None) => format!("AWS profile {p} (awsProfileName)"),
        (None, Some(r)) => format!("the AWS default credential chain, assuming role {r} (awsRoleArn)"),
        (None, None) => "the AWS default credential chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the shared config files, AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, container and instance credentials)".into(),
    };
    format!("no AWS credentials for MSK IAM from {from}: {why}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_reused_until_shortly_before_they_expire() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let temporary = Credentials::new("a", "s", None, Some(t0 + Duration::from_secs(3600)), "t");
        assert!(still_fresh(&temporary, t0, t0));
        assert!(still_fresh(
            &temporary,
            t0,
            t0 + Duration::from_secs(3600) - REFRESH_BEFORE - Duration::from_secs(1)
        ));
        assert!(!still_fresh(
            &temporary,
            t0,
            t0 + Duration::from_secs(3600) - REFRESH_BEFORE
        ));
        let fixed = Credentials::new("a", "s", None, None, "t");
        assert!(still_fresh(
            &fixed,
            t0,
            t0 + RECHECK_STATIC - Duration::from_secs(1)
        ));
        assert!(!still_fresh(&fixed, t0, t0 + RECHECK_STATIC));
    }
}
