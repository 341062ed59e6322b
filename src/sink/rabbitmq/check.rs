//! `outboxd check` for a RabbitMQ sink: connects and logs in as `run` does, checks the
//! exchange (passively: `check` declares nothing) and publisher confirms, and says how the
//! connection is secured and what the guarantee is.

use lapin::options::{ConfirmSelectOptions, ExchangeDeclareOptions};
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
use lapin::types::{FieldTable, ShortString};
use lapin::uri::AMQPScheme;
use lapin::{Connection, ConnectionProperties, ErrorKind, ExchangeKind};

use super::errors::{self, Target};
use super::RabbitMqOpener;
use crate::config::sinks::RabbitMqSinkConfig;
use crate::requirement::{CheckResult, Status};

/// The checks of connector `connector`'s RabbitMQ sink `cfg`.
pub async fn check(connector: &str, cfg: &RabbitMqSinkConfig) -> Vec<CheckResult> {
    let result =
        |name: &str, status, detail: String| CheckResult::new(connector, name, status, detail);
    let opener = RabbitMqOpener::new(cfg, connector);
    let (uri, tls) = match (opener.uri(), opener.tls()) {
        (Ok(u), Ok(t)) => (u, t),
        (Err(e), _) | (_, Err(e)) => return vec![result("rabbitmq", Status::Fail, e.to_string())],
    };
    let target = Target {
        server: format!("{}:{}", uri.authority.host, uri.authority.port),
        vhost: uri.vhost.clone(),
        user: uri.authority.userinfo.username.clone(),
        exchange: cfg.exchange.clone(),
        declares: cfg.exchange_type.is_some(),
        per_topic: cfg.exchange_from_topic,
    };
    let loopback = ["127.0.0.1", "localhost", "::1"].contains(&uri.authority.host.as_str());
    let mut out = vec![match (&uri.scheme, loopback) {
        (AMQPScheme::AMQPS, _) => result(
            "rabbitmq tls",
            Status::Pass,
            format!(
                "amqps://: TLS, the server verified against {}{}",
                cfg.auth
                    .tls_ca
                    .as_ref()
                    .map_or("the system's roots".into(), |p| format!(
                        "{} and the system's roots",
                        p.display()
                    )),
                if cfg.auth.tls_cert.is_some() {
                    ", with a client certificate"
                } else {
                    ""
                }
            ),
        ),
        (AMQPScheme::AMQP, true) => result(
            "rabbitmq tls",
            Status::Pass,
            "amqp:// on the loopback interface: not encrypted".into(),
        ),
        (AMQPScheme::AMQP, false) => result(
            "rabbitmq tls",
            Status::Warn,
            format!(
                "amqp:// to {}: the password and the events cross the network unencrypted; use \
                 amqps:// (and tls_ca)",
                target.server
            ),
        ),
    }];
    let runtime = match lapin::runtime::default_runtime() {
        Ok(r) => r,
        Err(e) => {
            out.push(result("rabbitmq", Status::Fail, e.to_string()));
            return out;
        }
    };
    let props = ConnectionProperties::default()
        .with_connection_name(format!("outboxd check {connector}").into());
    let conn = match Connection::connect_uri_with_config(uri, props, tls, runtime).await {
        Ok(c) => c,
        Err(e) => {
            out.push(result(
                "rabbitmq login",
                Status::Fail,
                errors::on_open(&e, &target, "connect").to_string(),
            ));
            return out;
        }
    };
    out.push(result(
        "rabbitmq login",
        Status::Pass,
        format!(
            "logged in to {} as user \"{}\", virtual host \"{}\"",
            target.server, target.user, target.vhost
        ),
    ));
    out.push(exchange(&conn, cfg, &target, &result).await);
    let confirms = async {
        let ch = conn.create_channel().await?;
        ch.confirm_select(ConfirmSelectOptions::default()).await
    };
    out.push(match confirms.await {
        Ok(()) => result(
            "rabbitmq delivery",
            Status::Pass,
            format!(
                "publisher confirms on: at-least-once (persistent, mandatory messages; the \
                 checkpoint file is written after the confirms; message_id = the event id for \
                 consumer dedupe); {}",
                match &cfg.routing_key {
                    Some(k) => format!("every record with routing key \"{k}\""),
                    None => "the routed topic is the routing key".into(),
                }
            ),
        ),
        Err(e) => result(
            "rabbitmq delivery",
            Status::Fail,
            errors::on_open(&e, &target, "turn publisher confirms on at").to_string(),
        ),
    });
    let _ = conn.close(200, "outboxd check".into()).await;
    out
}

/// Whether the exchange exists (a passive declare), or will be declared by `run`.
async fn exchange(
    conn: &Connection,
    cfg: &RabbitMqSinkConfig,
    target: &Target,
    result: &impl Fn(&str, Status, String) -> CheckResult,
) -> CheckResult {
    if cfg.exchange_from_topic {
        return result(
            "rabbitmq exchange",
            Status::Pass,
            "each record goes to the exchange named by its routed topic (Debezium Server's \
             default): declare one per topic, with a queue bound (a record without either is \
             refused)"
                .into(),
        );
    }
    if cfg.exchange.is_empty() {
        return result(
            "rabbitmq exchange",
            Status::Pass,
            "the default exchange \"\": each record goes to the queue named by its routing key \
             (a record with no such queue is refused)"
                .into(),
        );
    }
    let passive = async {
        let ch = conn.create_channel().await?;
        ch.exchange_declare(
            ShortString::try_new(cfg.exchange.as_str()).unwrap_or_default(),
            ExchangeKind::Direct,
            ExchangeDeclareOptions {
                passive: true,
                ..ExchangeDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
    };
    match passive.await {
        Ok(()) => result(
            "rabbitmq exchange",
            Status::Pass,
            format!(
                "{} exists; bind a queue for every routed topic (an unroutable record is \
                 refused)",
                target.exchange_name()
            ),
        ),
        Err(e)
            if cfg.exchange_type.is_some()
                && matches!(e.kind(), ErrorKind::ProtocolError(p)
                    if *p.kind() == AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND)) =>
        {
            result(
                "rabbitmq exchange",
                Status::Pass,
                format!(
                    "{} does not exist yet: run declares it (durable, type {})",
                    target.exchange_name(),
                    cfg.exchange_type.as_deref().unwrap_or_default()
                ),
            )
        }
        Err(e) => result(
            "rabbitmq exchange",
            Status::Fail,
            errors::on_open(&e, target, "check").to_string(),
        ),
    }
}
