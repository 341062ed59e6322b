//! An OAuth/OIDC world for the OAUTHBEARER tests: a token endpoint and JWKS the test runs
//! itself ([`IdP`]: RS256 tokens from a throw-away key), and a Kafka broker of its own
//! ([`OAuthKafka`]) with an OAUTHBEARER listener that validates tokens against that JWKS
//! (Kafka's `OAuthBearerValidatorCallbackHandler`) and makes clients re-authenticate
//! (`connections.max.reauth.ms`).
//!
//! The broker is a second Kafka 4.1 process from the same jars as `scripts/services.sh`'s,
//! on free ports, with its data under `.state/tests/<name>/`; the shared broker is never
//! touched. It is started once per test binary (it needs the IdP's JWKS up when it
//! validates), and a watchdog shell ends it when the test process ends, however that ends.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;

use super::relay::{free_port, test_dir};

/// The audience the broker expects (`sasl.oauthbearer.expected.audience`).
pub const AUDIENCE: &str = "kafka";

/// What the token endpoint does wrong for a client, by its client id.
fn defect(client_id: &str) -> &'static str {
    match client_id {
        "expired" => "expired",
        "unsigned" => "unsigned",
        "wrong-aud" => "wrong-aud",
        _ => "",
    }
}

/// The secret the token endpoint accepts for `client_id`.
pub fn secret_of(client_id: &str) -> String {
    format!("{client_id}-idp-secret")
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A throw-away RSA key (openssl makes it; ring signs with it).
struct Key {
    pair: ring::signature::RsaKeyPair,
    kid: String,
}

impl Key {
    fn new(dir: &Path) -> Key {
        let der = dir.join("idp-key.der");
        let out = Command::new("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
            ])
            .args(["-outform", "DER", "-out"])
            .arg(&der)
            .output()
            .expect("openssl");
        assert!(out.status.success(), "openssl genpkey: {out:?}");
        let pkcs1 = std::fs::read(&der).unwrap();
        // openssl writes the DER form of an RSA key as PKCS#1 (RSAPrivateKey).
        let pair = ring::signature::RsaKeyPair::from_der(&pkcs1).expect("an RSA key");
        Key {
            pair,
            kid: format!("test-{}", std::process::id()),
        }
    }

    /// The JWKS with this key's public part.
    fn jwks(&self) -> String {
        let c: ring::rsa::PublicKeyComponents<Vec<u8>> = self.pair.public().into();
        serde_json::json!({"keys": [{
            "kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid,
            "n": b64(&c.n), "e": b64(&c.e),
        }]})
        .to_string()
    }

    /// A compact JWS of `claims`: RS256 with this key, or unsigned (`alg: none`).
    fn sign(&self, claims: &serde_json::Value, signed: bool) -> String {
        let header = if signed {
            serde_json::json!({"alg": "RS256", "typ": "JWT", "kid": self.kid})
        } else {
            serde_json::json!({"alg": "none", "typ": "JWT"})
        };
        let input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        if !signed {
            return format!("{input}.");
        }
        let mut sig = vec![0; self.pair.public().modulus_len()];
        self.pair
            .sign(
                &ring::signature::RSA_PKCS1_SHA256,
                &ring::rand::SystemRandom::new(),
                input.as_bytes(),
                &mut sig,
            )
            .unwrap();
        format!("{input}.{}", b64(&sig))
    }
}

/// The test's OAuth/OIDC provider: `POST /token` (client credentials with HTTP Basic or form
/// credentials; the JWT bearer grant), `GET /jwks`.
pub struct IdP {
    pub port: u16,
    key: Key,
    /// Token lifetime, seconds.
    lifetime_s: AtomicU64,
    /// Tokens issued, by client id (or assertion subject).
    issued: Mutex<HashMap<String, u64>>,
    /// Failed token requests (wrong secret), by client id.
    refused: Mutex<HashMap<String, u64>>,
}

impl IdP {
    /// Starts the provider on a free port (its own thread and runtime).
    pub fn start(dir: &Path, lifetime: Duration) -> Arc<IdP> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let idp = Arc::new(IdP {
            port: listener.local_addr().unwrap().port(),
            key: Key::new(dir),
            lifetime_s: AtomicU64::new(lifetime.as_secs()),
            issued: Mutex::new(HashMap::new()),
            refused: Mutex::new(HashMap::new()),
        });
        let served = idp.clone();
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                    let jwks = served.clone();
                    let app = axum::Router::new()
                        .route(
                            "/jwks",
                            axum::routing::get(move || {
                                let body = jwks.key.jwks();
                                async move { ([("content-type", "application/json")], body) }
                            }),
                        )
                        .route(
                            "/token",
                            axum::routing::post(
                                move |headers: axum::http::HeaderMap, body: String| {
                                    let idp = served.clone();
                                    async move { idp.token(&headers, &body) }
                                },
                            ),
                        );
                    axum::serve(listener, app).await.unwrap();
                })
        });
        idp
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The issuer the tokens name (`iss`).
    pub fn issuer(&self) -> String {
        self.url("")
    }

    /// How many tokens went to `client`.
    pub fn issued(&self, client: &str) -> u64 {
        *self.issued.lock().unwrap().get(client).unwrap_or(&0)
    }

    /// How many token requests of `client` were refused.
    pub fn refused(&self, client: &str) -> u64 {
        *self.refused.lock().unwrap().get(client).unwrap_or(&0)
    }

    /// A signed token for `sub`, valid `lifetime` from now (negative: already expired).
    pub fn token_for(&self, sub: &str, lifetime_s: i64) -> String {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        self.key.sign(
            &serde_json::json!({
                "iss": self.issuer(), "sub": sub, "aud": AUDIENCE, "iat": now,
                "exp": now + lifetime_s, "scope": "kafka",
            }),
            true,
        )
    }

    fn token(
        &self,
        headers: &axum::http::HeaderMap,
        body: &str,
    ) -> (
        axum::http::StatusCode,
        [(&'static str, &'static str); 1],
        String,
    ) {
        let form: HashMap<String, String> = body
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), form_decode(v)))
            .collect();
        let basic = headers
            .get("authorization")
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.strip_prefix("Basic "))
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| {
                s.split_once(':')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
            });
        let json = [("content-type", "application/json")];
        let refuse = |why: &str| {
            (
                axum::http::StatusCode::UNAUTHORIZED,
                json,
                serde_json::json!({"error": why}).to_string(),
            )
        };
        let subject = match form.get("grant_type").map(String::as_str) {
            Some("client_credentials") => {
                let (id, secret) = match basic {
                    Some(b) => b,
                    None => (
                        form.get("client_id").cloned().unwrap_or_default(),
                        form.get("client_secret").cloned().unwrap_or_default(),
                    ),
                };
                if secret != secret_of(&id) {
                    *self.refused.lock().unwrap().entry(id).or_default() += 1;
                    return refuse("invalid_client");
                }
                id
            }
            Some("urn:ietf:params:oauth:grant-type:jwt-bearer") => {
                // The assertion's subject (its signature is not this test's subject).
                let claims = form
                    .get("assertion")
                    .and_then(|a| a.split('.').nth(1))
                    .and_then(|p| {
                        base64::engine::general_purpose::URL_SAFE_NO_PAD
                            .decode(p)
                            .ok()
                    })
                    .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
                match claims.and_then(|c| c.get("sub")?.as_str().map(str::to_string)) {
                    Some(sub) => sub,
                    None => return refuse("invalid_grant"),
                }
            }
            _ => return refuse("unsupported_grant_type"),
        };
        *self
            .issued
            .lock()
            .unwrap()
            .entry(subject.clone())
            .or_default() += 1;
        let lifetime = self.lifetime_s.load(Ordering::Relaxed) as i64;
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let (exp, aud, signed) = match defect(&subject) {
            "expired" => (now - 120, AUDIENCE, true),
            "unsigned" => (now + lifetime, AUDIENCE, false),
            "wrong-aud" => (now + lifetime, "not-kafka", true),
            _ => (now + lifetime, AUDIENCE, true),
        };
        let claims = serde_json::json!({
            "iss": self.issuer(), "sub": subject, "aud": aud, "iat": now, "exp": exp,
            "scope": form.get("scope").cloned().unwrap_or_default(),
        });
        let token = self.key.sign(&claims, signed);
        (
            axum::http::StatusCode::OK,
            json,
            serde_json::json!({"access_token": token, "token_type": "bearer", "expires_in": exp - now})
                .to_string(),
        )
    }
}

/// `application/x-www-form-urlencoded` value decoding.
fn form_decode(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                if let Ok(b) = u8::from_str_radix(&v[i + 1..i + 3], 16) {
                    out.push(b);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A Kafka broker of the test's own with an OAUTHBEARER listener.
pub struct OAuthKafka {
    /// PLAINTEXT listener (User:ANONYMOUS, a super user): the test's reader and admin.
    pub plaintext: String,
    /// The SASL_PLAINTEXT listener with OAUTHBEARER only.
    pub oauth: String,
    pub dir: PathBuf,
    pub log: PathBuf,
    pub idp: Arc<IdP>,
    _watchdog: Mutex<Child>,
}

/// The forced re-authentication interval of the OAUTHBEARER listener.
pub const REAUTH: Duration = Duration::from_secs(10);

/// The token lifetime the provider gives (librdkafka refreshes at 80 %).
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(20);

impl OAuthKafka {
    /// The broker of this test binary, started on first use (with its IdP).
    pub fn shared() -> &'static OAuthKafka {
        static BROKER: OnceLock<OAuthKafka> = OnceLock::new();
        BROKER.get_or_init(|| {
            let broker = OAuthKafka::start(&format!("oauth_kafka_{}", std::process::id()));
            // The harness's reader and admin (read_topics, create_topic) use this broker.
            std::env::set_var("OUTBOXD_KAFKA_BOOTSTRAP", &broker.plaintext);
            broker
        })
    }

    fn start(name: &str) -> OAuthKafka {
        let dir = test_dir(name);
        let idp = IdP::start(&dir, TOKEN_LIFETIME);
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let libs = root.join(".state/kafka/libs");
        assert!(
            libs.is_dir(),
            "{} missing: run scripts/services.sh install",
            libs.display()
        );
        let (plain, ctrl, oauth) = (free_port(), free_port(), free_port());
        let base = std::fs::read_to_string(root.join("docker/kafka/server.properties")).unwrap();
        let jwks = idp.url("/jwks");
        let props = format!(
            "{base}
# ---- the OAUTHBEARER test broker (tests/common/oauth.rs) ----
listeners=PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{ctrl},OAUTH://127.0.0.1:{oauth}
advertised.listeners=PLAINTEXT://127.0.0.1:{plain},OAUTH://127.0.0.1:{oauth}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,OAUTH:SASL_PLAINTEXT
controller.quorum.voters=1@127.0.0.1:{ctrl}
log.dirs={data}
num.partitions=1
listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
listener.name.oauth.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
listener.name.oauth.oauthbearer.connections.max.reauth.ms={reauth}
# Kafka 4.1.1's default validator class (DefaultJwtValidator), made by its no-argument
# constructor, checks neither signature nor audience; BrokerJwtValidator builds its JWKS
# resolver from the settings below and checks both.
sasl.oauthbearer.jwt.validator.class=org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator
sasl.oauthbearer.jwks.endpoint.url={jwks}
sasl.oauthbearer.expected.audience={AUDIENCE}
sasl.oauthbearer.expected.issuer={issuer}
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=true
super.users=User:ANONYMOUS
",
            data = dir.join("data").display(),
            reauth = REAUTH.as_millis(),
            issuer = idp.issuer(),
        );
        let props_path = dir.join("server.properties");
        std::fs::write(&props_path, props).unwrap();
        let log4j = dir.join("log4j2.properties");
        std::fs::write(
            &log4j,
            "status = warn\nappender.out.type = Console\nappender.out.name = OUT\n\
             appender.out.layout.type = PatternLayout\nappender.out.layout.pattern = [%d] %p %m (%c)%n\n\
             rootLogger.level = INFO\nrootLogger.appenderRef.out.ref = OUT\n\
             logger.req.name = kafka.request.logger\nlogger.req.level = WARN\n\
             logger.authz.name = kafka.authorizer.logger\nlogger.authz.level = WARN\n\
             logger.clients.name = org.apache.kafka.clients\nlogger.clients.level = WARN\n\
             logger.auth.name = org.apache.kafka.common.security.authenticator\nlogger.auth.level = DEBUG\n",
        )
        .unwrap();
        let java_args = |main: &str| -> Vec<String> {
            vec![
                "-Xms128m".into(),
                "-Xmx384m".into(),
                "-XX:+UseSerialGC".into(),
                "-Djava.awt.headless=true".into(),
                format!(
                    "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={jwks},{}",
                    idp.url("/token")
                ),
                format!("-Dlog4j2.configurationFile={}", log4j.display()),
                "-cp".into(),
                format!("{}/*", libs.display()),
                main.into(),
            ]
        };
        // Kafka's own Uuid.randomUuid never starts a cluster id with '-': the command line
        // would take it for an option (1 in 64 random ids did, and the format failed).
        let cluster_id = loop {
            let id = b64(&rand::random::<[u8; 16]>());
            if !id.starts_with('-') {
                break id;
            }
        };
        let format = Command::new("java")
            .args(java_args("kafka.tools.StorageTool"))
            .args(["format", "--config"])
            .arg(&props_path)
            .args(["--cluster-id", &cluster_id, "--ignore-formatted"])
            .output()
            .expect("java");
        assert!(format.status.success(), "kafka storage format: {format:?}");
        let log = dir.join("kafka.log");
        let mut broker = java_args("kafka.Kafka");
        broker.push(props_path.display().to_string());
        let quoted: Vec<String> = broker
            .iter()
            .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
            .collect();
        // The watchdog: the broker lives only as long as this test process.
        let line = format!(
            "java {} & j=$!; trap 'kill -9 $j 2>/dev/null; exit 0' TERM INT; \
             while kill -0 {pid} 2>/dev/null && kill -0 $j 2>/dev/null; do sleep 1; done; \
             kill -9 $j 2>/dev/null; wait $j",
            quoted.join(" "),
            pid = std::process::id()
        );
        let logfile = std::fs::File::create(&log).unwrap();
        let watchdog = Command::new("bash")
            .arg("-c")
            .arg(line)
            .stdin(Stdio::null())
            .stdout(logfile.try_clone().unwrap())
            .stderr(logfile)
            .spawn()
            .expect("bash");
        let deadline = Instant::now() + Duration::from_secs(240);
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("Kafka Server started") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the OAUTHBEARER test broker did not start in 240 s; {}:\n{text}",
                log.display()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        let _ = std::io::stderr().flush();
        OAuthKafka {
            plaintext: format!("127.0.0.1:{plain}"),
            oauth: format!("127.0.0.1:{oauth}"),
            dir,
            log,
            idp,
            _watchdog: Mutex::new(watchdog),
        }
    }

    /// The broker's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
