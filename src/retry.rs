//! The process's one retry rule: whether and when to try again after a failed attempt.
//!
//! [`Retry`] is used by the source supervisor ([`crate::source::supervise`], its
//! reconnects), by the connector (its restarts from the checkpoint) and by a group member
//! (creating the group's coordination topics): a definite failure is not retried, a
//! transient one after a [`Backoff`] wait, and an attempt that made progress or lasted
//! [`HEALTHY_RUN`] ends the streak of failures (the next wait is the first one again). What
//! is transient and what definite is each error's `class()`, decided in its own layer; this
//! module imports only the [`Class`] leaf.

use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::error::Class;

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
