//! Retries, and the supervision of a source.
//!
//! [`Retry`] is the one retry rule of the process, used by the source supervisor below (its
//! reconnects), by the connector (its restarts from the checkpoint) and by a group member
//! (creating the group's coordination topics): a definite failure is not retried, a
//! transient one after a [`Backoff`] wait, and an attempt that made progress or lasted
//! [`HEALTHY_RUN`] ends the streak of failures (the next wait is the first one again). What
//! is transient and what definite is each error's `class()`, decided in its own layer.
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

use tokio::sync::watch;

use super::{Source, SourceContext};
use crate::error::{Class, Error};
use crate::health::ConnectorState;
use crate::metrics as m;

/// The first wait after a failure.
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// For this long after the first failure of a streak, waits stay at most [`EARLY_CAP`]: a
/// server back after a short outage is found within a few seconds, not after a wait that
/// doubled while it was down.
pub(crate) const EARLY_PHASE: Duration = Duration::from_secs(60);

/// The longest wait during [`EARLY_PHASE`].
pub(crate) const EARLY_CAP: Duration = Duration::from_secs(3);

/// Backoff between retries: 1 s, doubling, but at most [`EARLY_CAP`] during the first
/// [`EARLY_PHASE`] of a streak of failures and at most `max` after; each wait is spread by
/// ±20% (jitter), so members and connectors that failed together do not retry in lockstep.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    next: Duration,
    max: Duration,
    /// When the current streak of failures began.
    streak_since: Option<Instant>,
}

impl Backoff {
    /// A backoff doubling from [`FIRST_BACKOFF`] up to `max`.
    pub(crate) fn new(max: Duration) -> Self {
        Self {
            next: FIRST_BACKOFF.min(max),
            max,
            streak_since: None,
        }
    }

    /// Back to the first wait, and a new streak (after a run that worked for a while).
    pub(crate) fn reset(&mut self) {
        self.next = FIRST_BACKOFF.min(self.max);
        self.streak_since = None;
    }

    /// The wait before the next retry; the one after it is doubled.
    pub(crate) fn next_wait(&mut self) -> Duration {
        let since = *self.streak_since.get_or_insert_with(Instant::now);
        let cap = if since.elapsed() < EARLY_PHASE {
            EARLY_CAP.min(self.max)
        } else {
            self.max
        };
        let wait = self.next.min(cap);
        self.next = (self.next * 2).min(self.max);
        jitter(wait)
    }
}

/// `wait` spread by up to ±20%, from the clock's nanoseconds (no need for a random source of
/// quality: only lockstep is to be avoided).
fn jitter(wait: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mixed =
        (u64::from(nanos) ^ u64::from(std::process::id())).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // 0.8 ..= 1.2
    let factor = 0.8 + (mixed >> 11) as f64 / (1u64 << 53) as f64 * 0.4;
    wait.mul_f64(factor)
}

/// An attempt that lasted this long ends the streak of failures, like one that made
/// progress: its failure is a new incident, retried after the first wait again.
pub(crate) const HEALTHY_RUN: Duration = Duration::from_secs(60);

/// The retry rule: whether and when to try again after a failed attempt.
#[derive(Debug, Clone)]
pub(crate) struct Retry {
    backoff: Backoff,
    attempt_started: Instant,
}

impl Retry {
    /// Retries waiting up to `max` (see [`Backoff`]).
    pub(crate) fn new(max: Duration) -> Self {
        Self {
            backoff: Backoff::new(max),
            attempt_started: Instant::now(),
        }
    }

    /// An attempt starts now (how long it lasts decides whether its failure ends a streak).
    pub(crate) fn attempt(&mut self) {
        self.attempt_started = Instant::now();
    }

    /// After the attempt failed with an error of `class`: `None` when it is not to be
    /// retried (definite), else the wait before the next attempt. `progressed`: it did what
    /// it is for before failing (a source session that handed events on); such an attempt, or
    /// one that lasted [`HEALTHY_RUN`], ends the streak of failures first.
    pub(crate) fn after_failure(&mut self, class: Class, progressed: bool) -> Option<Duration> {
        if class == Class::Definite {
            return None;
        }
        if progressed || self.attempt_started.elapsed() >= HEALTHY_RUN {
            self.backoff.reset();
        }
        Some(self.backoff.next_wait())
    }
}

/// Sleeps `wait` before a retry. Returns `false`, early, when `shutdown` turns true first: do
/// not retry then. So no retry holds a stopping process for its backoff.
pub(crate) async fn sleep_before_retry(wait: Duration, shutdown: &watch::Receiver<bool>) -> bool {
    let mut shutdown = shutdown.clone();
    tokio::select! {
        _ = tokio::time::sleep(wait) => true,
        _ = shutdown.wait_for(|v| *v) => false,
    }
}

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
                .fail(Error::NotOwner {
                    connector: ctx.connector.clone(),
                })
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

    fn within(wait: Duration, nominal: Duration) -> bool {
        wait >= nominal.mul_f64(0.79) && wait <= nominal.mul_f64(1.21)
    }

    #[test]
    fn backoff_stays_short_for_a_minute_then_doubles_to_its_cap() {
        let mut b = Backoff::new(Duration::from_secs(30));
        let waits: Vec<Duration> = (0..6).map(|_| b.next_wait()).collect();
        for (w, nominal) in waits.iter().zip([1, 2, 3, 3, 3, 3]) {
            assert!(within(*w, Duration::from_secs(nominal)), "{waits:?}");
        }
        // A streak older than a minute: the doubling shows up to the cap.
        b.streak_since = Some(Instant::now() - EARLY_PHASE);
        let later: Vec<Duration> = (0..2).map(|_| b.next_wait()).collect();
        assert!(within(later[0], Duration::from_secs(30)), "{later:?}");
        b.reset();
        assert!(within(b.next_wait(), FIRST_BACKOFF));
    }

    #[test]
    fn definite_failures_are_not_retried_and_progress_ends_a_streak() {
        let mut r = Retry::new(Duration::from_secs(30));
        assert_eq!(r.after_failure(Class::Definite, false), None);
        let waits: Vec<Duration> = (0..3)
            .map(|_| {
                r.attempt();
                r.after_failure(Class::Transient, false).unwrap()
            })
            .collect();
        for (w, nominal) in waits.iter().zip([1, 2, 3]) {
            assert!(within(*w, Duration::from_secs(nominal)), "{waits:?}");
        }
        r.attempt();
        let w = r.after_failure(Class::Transient, true).unwrap();
        assert!(within(w, FIRST_BACKOFF), "{w:?}");
        // An attempt that lasted a healthy run counts as progress.
        r.after_failure(Class::Transient, false);
        r.attempt_started = Instant::now() - HEALTHY_RUN;
        let w = r.after_failure(Class::Transient, false).unwrap();
        assert!(within(w, FIRST_BACKOFF), "{w:?}");
    }

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

    #[tokio::test]
    async fn a_shutdown_cuts_the_wait_short() {
        let (tx, rx) = watch::channel(false);
        let waiting =
            tokio::spawn(async move { sleep_before_retry(Duration::from_secs(60), &rx).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        tx.send(true).unwrap();
        let retry = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the shutdown ends the wait")
            .unwrap();
        assert!(!retry);
    }
}
