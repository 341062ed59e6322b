//! SASL OAUTHBEARER client settings — OIDC client credentials, the OIDC JWT bearer grant, a
//! token file, and AWS MSK IAM — translated from Kafka's Java names to librdkafka's.
//!
//! # OIDC (librdkafka's built-in token retrieval)
//!
//! Kafka's Java client (KIP-768; Kafka 4.1's `sasl.oauthbearer.jwt.retriever.class`,
//! KIP-1139) and librdkafka (`sasl.oauthbearer.method=oidc`, CONFIGURATION.md) ask an
//! OAuth/OIDC token endpoint for a JWT and refresh it before it expires:
//!
//! | Java | librdkafka |
//! |---|---|
//! | `sasl.mechanism=OAUTHBEARER` | `sasl.mechanisms=OAUTHBEARER`, `sasl.oauthbearer.method=oidc` |
//! | `sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler` (or `...oauthbearer.secured.` before Kafka 3.4) | (the built-in handler) |
//! | `sasl.oauthbearer.token.endpoint.url` (`http(s):`) | the same |
//! | `sasl.jaas.config=...OAuthBearerLoginModule required clientId=".." clientSecret=".." scope=".." extension_<name>="..";` | `sasl.oauthbearer.client.id`, `.client.secret`, `.scope`, `.extensions` (`name=value,...`) |
//! | `sasl.oauthbearer.client.credentials.client.id` / `.client.secret`, `sasl.oauthbearer.scope` (Kafka 4.1) | `sasl.oauthbearer.client.id` / `.client.secret`, `.scope` |
//! | `sasl.oauthbearer.jwt.retriever.class=...JwtBearerJwtRetriever` + `sasl.oauthbearer.assertion.*` | `sasl.oauthbearer.grant.type=urn:ietf:params:oauth:grant-type:jwt-bearer` + `sasl.oauthbearer.assertion.*` (`.template.file`: `.jwt.template.file`) |
//!
//! # Tokens outboxd makes itself
//!
//! librdkafka asks the application for a token through its refresh callback
//! (`oauthbearer_token_refresh_cb`, rdkafka's `ClientContext::generate_oauth_token`) when
//! `sasl.oauthbearer.method` is `default`. outboxd answers it for two sources, described to
//! the callback in `sasl.oauthbearer.config` ([`TokenSource`]):
//!
//! - **a token file** — Kafka's `sasl.oauthbearer.token.endpoint.url=file:/path`
//!   (`FileJwtRetriever`): a JWT another process keeps current, read again at each refresh;
//! - **AWS MSK IAM** — `sasl.mechanism=AWS_MSK_IAM` with `software.amazon.msk.auth.iam.IAMLoginModule`,
//!   or `OAUTHBEARER` with `software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler`
//!   (aws-msk-iam-auth's two forms): MSK's signed token from the AWS default credential chain.
//!   MSK's IAM listeners take both mechanisms; librdkafka speaks OAUTHBEARER.

use std::collections::BTreeMap;

use super::kafka::{parse_jaas_entry, JaasEntry, Translated};
use super::KeyError;

/// Kafka's OIDC login callback handler (3.4 and later).
pub const OIDC_HANDLER: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler";
/// Kafka's OIDC login callback handler before 3.4 (KIP-768's first home).
pub const OIDC_HANDLER_SECURED: &str =
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler";
/// Kafka's development-only handler of unsigned tokens (the default without a handler class).
const UNSECURED_HANDLER: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerUnsecuredLoginCallbackHandler";
/// aws-msk-iam-auth's OAUTHBEARER login callback handler.
pub const MSK_OAUTH_HANDLER: &str =
    "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler";
/// aws-msk-iam-auth's login module (mechanism `AWS_MSK_IAM`).
pub const MSK_LOGIN_MODULE: &str = "software.amazon.msk.auth.iam.IAMLoginModule";
/// Kafka's OAUTHBEARER login module.
pub const OAUTH_LOGIN_MODULE: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";
/// aws-msk-iam-auth's SASL client callback handlers, which the two forms name.
const MSK_CLIENT_HANDLERS: [&str; 2] = [
    "software.amazon.msk.auth.iam.IAMClientCallbackHandler",
    "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler",
];

/// Kafka 4.1's JWT retrievers (`sasl.oauthbearer.jwt.retriever.class`).
const RETRIEVER_PREFIX: &str = "org.apache.kafka.common.security.oauthbearer.";

/// librdkafka's `sasl.oauthbearer.grant.type` of the JWT bearer grant (RFC 7523 §2.1).
pub const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// Kafka 4.1 JWT bearer settings whose librdkafka names are the same.
const ASSERTION_KEYS: [&str; 10] = [
    "sasl.oauthbearer.assertion.algorithm",
    "sasl.oauthbearer.assertion.claim.aud",
    "sasl.oauthbearer.assertion.claim.exp.seconds",
    "sasl.oauthbearer.assertion.claim.iss",
    "sasl.oauthbearer.assertion.claim.jti.include",
    "sasl.oauthbearer.assertion.claim.nbf.seconds",
    "sasl.oauthbearer.assertion.claim.sub",
    "sasl.oauthbearer.assertion.file",
    "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.private.key.passphrase",
];

/// Settings of the brokers' token validation, which a client does not use.
const VALIDATOR_KEYS: [&str; 9] = [
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.jwt.validator.class",
    "sasl.oauthbearer.scope.claim.name",
];

/// aws-msk-iam-auth's JAAS options outboxd uses (MSKCredentialProvider), plus `awsRegion`.
const MSK_OPTIONS: [&str; 6] = [
    "awsProfileName",
    "awsRoleArn",
    "awsRoleSessionName",
    "awsRoleExternalId",
    "awsStsRegion",
    "awsRegion",
];

/// aws-msk-iam-auth's JAAS options with nothing to do here (the AWS SDK's own retries and
/// logging stand in for them).
const MSK_IGNORED_OPTIONS: [&str; 3] = ["awsDebugCreds", "awsMaxRetries", "awsMaxBackOffTimeMs"];

/// Where outboxd's own OAUTHBEARER tokens come from: what the client's
/// `sasl.oauthbearer.config` says, read back by the token refresh callback.
///
/// The text form is `source=<kind> name=value ...`: space-separated pairs, values
/// percent-encoded (`%20`, `%25`, `%3D`), e.g. `source=aws-msk-iam region=eu-west-1
/// profile=kafka`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// A serialized JWT in a file, read again at each refresh (Kafka's `FileJwtRetriever`).
    File {
        /// The file.
        path: String,
    },
    /// AWS MSK IAM: a SigV4-presigned `kafka-cluster:Connect` request as the token.
    MskIam(MskIam),
}

/// The AWS settings of an MSK IAM login (aws-msk-iam-auth's JAAS options).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MskIam {
    /// The cluster's region (`awsRegion`; else from the bootstrap host names
    /// `*.kafka.<region>.amazonaws.com`, `*.kafka-serverless.<region>.amazonaws.com`; else
    /// the AWS region chain: `AWS_REGION`, the profile's `region`).
    pub region: Option<String>,
    /// A named profile of the AWS config files (`awsProfileName`).
    pub profile: Option<String>,
    /// A role to assume with the credentials found (`awsRoleArn`).
    pub role_arn: Option<String>,
    /// The assumed role's session name (`awsRoleSessionName`, default `aws-msk-iam-auth`).
    pub role_session_name: Option<String>,
    /// The assumed role's external id (`awsRoleExternalId`).
    pub role_external_id: Option<String>,
    /// The STS region for assuming the role (`awsStsRegion`).
    pub sts_region: Option<String>,
}

/// The value of `source=` for each kind.
const FILE: &str = "file";
const MSK_IAM: &str = "aws-msk-iam";

impl TokenSource {
    /// The `sasl.oauthbearer.config` text.
    pub fn to_config(&self) -> String {
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        match self {
            TokenSource::File { path } => {
                pairs.push(("source", FILE));
                pairs.push(("path", path));
            }
            TokenSource::MskIam(m) => {
                pairs.push(("source", MSK_IAM));
                let opt = [
                    ("region", &m.region),
                    ("profile", &m.profile),
                    ("role.arn", &m.role_arn),
                    ("role.session.name", &m.role_session_name),
                    ("role.external.id", &m.role_external_id),
                    ("sts.region", &m.sts_region),
                ];
                for (k, v) in opt {
                    if let Some(v) = v {
                        pairs.push((k, v));
                    }
                }
            }
        }
        pairs
            .iter()
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Reads [`to_config`](Self::to_config)'s text back; `None` when it is not outboxd's
    /// (no `source=` pair: another use of `sasl.oauthbearer.config`).
    pub fn parse(text: &str) -> Option<Result<Self, String>> {
        let mut pairs: BTreeMap<&str, String> = BTreeMap::new();
        for word in text.split_whitespace() {
            let (k, v) = word.split_once('=')?;
            pairs.insert(k, decode(v));
        }
        let source = pairs.remove("source")?;
        let mut take = |k: &str| pairs.remove(k);
        Some(match source.as_str() {
            FILE => match take("path") {
                Some(path) => Ok(TokenSource::File { path }),
                None => Err("sasl.oauthbearer.config: source=file needs path=".into()),
            },
            MSK_IAM => Ok(TokenSource::MskIam(MskIam {
                region: take("region"),
                profile: take("profile"),
                role_arn: take("role.arn"),
                role_session_name: take("role.session.name"),
                role_external_id: take("role.external.id"),
                sts_region: take("sts.region"),
            })),
            other => Err(format!(
                "sasl.oauthbearer.config: source={other} is not one outboxd knows (file, aws-msk-iam)"
            )),
        })
    }

    /// In words for `check` (never a secret: a file's path, AWS names).
    pub fn describe(&self) -> String {
        match self {
            TokenSource::File { path } => format!("token file {path}"),
            TokenSource::MskIam(m) => {
                let region = m
                    .region
                    .as_deref()
                    .map_or("region from the AWS region chain".to_string(), |r| {
                        format!("region {r}")
                    });
                let mut creds = match &m.profile {
                    Some(p) => format!("AWS profile {p}"),
                    None => "the AWS default credential chain".to_string(),
                };
                if let Some(arn) = &m.role_arn {
                    creds.push_str(&format!(", assuming role {arn}"));
                }
                format!("AWS MSK IAM, {region}, credentials from {creds}")
            }
        }
    }
}

/// Percent-encodes what would break the space-separated pairs.
fn encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '%' => out.push_str("%25"),
            '=' => out.push_str("%3D"),
            c if c.is_whitespace() => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// Reverses [`encode`] (any `%XX`).
fn decode(v: &str) -> String {
    percent_encoding::percent_decode_str(v)
        .decode_utf8_lossy()
        .into_owned()
}

/// The region of an MSK bootstrap host name: `b-1.<cluster>.<id>.c2.kafka.<region>.amazonaws.com`
/// (provisioned) or `boot-<id>.c1.kafka-serverless.<region>.amazonaws.com` (serverless).
pub fn msk_region_of(host: &str) -> Option<String> {
    let host = host.trim().to_ascii_lowercase();
    let host = host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h);
    let labels: Vec<&str> = host.split('.').collect();
    let at = labels
        .iter()
        .position(|l| *l == "kafka" || *l == "kafka-serverless")?;
    let region = labels.get(at + 1)?;
    let amazon = labels.get(at + 2)?;
    let valid = !region.is_empty()
        && region
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && region.contains('-');
    (valid && *amazon == "amazonaws").then(|| region.to_string())
}

/// Translates the OAUTHBEARER / AWS_MSK_IAM settings of one scope (`mechanism_key` is the
/// key that named the mechanism, `mechanism` its upper-cased value; `jaas` the
/// `sasl.jaas.config` text), taking the keys it uses out of `keys`.
pub(crate) fn translate(
    mechanism_key: &str,
    mechanism: &str,
    jaas: Option<String>,
    keys: &mut BTreeMap<String, String>,
    out: &mut Translated,
) -> Result<(), KeyError> {
    let err = |k: &str, m: String| (k.to_string(), m);
    let jaas = jaas
        .map(|text| parse_jaas_entry(&text))
        .transpose()
        .map_err(|m| err("sasl.jaas.config", m))?;
    let handler = keys.remove("sasl.login.callback.handler.class");
    let client_handler = keys.remove("sasl.client.callback.handler.class");
    for k in VALIDATOR_KEYS {
        if keys.remove(k).is_some() {
            out.ignored.push((
                k.to_string(),
                "a setting of the brokers' token validation; clients do not use it".into(),
            ));
        }
    }
    out.props.set("sasl.mechanisms", "OAUTHBEARER");

    let msk =
        mechanism == "AWS_MSK_IAM" || handler.as_deref().map(str::trim) == Some(MSK_OAUTH_HANDLER);
    if msk {
        if let Some(h) = client_handler.filter(|h| !MSK_CLIENT_HANDLERS.contains(&h.trim())) {
            out.ignored.push((
                "sasl.client.callback.handler.class".into(),
                format!("{h} is a Java class; outboxd makes MSK's token itself"),
            ));
        }
        let source = msk_iam(mechanism_key, mechanism, jaas, out)?;
        out.props.set(
            "sasl.oauthbearer.config",
            TokenSource::MskIam(source).to_config(),
        );
        return Ok(());
    }
    if let Some(h) = client_handler {
        out.ignored.push((
            "sasl.client.callback.handler.class".into(),
            format!("{h} is a Java class; librdkafka authenticates itself"),
        ));
    }
    if let Some(h) = &handler {
        let h = h.trim();
        if h == UNSECURED_HANDLER {
            return Err(err("sasl.login.callback.handler.class", unsecured()));
        }
        if h != OIDC_HANDLER && h != OIDC_HANDLER_SECURED {
            return Err(err(
                "sasl.login.callback.handler.class",
                format!("{h} is a Java class outboxd cannot run; it reads {OIDC_HANDLER} (OIDC: sasl.oauthbearer.token.endpoint.url) and {MSK_OAUTH_HANDLER} (AWS MSK IAM)"),
            ));
        }
    }
    // librdkafka's own names, given as they are.
    if let Some(method) = keys.remove("sasl.oauthbearer.method") {
        let method = method.trim().to_ascii_lowercase();
        if method != "oidc" {
            return Err(err(
                "sasl.oauthbearer.method",
                format!("{method:?}: librdkafka's `default` method needs a token from the application, which outboxd makes only for AWS MSK IAM (sasl.mechanism=AWS_MSK_IAM) and a token file (sasl.oauthbearer.token.endpoint.url=file:...); use oidc"),
            ));
        }
    }
    let endpoint = keys.remove("sasl.oauthbearer.token.endpoint.url");
    let retriever = keys
        .remove("sasl.oauthbearer.jwt.retriever.class")
        .map(|r| r.trim().to_string());
    let retriever_name = retriever
        .as_deref()
        .map(|r| r.strip_prefix(RETRIEVER_PREFIX).unwrap_or(r).to_string());
    let mut jaas_options = match jaas {
        None => BTreeMap::new(),
        Some(entry) => oauth_login_module(entry)?,
    };
    if let Some(path) = endpoint
        .as_deref()
        .map(str::trim)
        .and_then(|u| u.strip_prefix("file:"))
    {
        if !matches!(
            retriever_name.as_deref(),
            None | Some("DefaultJwtRetriever" | "FileJwtRetriever")
        ) {
            return Err(err(
                "sasl.oauthbearer.jwt.retriever.class",
                format!(
                    "{} does not read a token file; remove it or use FileJwtRetriever",
                    retriever.unwrap_or_default()
                ),
            ));
        }
        let path = path.trim_start_matches("//");
        out.props.set(
            "sasl.oauthbearer.config",
            TokenSource::File {
                path: path.to_string(),
            }
            .to_config(),
        );
        for (k, _) in jaas_options {
            out.ignored.push((
                format!("sasl.jaas.config option {k}"),
                "not used with a token file".into(),
            ));
        }
        return Ok(());
    }
    let Some(endpoint) = endpoint else {
        return Err(err(
            "sasl.oauthbearer.token.endpoint.url",
            format!("sasl.mechanism=OAUTHBEARER needs a token: set sasl.oauthbearer.token.endpoint.url (the OAuth/OIDC provider's token endpoint, https://..., with sasl.login.callback.handler.class={OIDC_HANDLER}; or file:/path of a token another process keeps current), or use AWS MSK IAM (sasl.login.callback.handler.class={MSK_OAUTH_HANDLER}). {}", unsecured())
        ));
    };
    if !(endpoint.starts_with("https://") || endpoint.starts_with("http://")) {
        return Err(err(
            "sasl.oauthbearer.token.endpoint.url",
            format!("{endpoint:?} is not an http(s):// or file: URL"),
        ));
    }
    out.props.set("sasl.oauthbearer.method", "oidc");
    out.props
        .set("sasl.oauthbearer.token.endpoint.url", endpoint.trim());

    let jwt_bearer = match retriever_name.as_deref() {
        None | Some("DefaultJwtRetriever" | "ClientCredentialsJwtRetriever") => false,
        Some("JwtBearerJwtRetriever") => true,
        Some("FileJwtRetriever") => {
            return Err(err(
                "sasl.oauthbearer.jwt.retriever.class",
                "FileJwtRetriever reads a token file: set sasl.oauthbearer.token.endpoint.url=file:/path".into(),
            ))
        }
        Some(_) => {
            return Err(err(
                "sasl.oauthbearer.jwt.retriever.class",
                format!("{} is a Java class outboxd cannot run; it reads DefaultJwtRetriever, ClientCredentialsJwtRetriever, JwtBearerJwtRetriever and FileJwtRetriever", retriever.unwrap_or_default()),
            ))
        }
    };
    let grant = keys
        .remove("sasl.oauthbearer.grant.type")
        .map(|g| g.trim().to_string());
    let jwt_bearer = jwt_bearer || grant.as_deref() == Some(JWT_BEARER_GRANT);

    // Client id and secret: Kafka 4.1's keys, librdkafka's, then the JAAS options.
    let mut pick = |names: &[&str], jaas_name: &str| -> Option<(String, String)> {
        for n in names {
            if let Some(v) = keys.remove(*n) {
                jaas_options.remove(jaas_name);
                return Some((n.to_string(), v));
            }
        }
        jaas_options
            .remove(jaas_name)
            .map(|v| (format!("sasl.jaas.config option {jaas_name}"), v))
    };
    let client_id = pick(
        &[
            "sasl.oauthbearer.client.credentials.client.id",
            "sasl.oauthbearer.client.id",
        ],
        "clientId",
    );
    let client_secret = pick(
        &[
            "sasl.oauthbearer.client.credentials.client.secret",
            "sasl.oauthbearer.client.secret",
        ],
        "clientSecret",
    );
    let scope = pick(&["sasl.oauthbearer.scope"], "scope");
    if let Some((_, v)) = &client_id {
        out.props.set("sasl.oauthbearer.client.id", v.trim());
    }
    if let Some((_, v)) = &client_secret {
        out.props.set("sasl.oauthbearer.client.secret", v.clone());
    }
    if let Some((_, v)) = &scope {
        out.props.set("sasl.oauthbearer.scope", v.trim());
    }
    let mut extensions: Vec<String> = Vec::new();
    if let Some(e) = keys.remove("sasl.oauthbearer.extensions") {
        extensions.extend(
            e.split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(String::from),
        );
    }
    for (k, v) in std::mem::take(&mut jaas_options) {
        match k.strip_prefix("extension_") {
            Some(name) if !name.is_empty() => {
                if v.contains(',') || name.contains('=') || name.contains(',') {
                    return Err(err(
                        "sasl.jaas.config",
                        format!("option {k}: librdkafka's sasl.oauthbearer.extensions cannot hold a ',' in a value or a '='/',' in a name"),
                    ));
                }
                extensions.push(format!("{name}={v}"));
            }
            _ => out.ignored.push((
                format!("sasl.jaas.config option {k}"),
                "not an OAuthBearerLoginModule option outboxd uses (clientId, clientSecret, scope, extension_<name>)".into(),
            )),
        }
    }
    if !extensions.is_empty() {
        out.props
            .set("sasl.oauthbearer.extensions", extensions.join(","));
    }
    for k in ASSERTION_KEYS {
        if let Some(v) = keys.remove(k) {
            out.props.set(k, v.trim());
        }
    }
    for (java, rd) in [
        (
            "sasl.oauthbearer.assertion.template.file",
            "sasl.oauthbearer.assertion.jwt.template.file",
        ),
        (
            "sasl.oauthbearer.assertion.jwt.template.file",
            "sasl.oauthbearer.assertion.jwt.template.file",
        ),
        (
            "sasl.oauthbearer.assertion.private.key.pem",
            "sasl.oauthbearer.assertion.private.key.pem",
        ),
    ] {
        if let Some(v) = keys.remove(java) {
            out.props.set(rd, v);
        }
    }
    if let Some(claim) = keys.remove("sasl.oauthbearer.sub.claim.name") {
        if claim.trim() != "sub" {
            return Err(err(
                "sasl.oauthbearer.sub.claim.name",
                format!(
                    "{claim:?}: librdkafka reads the principal from the token's `sub` claim only"
                ),
            ));
        }
    }
    if let Some(v) = keys.remove("sasl.oauthbearer.header.urlencode") {
        out.ignored.push((
            "sasl.oauthbearer.header.urlencode".into(),
            format!("{}: librdkafka sends the client id and secret in the Authorization header as they are", v.trim()),
        ));
    }
    if jwt_bearer {
        out.props
            .set("sasl.oauthbearer.grant.type", JWT_BEARER_GRANT);
        let assertion = [
            "sasl.oauthbearer.assertion.file",
            "sasl.oauthbearer.assertion.private.key.file",
            "sasl.oauthbearer.assertion.private.key.pem",
        ];
        if !assertion.iter().any(|k| out.props.contains(k)) {
            return Err(err(
                "sasl.oauthbearer.assertion.private.key.file",
                "the JWT bearer grant (JwtBearerJwtRetriever) needs an assertion: sasl.oauthbearer.assertion.file (a signed JWT) or sasl.oauthbearer.assertion.private.key.file (a PEM key outboxd signs one with, with the sasl.oauthbearer.assertion.claim.* settings)".into(),
            ));
        }
    } else {
        if let Some(g) = grant.filter(|g| g != "client_credentials") {
            return Err(err(
                "sasl.oauthbearer.grant.type",
                format!("{g:?} is neither client_credentials nor {JWT_BEARER_GRANT}"),
            ));
        }
        let missing: Vec<&str> = [
            (
                client_id.is_none(),
                "clientId (sasl.oauthbearer.client.credentials.client.id)",
            ),
            (
                client_secret.is_none(),
                "clientSecret (sasl.oauthbearer.client.credentials.client.secret)",
            ),
        ]
        .iter()
        .filter(|(m, _)| *m)
        .map(|(_, n)| *n)
        .collect();
        if !missing.is_empty() {
            return Err(err(
                "sasl.jaas.config",
                format!("OIDC client credentials need {}: give them as OAuthBearerLoginModule options (sasl.jaas.config=... required clientId=\"...\" clientSecret=\"...\";) or Kafka 4.1's keys", missing.join(" and ")),
            ));
        }
    }
    Ok(())
}

/// Why unsigned development tokens are refused.
fn unsecured() -> String {
    "Unsigned tokens (OAuthBearerUnsecuredLoginCallbackHandler, unsecuredLoginStringClaim_*) are for development and not supported".to_string()
}

/// The options of Kafka's `OAuthBearerLoginModule` entry (any other module is refused).
fn oauth_login_module(entry: JaasEntry) -> Result<BTreeMap<String, String>, KeyError> {
    if entry.class != OAUTH_LOGIN_MODULE {
        return Err((
            "sasl.jaas.config".into(),
            format!(
                "login module {} does not go with sasl.mechanism=OAUTHBEARER; use {OAUTH_LOGIN_MODULE}",
                entry.class
            ),
        ));
    }
    if entry
        .options
        .keys()
        .any(|k| k.starts_with("unsecuredLogin"))
    {
        return Err(("sasl.jaas.config".into(), unsecured()));
    }
    Ok(entry.options)
}

/// The MSK IAM settings of aws-msk-iam-auth's JAAS options (`IAMLoginModule` for
/// `AWS_MSK_IAM`, `OAuthBearerLoginModule` with `IAMOAuthBearerLoginCallbackHandler`).
fn msk_iam(
    mechanism_key: &str,
    mechanism: &str,
    jaas: Option<JaasEntry>,
    out: &mut Translated,
) -> Result<MskIam, KeyError> {
    let mut options = match jaas {
        None => BTreeMap::new(),
        Some(entry) => {
            let expected = if mechanism == "AWS_MSK_IAM" {
                MSK_LOGIN_MODULE
            } else {
                OAUTH_LOGIN_MODULE
            };
            if entry.class != expected {
                return Err((
                    "sasl.jaas.config".into(),
                    format!(
                        "login module {} does not go with {mechanism_key}={mechanism} and AWS MSK IAM; use {expected}",
                        entry.class
                    ),
                ));
            }
            entry.options
        }
    };
    for secret in [
        "awsRoleAccessKeyId",
        "awsRoleSecretAccessKey",
        "awsRoleSessionToken",
    ] {
        if options.contains_key(secret) {
            return Err((
                "sasl.jaas.config".into(),
                format!("option {secret} is not supported: give the credentials the role is assumed with through the AWS credential chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, a profile, web identity, container or instance credentials)"),
            ));
        }
    }
    let mut take = |k: &str| {
        options
            .remove(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let source = MskIam {
        region: take("awsRegion"),
        profile: take("awsProfileName"),
        role_arn: take("awsRoleArn"),
        role_session_name: take("awsRoleSessionName"),
        role_external_id: take("awsRoleExternalId"),
        sts_region: take("awsStsRegion"),
    };
    debug_assert!(MSK_OPTIONS.iter().all(|k| !options.contains_key(*k)));
    for (k, _) in options {
        let why = if MSK_IGNORED_OPTIONS.contains(&k.as_str()) {
            "the AWS SDK for Rust retries and logs itself"
        } else {
            "not an aws-msk-iam-auth option outboxd knows (awsProfileName, awsRoleArn, awsRoleSessionName, awsRoleExternalId, awsStsRegion, awsRegion)"
        };
        out.ignored
            .push((format!("sasl.jaas.config option {k}"), why.into()));
    }
    if let Some(r) = &source.region {
        if !r
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err((
                "sasl.jaas.config".into(),
                format!("option awsRegion={r:?} is not an AWS region name (e.g. eu-west-1)"),
            ));
        }
    }
    Ok(source)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn any(_: &str, _: &str) -> bool {
        true
    }

    fn translate_all(pairs: &[(&str, &str)]) -> Result<Translated, KeyError> {
        super::super::kafka::translate(keys(pairs), &any)
    }

    #[test]
    fn oidc_client_credentials_from_jaas() {
        let t = translate_all(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.login.callback.handler.class", OIDC_HANDLER),
            ("sasl.oauthbearer.token.endpoint.url", "https://idp.example/oauth2/token"),
            (
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="relay" clientSecret="s3cr3t" scope="kafka" extension_logicalCluster="lkc-1" extension_identityPoolId="pool-2";"#,
            ),
            ("sasl.oauthbearer.expected.audience", "kafka"),
            ("sasl.login.connect.timeout.ms", "5000"),
        ])
        .unwrap();
        let p = &t.props;
        assert_eq!(p.get("sasl.mechanisms"), Some("OAUTHBEARER"));
        assert_eq!(p.get("sasl.oauthbearer.method"), Some("oidc"));
        assert_eq!(p.get("sasl.oauthbearer.client.id"), Some("relay"));
        assert_eq!(p.get("sasl.oauthbearer.client.secret"), None, "a secret");
        assert_eq!(
            p.get_secret("sasl.oauthbearer.client.secret")
                .map(|s| s.expose()),
            Some("s3cr3t")
        );
        assert_eq!(p.get("sasl.oauthbearer.scope"), Some("kafka"));
        assert_eq!(
            p.get("sasl.oauthbearer.extensions"),
            Some("identityPoolId=pool-2,logicalCluster=lkc-1")
        );
        assert_eq!(
            p.get("sasl.oauthbearer.token.endpoint.url"),
            Some("https://idp.example/oauth2/token")
        );
        assert!(!p.contains("sasl.username"));
        assert!(!format!("{p:?} {}", p.describe()).contains("s3cr3t"));
        let ignored: Vec<&str> = t.ignored.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            ignored,
            [
                "sasl.oauthbearer.expected.audience",
                "sasl.login.connect.timeout.ms"
            ]
        );
    }

    #[test]
    fn single_quoted_jaas_values_as_java_reads_them() {
        // Kafka's JaasConfig (Java's StreamTokenizer) strips single quotes too: the provider
        // must get `relay` / `S3cr3tX`, not the quotes.
        let t = translate_all(&[
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.login.callback.handler.class", OIDC_HANDLER),
            ("sasl.oauthbearer.token.endpoint.url", "https://idp.example/t"),
            (
                "sasl.jaas.config",
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId='relay' clientSecret='S3cr3tX' scope=\"kafka\";",
            ),
        ])
        .unwrap();
        assert_eq!(t.props.get("sasl.oauthbearer.client.id"), Some("relay"));
        assert_eq!(
            t.props
                .get_secret("sasl.oauthbearer.client.secret")
                .map(|s| s.expose()),
            Some("S3cr3tX")
        );
        assert_eq!(t.props.get("sasl.oauthbearer.scope"), Some("kafka"));
    }

    #[test]
    fn oidc_from_kafka_41_keys_and_the_older_handler() {
        let t = translate_all(&[
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.login.callback.handler.class", OIDC_HANDLER_SECURED),
            (
                "sasl.oauthbearer.token.endpoint.url",
                "http://127.0.0.1:1/token",
            ),
            ("sasl.oauthbearer.client.credentials.client.id", "relay"),
            ("sasl.oauthbearer.client.credentials.client.secret", "pw"),
            ("sasl.oauthbearer.scope", "a b"),
            (
                "sasl.jaas.config",
                &format!("{OAUTH_LOGIN_MODULE} required;"),
            ),
        ])
        .unwrap();
        assert_eq!(t.props.get("sasl.oauthbearer.client.id"), Some("relay"));
        assert!(t.props.contains("sasl.oauthbearer.client.secret"));
        assert_eq!(t.props.get("sasl.oauthbearer.scope"), Some("a b"));
    }

    #[test]
    fn jwt_bearer_grant() {
        let t = translate_all(&[
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.oauthbearer.token.endpoint.url", "https://idp/token"),
            (
                "sasl.oauthbearer.jwt.retriever.class",
                "org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever",
            ),
            ("sasl.oauthbearer.assertion.private.key.file", "/k.pem"),
            ("sasl.oauthbearer.assertion.private.key.passphrase", "pp"),
            ("sasl.oauthbearer.assertion.claim.iss", "relay"),
            ("sasl.oauthbearer.assertion.template.file", "/t.json"),
            (
                "sasl.jaas.config",
                &format!("{OAUTH_LOGIN_MODULE} required;"),
            ),
        ])
        .unwrap();
        let p = &t.props;
        assert_eq!(p.get("sasl.oauthbearer.grant.type"), Some(JWT_BEARER_GRANT));
        assert_eq!(
            p.get("sasl.oauthbearer.assertion.private.key.file"),
            Some("/k.pem")
        );
        assert_eq!(
            p.get("sasl.oauthbearer.assertion.private.key.passphrase"),
            None,
            "secret"
        );
        assert_eq!(
            p.get("sasl.oauthbearer.assertion.jwt.template.file"),
            Some("/t.json")
        );
        assert_eq!(p.get("sasl.oauthbearer.assertion.claim.iss"), Some("relay"));
        let (k, m) = translate_all(&[
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.oauthbearer.token.endpoint.url", "https://idp/token"),
            (
                "sasl.oauthbearer.jwt.retriever.class",
                "JwtBearerJwtRetriever",
            ),
        ])
        .unwrap_err();
        assert_eq!(k, "sasl.oauthbearer.assertion.private.key.file");
        assert!(m.contains("needs an assertion"), "{m}");
    }

    #[test]
    fn refusals_name_the_setting_and_no_secret() {
        let (k, m) = translate_all(&[
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.oauthbearer.token.endpoint.url", "https://idp/token"),
            (
                "sasl.jaas.config",
                &format!(r#"{OAUTH_LOGIN_MODULE} required clientSecret="hunter2";"#),
            ),
        ])
        .unwrap_err();
        assert_eq!(k, "sasl.jaas.config");
        assert!(m.contains("clientId") && !m.contains("hunter2"), "{m}");
        let (k, m) = translate_all(&[("sasl.mechanism", "OAUTHBEARER")]).unwrap_err();
        assert_eq!(k, "sasl.oauthbearer.token.endpoint.url");
        assert!(m.contains("needs a token"), "{m}");
        let (k, m) = translate_all(&[
            ("sasl.mechanism", "OAUTHBEARER"),
            (
                "sasl.jaas.config",
                &format!(r#"{OAUTH_LOGIN_MODULE} required unsecuredLoginStringClaim_sub="me";"#),
            ),
            ("sasl.oauthbearer.token.endpoint.url", "https://idp/token"),
        ])
        .unwrap_err();
        assert_eq!(k, "sasl.jaas.config");
        assert!(m.contains("Unsigned tokens"), "{m}");
        let (k, _) = translate_all(&[
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.login.callback.handler.class", "com.example.MyHandler"),
        ])
        .unwrap_err();
        assert_eq!(k, "sasl.login.callback.handler.class");
        let (k, _) = translate_all(&[
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.oauthbearer.token.endpoint.url", "https://idp/token"),
            ("sasl.jaas.config", r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";"#),
        ])
        .unwrap_err();
        assert_eq!(k, "sasl.jaas.config");
    }

    #[test]
    fn a_token_file() {
        let t = translate_all(&[
            ("sasl.mechanism", "OAUTHBEARER"),
            (
                "sasl.oauthbearer.token.endpoint.url",
                "file:/var/run/kafka token.jwt",
            ),
            (
                "sasl.jaas.config",
                &format!("{OAUTH_LOGIN_MODULE} required;"),
            ),
        ])
        .unwrap();
        let config = t.props.get_secret("sasl.oauthbearer.config").unwrap();
        assert_eq!(
            TokenSource::parse(config.expose()),
            Some(Ok(TokenSource::File {
                path: "/var/run/kafka token.jwt".into()
            }))
        );
        assert!(!t.props.contains("sasl.oauthbearer.method"));
    }

    #[test]
    fn msk_iam_both_forms() {
        let t = translate_all(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "AWS_MSK_IAM"),
            (
                "sasl.jaas.config",
                r#"software.amazon.msk.auth.iam.IAMLoginModule required awsProfileName="kafka" awsDebugCreds=true;"#,
            ),
            (
                "sasl.client.callback.handler.class",
                "software.amazon.msk.auth.iam.IAMClientCallbackHandler",
            ),
        ])
        .unwrap();
        assert_eq!(t.props.get("sasl.mechanisms"), Some("OAUTHBEARER"));
        let config = t.props.get_secret("sasl.oauthbearer.config").unwrap();
        assert_eq!(config.expose(), "source=aws-msk-iam profile=kafka");
        assert_eq!(
            t.ignored
                .iter()
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>(),
            ["sasl.jaas.config option awsDebugCreds"]
        );
        let t = translate_all(&[
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.jaas.config", &format!(r#"{OAUTH_LOGIN_MODULE} required awsRoleArn="arn:aws:iam::123456789012:role/relay" awsRoleSessionName=outboxd awsRegion=eu-west-1;"#)),
            ("sasl.login.callback.handler.class", MSK_OAUTH_HANDLER),
            ("sasl.client.callback.handler.class", MSK_OAUTH_HANDLER),
        ])
        .unwrap();
        let config = t.props.get_secret("sasl.oauthbearer.config").unwrap();
        let Some(Ok(TokenSource::MskIam(m))) = TokenSource::parse(config.expose()) else {
            panic!("{config:?}")
        };
        assert_eq!(m.region.as_deref(), Some("eu-west-1"));
        assert_eq!(
            m.role_arn.as_deref(),
            Some("arn:aws:iam::123456789012:role/relay")
        );
        assert_eq!(m.role_session_name.as_deref(), Some("outboxd"));
        assert!(t.ignored.is_empty(), "{:?}", t.ignored);
        let (k, _) = translate_all(&[
            ("sasl.mechanism", "AWS_MSK_IAM"),
            (
                "sasl.jaas.config",
                &format!("{OAUTH_LOGIN_MODULE} required;"),
            ),
        ])
        .unwrap_err();
        assert_eq!(k, "sasl.jaas.config");
    }

    #[test]
    fn msk_regions_from_host_names() {
        for (host, region) in [
            (
                "b-1.orders.abc123.c2.kafka.us-east-1.amazonaws.com:9098",
                Some("us-east-1"),
            ),
            (
                "boot-abcd1234.c1.kafka-serverless.eu-west-1.amazonaws.com:9098",
                Some("eu-west-1"),
            ),
            (
                "b-2.x.y.c3.kafka.cn-north-1.amazonaws.com.cn:9098",
                Some("cn-north-1"),
            ),
            ("kafka.example.com:9092", None),
            ("localhost:9092", None),
        ] {
            assert_eq!(msk_region_of(host).as_deref(), region, "{host}");
        }
    }

    #[test]
    fn token_source_text_round_trips() {
        let s = TokenSource::MskIam(MskIam {
            region: Some("us-west-2".into()),
            profile: Some("a b=c%".into()),
            ..MskIam::default()
        });
        assert_eq!(TokenSource::parse(&s.to_config()), Some(Ok(s)));
        assert_eq!(TokenSource::parse("principal=x lifeSeconds=3"), None);
        assert!(matches!(TokenSource::parse("source=nope"), Some(Err(_))));
    }
}
