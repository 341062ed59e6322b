//! What lapin's errors mean for the delivery loop: transient (the broker is down or closed
//! the connection: restart from the checkpoint) or definite (refused login, a missing
//! exchange, no permission: stop, with what to change). Classified from the AMQP reply codes
//! and lapin's error kinds (ARCHITECTURE.md invariant 4), never from the reply text — except
//! for *which* record a `PRECONDITION_FAILED` about a message size concerns, which only the
//! text says ([`oversized_body`]).

use lapin::protocol::{AMQPErrorKind, AMQPHardError, AMQPSoftError};
use lapin::ErrorKind;

use crate::error::Class;
use crate::sink::SinkError;

/// The broker's name in errors.
pub const BROKER: &str = "RabbitMQ";

/// Where the sink publishes, for naming it in errors (never the password).
#[derive(Debug, Clone)]
pub struct Target {
    /// `host:port`.
    pub server: String,
    /// The virtual host.
    pub vhost: String,
    /// The user logged in as.
    pub user: String,
    /// The exchange (`""`: the default exchange).
    pub exchange: String,
    /// Whether the sink declares the exchange when it opens (`exchange_type` set).
    pub declares: bool,
    /// Whether each record goes to the exchange named by its topic (`exchange_from_topic`).
    pub per_topic: bool,
}

impl Target {
    /// The target of a record routed to `topic`: its own exchange when `per_topic`.
    pub fn for_topic(&self, topic: &str) -> Target {
        let mut t = self.clone();
        if self.per_topic {
            t.exchange = topic.to_string();
        }
        t
    }

    /// The exchange as a phrase.
    pub fn exchange_name(&self) -> String {
        if self.exchange.is_empty() {
            "the default exchange \"\"".into()
        } else {
            format!("exchange \"{}\"", self.exchange)
        }
    }
}

/// The AMQP error in `e`, if the broker sent one.
fn amqp(e: &lapin::Error) -> Option<(&AMQPErrorKind, &str)> {
    match e.kind() {
        ErrorKind::ProtocolError(p) => Some((p.kind(), p.get_message().as_str())),
        _ => None,
    }
}

/// Whether `e` is a failed TLS handshake (an unverifiable server certificate, a client
/// certificate refused, TLS to a plain listener): rustls' error inside lapin's I/O error.
pub fn is_tls_failure(e: &lapin::Error) -> bool {
    match e.kind() {
        ErrorKind::IOError(io) => {
            io.get_ref()
                .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
                || io.kind() == std::io::ErrorKind::InvalidData
        }
        _ => false,
    }
}

/// Whether `e` is the broker (or the network) going away: worth reconnecting.
pub fn is_connection_loss(e: &lapin::Error) -> bool {
    if is_tls_failure(e) {
        return false;
    }
    match e.kind() {
        ErrorKind::IOError(_)
        | ErrorKind::MissingHeartbeatError
        | ErrorKind::InvalidConnectionState(_)
        | ErrorKind::InvalidChannelState(..) => true,
        ErrorKind::ProtocolError(p) => matches!(
            p.kind(),
            AMQPErrorKind::Hard(
                AMQPHardError::CONNECTIONFORCED
                    | AMQPHardError::RESOURCEERROR
                    | AMQPHardError::INTERNALERROR
                    | AMQPHardError::CHANNELERROR
            )
        ),
        _ => false,
    }
}

/// A failure to connect, log in, or open the channel: definite for refused credentials
/// or vhost access (naming the user and vhost, never the password), a TLS failure, a bad
/// exchange; transient for a broker that is down or went away.
pub fn on_open(e: &lapin::Error, t: &Target, what: &str) -> SinkError {
    if let Some((kind, text)) = amqp(e) {
        let detail = match kind {
            AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED) if what == "connect" => format!(
                "the broker at {} refused the login of user \"{}\" (ACCESS_REFUSED: {text}); \
                 check `user` and `password` (rabbitmqctl authenticate_user {} ...)",
                t.server, t.user, t.user
            ),
            AMQPErrorKind::Hard(AMQPHardError::NOTALLOWED) => format!(
                "the broker at {} does not let user \"{}\" into virtual host \"{}\" \
                 (NOT_ALLOWED: {text}); create the vhost or grant access (rabbitmqctl \
                 set_permissions -p {} {} ...), or fix the vhost in `url` (%2f for /)",
                t.server, t.user, t.vhost, t.vhost, t.user
            ),
            AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND) => format!(
                "{} does not exist in virtual host \"{}\" ({text}); declare it (e.g. \
                 rabbitmqadmin declare exchange name={} type=topic durable=true), or set \
                 exchange_type = \"topic\" (or direct, fanout, headers) and outboxd declares \
                 it",
                t.exchange_name(),
                t.vhost,
                t.exchange
            ),
            AMQPErrorKind::Soft(AMQPSoftError::PRECONDITIONFAILED) => format!(
                "{} exists with other settings than exchange_type asks for ({text}); set \
                 exchange_type to its type, or remove exchange_type to use it as it is",
                t.exchange_name()
            ),
            AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED) => format!(
                "user \"{}\" may not {what} {} in virtual host \"{}\" (ACCESS_REFUSED: \
                 {text}); grant it (rabbitmqctl set_permissions -p {} {} <configure> <write> \
                 <read>)",
                t.user,
                t.exchange_name(),
                t.vhost,
                t.vhost,
                t.user
            ),
            _ if is_connection_loss(e) => {
                return SinkError::broker(
                    BROKER,
                    Class::Transient,
                    format!("the broker at {} closed the connection ({text})", t.server),
                )
            }
            _ => format!("{what} at {} failed: {text}", t.server),
        };
        return SinkError::broker(BROKER, Class::Definite, detail);
    }
    if is_tls_failure(e) {
        return SinkError::broker(
            BROKER,
            Class::Definite,
            format!(
                "the TLS handshake with {} failed: {e}; check tls_ca (the CA that signed the \
                 broker's certificate), the host name in `url` (the certificate's), tls_cert and \
                 tls_key, and that the port speaks TLS (amqps://, usually 5671)",
                t.server
            ),
        );
    }
    if is_connection_loss(e) {
        return SinkError::broker(
            BROKER,
            Class::Transient,
            format!("{} is unreachable: {e}", t.server),
        );
    }
    SinkError::broker(
        BROKER,
        Class::Definite,
        format!(
            "{what} at {} failed: {e} (with amqps://: check tls_ca, tls_cert and tls_key)",
            t.server
        ),
    )
}

/// A published record's failure (its confirm did not come: the channel or connection
/// closed with `e`), for the record with event id `id` routed to `topic`.
pub fn on_publish(e: &lapin::Error, t: &Target, id: &str, topic: &str) -> SinkError {
    let definite = |detail: String| SinkError::broker(BROKER, Class::Definite, detail);
    match amqp(e) {
        Some((AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND), text)) => {
            let detail = format!(
                "{} no longer exists in virtual host \"{}\" ({text}); nothing after outbox \
                 event {id} (topic {topic}) is checkpointed",
                t.exchange_name(),
                t.vhost
            );
            if t.per_topic {
                definite(format!(
                    "{} does not exist in virtual host \"{}\" ({text}): with \
                     exchange_from_topic each routed topic needs an exchange of its name; \
                     declare it, with a queue bound; nothing after outbox event {id} is \
                     checkpointed",
                    t.exchange_name(),
                    t.vhost
                ))
            } else if t.declares {
                // A restart declares it again.
                SinkError::broker(BROKER, Class::Transient, detail)
            } else {
                definite(format!(
                    "{detail}; declare it again, or set exchange_type and outboxd declares it"
                ))
            }
        }
        Some((AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED), text)) => definite(format!(
            "user \"{}\" may not publish to {} in virtual host \"{}\" (ACCESS_REFUSED: \
             {text}); grant write permission (rabbitmqctl set_permissions -p {} {} ...)",
            t.user,
            t.exchange_name(),
            t.vhost,
            t.vhost,
            t.user
        )),
        _ if is_connection_loss(e) => SinkError::broker_record(
            BROKER,
            id,
            topic,
            None,
            format!(
                "the connection to {} was lost before outbox event {id} (topic {topic}) was \
                 confirmed ({e}); it is sent again from the checkpoint",
                t.server
            ),
        ),
        Some((_, text)) => definite(format!(
            "the broker closed the channel while outbox event {id} (topic {topic}) waited \
             for its confirm: {text}"
        )),
        None => SinkError::broker_record(
            BROKER,
            id,
            topic,
            None,
            format!("outbox event {id} (topic {topic}) was not confirmed: {e}"),
        ),
    }
}

/// When `e` closed the channel because a message's body was over the broker's
/// `max_message_size` (`PRECONDITION_FAILED`): the body size and the limit, read from
/// RabbitMQ's reply text "message size N is larger than configured max size M" (the code
/// alone does not say which message; nothing is classified by this text).
pub fn oversized_body(e: &lapin::Error) -> Option<(usize, Option<usize>)> {
    let (kind, text) = amqp(e)?;
    if *kind != AMQPErrorKind::Soft(AMQPSoftError::PRECONDITIONFAILED) {
        return None;
    }
    let rest = text.split("message size ").nth(1)?;
    let size = rest.split(' ').next()?.parse().ok()?;
    let limit = rest
        .split("max size ")
        .nth(1)
        .and_then(|m| m.trim().parse().ok());
    Some((size, limit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::protocol::AMQPError;

    fn soft(kind: AMQPSoftError, text: &str) -> lapin::Error {
        ErrorKind::ProtocolError(AMQPError::new(AMQPErrorKind::Soft(kind), text.into())).into()
    }

    fn target() -> Target {
        Target {
            server: "127.0.0.1:5672".into(),
            vhost: "/".into(),
            user: "outboxd".into(),
            exchange: "events".into(),
            declares: false,
            per_topic: false,
        }
    }

    #[test]
    fn a_refused_login_is_definite_and_names_user_not_password() {
        let e = soft(
            AMQPSoftError::ACCESSREFUSED,
            "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN",
        );
        let f = on_open(&e, &target(), "connect");
        assert_eq!(f.class(), Class::Definite);
        let text = f.to_string();
        assert!(text.contains("user \"outboxd\""), "{text}");
        assert!(text.contains("127.0.0.1:5672"), "{text}");
    }

    #[test]
    fn a_missing_exchange_says_how_to_declare_it() {
        let e = soft(AMQPSoftError::NOTFOUND, "NOT_FOUND - no exchange 'events'");
        let f = on_open(&e, &target(), "check");
        assert_eq!(f.class(), Class::Definite);
        assert!(f.to_string().contains("exchange_type"), "{f}");
        let mut declares = target();
        declares.declares = true;
        assert_eq!(
            on_publish(&e, &declares, "e1", "t").class(),
            Class::Transient
        );
    }

    #[test]
    fn a_lost_connection_is_transient() {
        let e: lapin::Error = std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into();
        assert_eq!(on_open(&e, &target(), "connect").class(), Class::Transient);
        assert_eq!(
            on_publish(&e, &target(), "e1", "t").class(),
            Class::Transient
        );
    }

    #[test]
    fn a_certificate_refused_is_definite() {
        let tls = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let f = on_open(&tls.into(), &target(), "connect");
        assert_eq!(f.class(), Class::Definite);
        assert!(f.to_string().contains("tls_ca"), "{f}");
    }

    #[test]
    fn the_oversized_body_is_read_from_the_reply() {
        let e = soft(
            AMQPSoftError::PRECONDITIONFAILED,
            "PRECONDITION_FAILED - message size 2000000 is larger than configured max size 1048576",
        );
        assert_eq!(oversized_body(&e), Some((2_000_000, Some(1_048_576))));
        let other = soft(AMQPSoftError::PRECONDITIONFAILED, "PRECONDITION_FAILED - x");
        assert_eq!(oversized_body(&other), None);
    }
}
