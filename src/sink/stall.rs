//! Noticing a producer that holds records although Kafka answers again.
//!
//! After a broker outage librdkafka normally resumes on its own: it reconnects, refreshes the
//! partition leaders and sends what it queued. Not always: after a single-node KRaft broker
//! was frozen for 30 s (SIGSTOP, SIGCONT), its controller fenced it for a moment (every
//! partition without a leader), and the producer's client neither reconnected nor delivered
//! for 25 s, until its records failed at `message.timeout.ms`, while a new client connected
//! at once (`benches/faults`).
//!
//! [`watch`] runs beside each producer. While records wait and no delivery report came for
//! [`QUIET_FOR`], it asks the cluster for metadata through a new client of its own (the
//! producer's client may be the one stuck), with the producer's settings. No answer: the
//! outage goes on, and it waits; when librdkafka reported no outage (a frozen broker keeps
//! its TCP connections open), the watch tells the [`KafkaLink`] the cluster does not answer
//! (its WARN, readiness), until a report or a probe's answer. An answer, and still no report
//! for [`STALLED_AFTER`]: the producer is stalled. The watch then fails its deliveries with
//! [`SinkError::Stalled`] (transient), so the delivery loop ends the batch (the exactly-once
//! loop aborts its transaction) and the connector restarts from its checkpoint on a new
//! producer, with a WARN — seconds after the cluster answers, not at the message timeout.
//!
//! [`KafkaLink`]: super::link::KafkaLink

use std::sync::Weak;
use std::time::{Duration, Instant, SystemTime};

use rdkafka::producer::{BaseProducer, Producer};
use rdkafka::ClientConfig;

use super::error::SinkError;
use super::kafka::TrackedProducer;
use super::link::KafkaLink;
use super::tracker::DeliveryTracker;

/// How long records may wait without a delivery report before the cluster is asked.
pub const QUIET_FOR: Duration = Duration::from_secs(2);

/// How long after the cluster answered records may still wait without a report before the
/// producer counts as stalled.
pub const STALLED_AFTER: Duration = Duration::from_secs(2);

/// How long the metadata request may take (a frozen broker does not answer at all).
const METADATA_TIMEOUT: Duration = Duration::from_secs(2);

/// The settings of the probe client: the producer's `settings` (bootstrap servers, security,
/// `kafka.producer` overrides) without its transactional id or idempotence, which would make
/// the probe register a producer id with the cluster.
pub(super) fn probe_settings(settings: &ClientConfig) -> ClientConfig {
    let mut probe = settings.clone();
    probe.remove("transactional.id");
    probe
        .set("enable.idempotence", "false")
        .set("statistics.interval.ms", "0");
    probe
}

/// Whether the cluster answers a metadata request of a new client with `settings` within
/// [`METADATA_TIMEOUT`]. The client's log lines go to a quiet link (DEBUG).
fn cluster_answers(settings: &ClientConfig) -> bool {
    let bootstrap = settings.get("bootstrap.servers").unwrap_or_default();
    let context = DeliveryTracker::new(KafkaLink::quiet("stall probe", bootstrap));
    match super::client::create::<BaseProducer<_>, _>(settings, context) {
        Ok(client) => client
            .client()
            .fetch_metadata(None, METADATA_TIMEOUT)
            .is_ok(),
        Err(_) => false,
    }
}

/// What a silent cluster did not answer, for the link's lines: `waiting` records without a
/// delivery report for `quiet`, and the probe's metadata request.
fn silence(waiting: u64, quiet: Duration) -> String {
    format!(
        "{waiting} record(s) got no delivery report for {}s and a new client's metadata \
         request got no answer within {}s",
        quiet.as_secs(),
        METADATA_TIMEOUT.as_secs()
    )
}

/// How often the watch looks at the delivery counters.
const TICK: Duration = Duration::from_millis(500);

/// Where a watch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reports arrive, or nothing waits.
    Flowing,
    /// Records wait without a report since then; the cluster has not answered yet.
    Quiet(Instant),
    /// Records wait without a report since the first instant; the cluster answered at the
    /// second.
    Answered(Instant, Instant),
}

/// The next phase after a look at the counters: `progressed` (a report since the last look, or
/// nothing waiting) and, in a quiet phase, whether the cluster answered a metadata request.
fn step(phase: Phase, progressed: bool, now: Instant) -> Phase {
    match phase {
        _ if progressed => Phase::Flowing,
        Phase::Flowing => Phase::Quiet(now),
        other => other,
    }
}

/// Watches `producer` until it is dropped (see the module docs); `probe` holds the settings
/// of the probe client ([`probe_settings`]).
pub(super) async fn watch(producer: Weak<TrackedProducer>, probe: ClientConfig, connector: String) {
    let mut phase = Phase::Flowing;
    let mut last_reports = None;
    // When the current quiet phase began, by the wall clock (for the link's lines).
    let mut quiet_at = SystemTime::now();
    loop {
        tokio::time::sleep(TICK).await;
        let Some(p) = producer.upgrade() else { return };
        let tracker = p.context();
        let (waiting, _) = tracker.unacked();
        let reports = tracker.reports();
        let progressed =
            waiting == 0 || last_reports != Some(reports) || tracker.failure().is_some();
        last_reports = Some(reports);
        let now = Instant::now();
        let before = phase;
        phase = step(phase, progressed, now);
        if before == Phase::Flowing && phase != Phase::Flowing {
            quiet_at = SystemTime::now();
        }
        match phase {
            Phase::Quiet(since) if now.duration_since(since) >= QUIET_FOR => {
                let link = tracker.link().clone();
                drop(p);
                let settings = probe.clone();
                let answered = tokio::task::spawn_blocking(move || cluster_answers(&settings))
                    .await
                    .unwrap_or(false);
                if answered {
                    tracing::debug!(connector, waiting, "records wait although Kafka answers");
                    link.answered();
                    phase = Phase::Answered(since, Instant::now());
                } else {
                    link.unresponsive(&silence(waiting, since.elapsed()), (since, quiet_at));
                }
            }
            Phase::Answered(since, at) if now.duration_since(at) >= STALLED_AFTER => {
                tracker.stalled(SinkError::Stalled {
                    records: waiting,
                    quiet: now.duration_since(since),
                });
                tracing::debug!(connector, waiting, "producer stalled");
                phase = Phase::Flowing;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_or_an_empty_queue_resets_the_watch() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(step(Phase::Flowing, true, t0), Phase::Flowing);
        assert_eq!(step(Phase::Flowing, false, t0), Phase::Quiet(t0));
        assert_eq!(
            step(Phase::Quiet(t0), false, t1),
            Phase::Quiet(t0),
            "quiet since the first look"
        );
        assert_eq!(
            step(Phase::Answered(t0, t1), false, t1),
            Phase::Answered(t0, t1)
        );
        assert_eq!(step(Phase::Answered(t0, t1), true, t1), Phase::Flowing);
        assert_eq!(step(Phase::Quiet(t0), true, t1), Phase::Flowing);
    }
}
