//! The RabbitMQ sink: records published over AMQP 0-9-1 on one channel in confirm mode
//! (`confirm.select`), in order, each `mandatory` and persistent, to the configured exchange
//! with the routed topic as the routing key ([`message`] says how a record maps to a
//! message). Each publish's confirm is reported to the [`DeliveryTracker`] in publish order:
//! an ack is a delivery; a message returned as unroutable (`basic.return`, then its ack) is a
//! refusal of that record (never a silent drop); a nack (a queue at its `x-max-length` with
//! `x-overflow = reject-publish`) is a transient failure, sent again from the checkpoint; a
//! closed channel or connection fails what waits ([`errors`]). At-least-once: the checkpoint
//! (a file) is written only after the confirms of everything before it.
//!
//! One connection, one channel: publishes keep the source's order, so per-aggregate order
//! holds on every queue the exchange routes to.

mod check;
pub mod errors;
pub mod message;
mod open;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions};
use lapin::types::{FieldTable, ShortString};
use lapin::{Channel, Confirmation, Connection, ExchangeKind, PublisherConfirm};
use tokio::sync::mpsc;

use self::errors::{Target, BROKER};
use super::tracker::counted_size;
use super::{DeliveryTracker, KafkaLink, KafkaRecord, RecordSink, Refusal, SinkError};
use crate::config::sinks::RabbitMqSinkConfig;
use crate::error::Class;

pub use check::check;
use open::EpisodeLog;
pub(crate) use open::RabbitMqOpener;

/// How long the confirm task keeps gathering the records whose confirms failed with a
/// closed channel, before it names the cause: they all fail within a moment.
const GATHER_FAILED: Duration = Duration::from_millis(300);

/// A connection and channel to RabbitMQ in confirm mode, with the task that reports each
/// publish's confirm.
pub struct RabbitMqSink {
    connection: Connection,
    channel: Channel,
    deliveries: Arc<DeliveryTracker>,
    /// Publishes, in order, to the confirm task.
    published: mpsc::UnboundedSender<Published>,
    /// Set once the channel or connection failed: nothing more is published (records sent
    /// meanwhile are numbered and never answered, so nothing after them is checkpointed).
    broken: Arc<AtomicBool>,
    exchange: ShortString,
    /// `exchange_from_topic`: each record's exchange is its topic.
    per_topic: bool,
    routing_key: Option<String>,
    max_message_bytes: usize,
    /// How long a publish (written to the socket) and its confirm may take.
    confirm_timeout: Duration,
    confirms: tokio::task::JoinHandle<()>,
}

/// A published record, as the confirm task sees it.
struct Published {
    seq: u64,
    counted: u64,
    id: String,
    topic: String,
    routing_key: String,
    body_len: usize,
    outcome: Outcome,
}

enum Outcome {
    /// Published: its confirm will come.
    Confirm(PublisherConfirm),
    /// `basic.publish` itself failed.
    Failed(lapin::Error),
    /// Not published: the channel had failed already.
    Skipped,
}

impl RabbitMqSink {
    /// Opens a channel on `connection`: checks (or, with `exchange_type`, declares) the
    /// exchange, turns publisher confirms on and starts the confirm task. Errors: a missing
    /// exchange or one of another type, no permission (definite), a lost connection
    /// (transient).
    pub(crate) async fn start(
        connection: Connection,
        cfg: &RabbitMqSinkConfig,
        connector: &str,
        target: Target,
        episodes: EpisodeLog,
    ) -> Result<Self, SinkError> {
        let channel = connection
            .create_channel()
            .await
            .map_err(|e| errors::on_open(&e, &target, "open a channel at"))?;
        if !cfg.exchange.is_empty() {
            let kind = match cfg.exchange_type.as_deref() {
                Some("topic") => ExchangeKind::Topic,
                Some("fanout") => ExchangeKind::Fanout,
                Some("headers") => ExchangeKind::Headers,
                _ => ExchangeKind::Direct,
            };
            let options = ExchangeDeclareOptions {
                passive: cfg.exchange_type.is_none(),
                durable: true,
                ..ExchangeDeclareOptions::default()
            };
            let what = if options.passive { "check" } else { "declare" };
            channel
                .exchange_declare(
                    ShortString::try_new(cfg.exchange.as_str()).unwrap_or_default(),
                    kind,
                    options,
                    FieldTable::default(),
                )
                .await
                .map_err(|e| errors::on_open(&e, &target, what))?;
        }
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| errors::on_open(&e, &target, "turn publisher confirms on at"))?;
        let deliveries = Arc::new(DeliveryTracker::new(KafkaLink::quiet(connector, "")));
        let broken = Arc::new(AtomicBool::new(false));
        let (published, rx) = mpsc::unbounded_channel();
        let confirms = tokio::spawn(confirm_task(
            rx,
            deliveries.clone(),
            Arc::new(target),
            Duration::from_millis(cfg.confirm_timeout_ms),
            broken.clone(),
            episodes,
        ));
        Ok(Self {
            connection,
            channel,
            deliveries,
            published,
            broken,
            exchange: ShortString::try_new(cfg.exchange.as_str()).unwrap_or_default(),
            per_topic: cfg.exchange_from_topic,
            routing_key: cfg.routing_key.clone(),
            max_message_bytes: cfg.max_message_bytes,
            confirm_timeout: Duration::from_millis(cfg.confirm_timeout_ms),
            confirms,
        })
    }

    /// Closes the channel and connection (bounded wait: the broker may be gone).
    pub(crate) async fn close(self) {
        self.confirms.abort();
        if !self.connection.status().connected() {
            return;
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            let _ = self.channel.close(200, "outboxd stops".into()).await;
            let _ = self.connection.close(200, "outboxd stops".into()).await;
        })
        .await;
    }
}

impl RecordSink for RabbitMqSink {
    fn deliveries(&self) -> &DeliveryTracker {
        &self.deliveries
    }

    fn max_record_bytes(&self) -> usize {
        self.max_message_bytes
    }

    fn record_limit(&self) -> crate::sink::RecordLimit {
        crate::sink::RecordLimit::RabbitMq
    }

    async fn send(&self, record: &KafkaRecord) -> Result<(), SinkError> {
        let id = record.event_id();
        let unsendable = |u: message::Unsendable| {
            SinkError::broker_record(BROKER, &id, &record.topic, Some(Refusal::Other), u.0)
        };
        let routing_key =
            message::routing_key(record, self.routing_key.as_deref()).map_err(unsendable)?;
        let properties = message::properties(record).map_err(unsendable)?;
        let exchange = if self.per_topic {
            message::exchange_of(record).map_err(unsendable)?
        } else {
            self.exchange.clone()
        };
        let body = message::body(record);
        let outcome = if self.broken.load(Ordering::Acquire) {
            Outcome::Skipped
        } else if !self.connection.status().connected() || !self.channel.status().connected() {
            // A connection lapin saw end: a publish now would wait for a socket that is gone.
            Outcome::Failed(
                std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "the connection to the broker ended",
                )
                .into(),
            )
        } else {
            let options = BasicPublishOptions {
                mandatory: true,
                immediate: false,
            };
            let publish = self.channel.basic_publish(
                exchange,
                routing_key.clone(),
                options,
                body,
                properties,
            );
            match tokio::time::timeout(self.confirm_timeout, publish).await {
                Ok(Ok(c)) => Outcome::Confirm(c),
                Ok(Err(e)) => Outcome::Failed(e),
                Err(_) => Outcome::Failed(
                    std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "the message could not be written to the broker within {} ms",
                            self.confirm_timeout.as_millis()
                        ),
                    )
                    .into(),
                ),
            }
        };
        if let Outcome::Failed(e) = &outcome {
            tracing::debug!(event_id = %id, "RabbitMQ publish failed: {e}");
        }
        let counted = counted_size(record.approx_size());
        let seq = self.deliveries.enqueue(&record.topic, counted);
        let published = Published {
            seq,
            counted,
            id,
            topic: record.topic.clone(),
            routing_key: routing_key.to_string(),
            body_len: body.len(),
            outcome,
        };
        if self.published.send(published).is_err() {
            return Err(SinkError::broker(
                BROKER,
                Class::Transient,
                "the task reporting publisher confirms ended",
            ));
        }
        Ok(())
    }

    async fn missing_topics(&self, _cause: &SinkError) -> Option<SinkError> {
        // An unroutable message is refused by itself (basic.return); a missing exchange is
        // named when the sink opens or the channel closes.
        None
    }
}

/// Reports each publish's confirm to `deliveries`, in publish order. After a nack or a
/// confirm timeout nothing more is published (`broken`; a later message of the aggregate
/// must not get in ahead of the one sent again). When the channel fails, names the cause
/// once and fails what follows alike.
async fn confirm_task(
    mut rx: mpsc::UnboundedReceiver<Published>,
    deliveries: Arc<DeliveryTracker>,
    target: Arc<Target>,
    timeout: Duration,
    broken: Arc<AtomicBool>,
    episodes: EpisodeLog,
) {
    // Set when a publish was nacked or unconfirmed: nothing more is published (a later
    // message must not get in ahead of it), and what is not published fails with this.
    let mut halted: Option<String> = None;
    while let Some(mut p) = rx.recv().await {
        let target = target.for_topic(&p.topic);
        let target = &target;
        let result = match std::mem::replace(&mut p.outcome, Outcome::Skipped) {
            Outcome::Confirm(c) => match tokio::time::timeout(timeout, c).await {
                Ok(r) => r,
                Err(_) => {
                    let f = SinkError::broker_record(
                        BROKER,
                        &p.id,
                        &p.topic,
                        None,
                        format!(
                            "no publisher confirm for outbox event {} (routing key {}) within \
                             {} ms (a broker blocked by a memory or disk alarm confirms \
                             nothing; see its log); it is sent again from the checkpoint",
                            p.id,
                            p.routing_key,
                            timeout.as_millis()
                        ),
                    );
                    broken.store(true, Ordering::Release);
                    halted = Some(format!("outbox event {} was not confirmed", p.id));
                    deliveries.report(p.seq, p.counted, Err(f));
                    continue;
                }
            },
            Outcome::Failed(e) => Err(e),
            Outcome::Skipped => {
                if let Some(why) = &halted {
                    let f = SinkError::broker_record(
                        BROKER,
                        &p.id,
                        &p.topic,
                        None,
                        format!("outbox event {} was not published: {why}", p.id),
                    );
                    deliveries.report(p.seq, p.counted, Err(f));
                }
                continue;
            }
        };
        match result {
            Ok(Confirmation::Ack(None)) => {
                episodes.confirmed();
                deliveries.report(p.seq, p.counted, Ok(()));
            }
            Ok(Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned))) => {
                let detail = unroutable(
                    target,
                    &p,
                    returned.reply_code,
                    returned.reply_text.as_str(),
                );
                let refusal =
                    SinkError::broker_record(BROKER, &p.id, &p.topic, Some(Refusal::Other), detail);
                deliveries.report(p.seq, p.counted, Err(refusal));
            }
            Ok(Confirmation::Nack(None)) => {
                let f = nacked(target, &p);
                if let SinkError::Broker { detail, .. } = &f {
                    episodes.nacked(&format!("{BROKER}: {detail}"));
                }
                broken.store(true, Ordering::Release);
                halted = Some(format!("outbox event {} before it was nacked", p.id));
                deliveries.report(p.seq, p.counted, Err(f));
            }
            Ok(Confirmation::NotRequested) => {
                let f = SinkError::broker(
                    BROKER,
                    Class::Transient,
                    "a publish was not confirmed: the channel is not in confirm mode",
                );
                deliveries.report(p.seq, p.counted, Err(f));
            }
            Err(e) => {
                tracing::debug!(event_id = %p.id, "RabbitMQ channel failed: {e}");
                broken.store(true, Ordering::Release);
                let repeat = channel_failed(&mut rx, &deliveries, target, &e, p).await;
                // What is sent after it fails alike (the loop then settles at once), except
                // after a refusal: those records are sent again by the replay.
                while let Some(p) = rx.recv().await {
                    if repeat {
                        let f =
                            errors::on_publish(&e, &target.for_topic(&p.topic), &p.id, &p.topic);
                        deliveries.report(p.seq, p.counted, Err(f));
                    }
                }
                return;
            }
        }
    }
}

/// The channel (or connection) failed with `e` while `first` and perhaps later publishes
/// waited: gathers those, then reports a record over the broker's `max_message_size` as
/// refused (the others stay unanswered and are sent again after the replay: returns
/// false), or every gathered record as failed with the classified cause (returns true).
async fn channel_failed(
    rx: &mut mpsc::UnboundedReceiver<Published>,
    deliveries: &DeliveryTracker,
    target: &Target,
    e: &lapin::Error,
    first: Published,
) -> bool {
    let mut failed = vec![first];
    if errors::oversized_body(e).is_some() {
        // Which record it was shows only among those that failed with it.
        while let Ok(Some(p)) = tokio::time::timeout(GATHER_FAILED, rx.recv()).await {
            failed.push(p);
        }
    }
    if let Some((size, limit)) = errors::oversized_body(e) {
        let culprit = failed
            .iter()
            .find(|p| p.body_len == size)
            .or_else(|| limit.and_then(|l| failed.iter().find(|p| p.body_len > l)));
        if let Some(p) = culprit {
            let limit = limit.map_or("its max_message_size".into(), |l| format!("{l} bytes"));
            let detail = format!(
                "the broker refused outbox event {} (routing key {}): its body of {size} bytes \
                 is over the broker's max_message_size ({limit}); raise max_message_size in \
                 rabbitmq.conf, or set max_message_bytes to the broker's limit so such records \
                 are refused before sending",
                p.id, p.routing_key
            );
            let refusal =
                SinkError::broker_record(BROKER, &p.id, &p.topic, Some(Refusal::TooLarge), detail);
            deliveries.report(p.seq, p.counted, Err(refusal));
            return false;
        }
    }
    for p in &failed {
        deliveries.report(
            p.seq,
            p.counted,
            Err(errors::on_publish(e, target, &p.id, &p.topic)),
        );
    }
    true
}

/// Why a returned (unroutable) message was refused, and what to do.
fn unroutable(t: &Target, p: &Published, code: u16, text: &str) -> String {
    let fix = if t.exchange.is_empty() {
        format!(
            "the default exchange routes to the queue named by the routing key: declare a \
             durable queue named \"{}\"",
            p.routing_key
        )
    } else {
        format!(
            "bind a queue to {} with binding key \"{}\" (or a pattern matching it)",
            t.exchange_name(),
            p.routing_key
        )
    };
    format!(
        "no queue is bound for routing key \"{}\" on {} in virtual host \"{}\" (the broker \
         returned outbox event {} as unroutable: {code} {text}); {fix}, or route the topic to \
         a bound key",
        p.routing_key,
        t.exchange_name(),
        t.vhost,
        p.id
    )
}

/// A nack: the broker would not take the message (transient).
fn nacked(t: &Target, p: &Published) -> SinkError {
    let queue = if t.exchange.is_empty() {
        format!("queue \"{}\"", p.routing_key)
    } else {
        format!(
            "a queue bound to routing key \"{}\" on {}",
            p.routing_key,
            t.exchange_name()
        )
    };
    SinkError::broker_record(
        BROKER,
        &p.id,
        &p.topic,
        None,
        format!(
            "{queue} is full (x-max-length or x-max-length-bytes with x-overflow = \
             reject-publish), or the broker could not store outbox event {} (basic.nack); \
             consumers must catch up: it is sent again from the checkpoint",
            p.id
        ),
    )
}
