//! The supervision of a source, retried by the process's one retry rule
//! ([`crate::retry::Retry`]).
//!
//! A source session that fails transiently (connection lost, server restarting) is followed
//! by a new one after a backoff, resuming at the position after the last transaction handed
//! on ([`super::Outlet::resume_position`]), so nothing is skipped and nothing repeated. Two
//! failures go to the delivery loop instead, which stops with them: a definite one (the
//! connector stops), and any failure after rows of an unfinished transaction were handed on
//! (a new session would send those rows again after the partial copy; the connector restarts
//! from its checkpoint, exactly-once aborting what it had started). A source whose connector
//! is no longer this member's ([`crate::lease::Lease`]) does not reconnect.

use std::time::{Duration, Instant};

use super::{Source, SourceContext};
use crate::error::Class;
use crate::health::ConnectorState;
use crate::lease::NotOwner;
use crate::metrics as m;
use crate::retry::{sleep_before_retry, Retry};

/// How often a source that keeps failing the same way is reported again at WARN; the
/// attempts in between are logged at DEBUG.
pub(crate) const REMINDER_INTERVAL: Duration = Duration::from_secs(60);

/// The failed attempts of a source since it last streamed: one WARN for the first failure
/// (and for a failure that says something else), a reminder every [`REMINDER_INTERVAL`], one
/// INFO when the source streams again — not a WARN every few seconds of an outage.
#[derive(Debug)]
pub(crate) struct FailingStreak {
    /// The stream, for the lines (`binlog`, `PostgreSQL replication`).
    what: &'static str,
    since: Instant,
    attempts: u32,
    last: String,
    warned_at: Instant,
}

impl FailingStreak {
    /// Notes a failed attempt of stream `what` with `message` at `now`; returns whether it is
    /// worth a WARN, and for how long the source has been failing.
    fn note(
        streak: &mut Option<Self>,
        what: &'static str,
        message: &str,
        now: Instant,
    ) -> (bool, Duration) {
        let Some(s) = streak else {
            *streak = Some(Self {
                what,
                since: now,
                attempts: 1,
                last: message.to_string(),
                warned_at: now,
            });
            return (true, Duration::ZERO);
        };
        s.attempts += 1;
        let warn = s.last != message || now.duration_since(s.warned_at) >= REMINDER_INTERVAL;
        if warn {
            s.warned_at = now;
            message.clone_into(&mut s.last);
        }
        (warn, now.duration_since(s.since))
    }

    /// The source streams again: one INFO line for connector `connector`.
    pub(crate) fn ended(self, connector: &str) {
        let after = self.since.elapsed().as_secs_f64();
        tracing::info!(
            connector,
            failed_attempts = self.attempts,
            "{} streaming again after {after:.1}s and {} failed attempt(s)",
            self.what,
            self.attempts
        );
    }
}

/// Longest wait between reconnection attempts of a source.
pub(crate) const MAX_RECONNECT_BACKOFF: Duration = Duration::from_secs(30);

/// Runs `source`'s sessions until the delivery loop stops receiving, shutdown, or a failure
/// the loop must handle (sent to it through `ctx.out`).
pub(crate) async fn run<S: Source>(mut source: S, mut ctx: SourceContext) {
    let mut retry = Retry::new(source.reconnect_backoff_max());
    let stats = m::StreamingStats::of(&ctx.connector);
    loop {
        if !ctx.lease.held() {
            // Another member owns the connector now: reconnecting could take the source away
            // from it (the same server_id, the slot), and what failed here is no news.
            ctx.out
                .fail(
                    NotOwner {
                        connector: ctx.connector.clone(),
                    }
                    .into(),
                )
                .await;
            return;
        }
        retry.attempt();
        let result = source.session(&mut ctx).await;
        stats.set_connected(false);
        let was_streaming = std::mem::take(&mut ctx.connected);
        let streamed = ctx.out.take_streamed();
        let error = match result {
            Ok(()) => return,
            Err(e) => source.escalate(e),
        };
        if ctx.out.mid_transaction() || *ctx.shutdown.borrow() {
            ctx.out.fail(error).await;
            return;
        }
        if !ctx.lease.held() {
            continue;
        }
        let Some(wait) = retry.after_failure(error.class(), streamed) else {
            ctx.out.fail(error).await;
            return;
        };
        // A connection that never streamed is not "lost": say what stops it from starting.
        let what = if was_streaming {
            format!("{} connection lost, reconnecting", source.stream_name())
        } else {
            format!("{} stream could not start, retrying", source.stream_name())
        };
        // One decimal: the first waits are about a second, with jitter.
        let in_s = format!("{:.1}", wait.as_secs_f64());
        ctx.health.set_because(
            &ctx.connector,
            ConnectorState::Retrying,
            format!("{what} in {in_s}s: {error}"),
        );
        metrics::counter!(m::ERRORS, m::LABEL_CONNECTOR => ctx.connector.clone(), m::LABEL_KIND => Class::Transient.label()).increment(1);
        let message = error.to_string();
        let (warn, failing_for) = FailingStreak::note(
            &mut ctx.failing,
            source.stream_name(),
            &message,
            Instant::now(),
        );
        if !warn {
            tracing::debug!(connector = %ctx.connector, retry_in_s = %in_s, "{what} in {in_s}s: {message}");
        } else if failing_for.is_zero() {
            tracing::warn!(connector = %ctx.connector, retry_in_s = %in_s, "{what} in {in_s}s: {message}");
        } else {
            let for_s = failing_for.as_secs();
            tracing::warn!(connector = %ctx.connector, retry_in_s = %in_s, failing_for_s = for_s,
                "{what} in {in_s}s (failing for {for_s}s; the same failure is logged again at most every {}s): {message}",
                REMINDER_INTERVAL.as_secs());
        }
        ctx.retry.retrying(wait, error);
        if !sleep_before_retry(wait, &ctx.shutdown).await {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streak_warns_once_then_on_news_and_at_the_reminder() {
        let t0 = Instant::now();
        let mut streak = None;
        let at = |s| t0 + Duration::from_secs(s);
        let note = |streak: &mut Option<FailingStreak>, m: &str, t| {
            FailingStreak::note(streak, "binlog", m, t).0
        };
        assert!(note(&mut streak, "refused", at(0)), "the first failure");
        assert!(!note(&mut streak, "refused", at(3)), "the same again");
        assert!(note(&mut streak, "timed out", at(6)), "another failure");
        assert!(!note(&mut streak, "timed out", at(30)));
        assert!(note(&mut streak, "timed out", at(66)), "the reminder");
        let s = streak.take().unwrap();
        assert_eq!(s.attempts, 5);
    }
}
