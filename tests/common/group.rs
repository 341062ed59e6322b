//! Members of one `--group` as real processes of the built binary, for the sinks' failover
//! tests: two members run the same connector file (its `[metrics]` taken out: each member
//! gets its own `--metrics-listen`), the owner of the connector (`outboxd_connector_owned` =
//! 1 in its `/metrics`) is killed (`kill -9`) while a writer inserts, the other takes over.
//! The group lives in the test Kafka cluster (`OUTBOXD_KAFKA_BOOTSTRAP`), which these
//! helpers neither stop nor restart.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::relay::{free_port, http_get_within, Relay};
use super::suite::{self, SourceDb};
use super::OutboxEvent;

/// The aggregate type the writer inserts (10 aggregates, sequenced payloads).
pub const AGGREGATE: &str = "Wallet";

/// Removes the `[metrics]` table (everything before `[[connectors]]`) from the connector
/// file at `path`, so that members started on it take their listener from the command line.
pub fn member_file(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let body = text
        .split_once("[[connectors]]")
        .map(|(_, rest)| format!("[[connectors]]{rest}"))
        .expect("a [[connectors]] table");
    std::fs::write(path, body).unwrap();
}

/// Starts (without waiting for readiness) a member of `group` running `files`, logging to
/// `log`, with a metrics listener of its own.
pub fn launch(files: &[&Path], group: &str, log: PathBuf) -> Relay {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut args: Vec<&str> = files.iter().map(|f| f.to_str().unwrap()).collect();
    args.extend(["--group", group, "--metrics-listen", &listen]);
    Relay::launch_with_args(&args, port, log)
}

/// Whether `member` (a running process) runs `connector` now.
pub fn owns(member: &Relay, connector: &str) -> bool {
    member.pid().is_some()
        && http_get_within(member.metrics_port, "/metrics", Duration::from_secs(1)).is_some_and(
            |(_, m)| {
                m.contains(&format!(
                    "outboxd_connector_owned{{connector=\"{connector}\"}} 1"
                ))
            },
        )
}

/// Waits until one of `members` runs `connector`; its index. Panics with every member's log
/// after `timeout`.
pub fn wait_owner(members: &[Relay], connector: &str, timeout: Duration) -> usize {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(i) = members.iter().position(|m| owns(m, connector)) {
            return i;
        }
        assert!(
            Instant::now() < deadline,
            "no member runs {connector} after {timeout:?}; logs:\n{}",
            logs(members)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every member's log (the last 6,000 bytes each), for failure messages.
pub fn logs(members: &[Relay]) -> String {
    members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let log = m.log_text();
            let mut from = log.len().saturating_sub(6000);
            while !log.is_char_boundary(from) {
                from += 1;
            }
            format!("--- member {i}:\n{}", &log[from..])
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Two members of a new group run `db`'s connector from `file` (its `[metrics]` removed);
/// while a writer inserts [`AGGREGATE`] events in transactions of 1 to 12 rows, the owner of
/// the connector is killed (`kill -9`) `rounds` times, 1 to 3 s after the previous takeover:
/// each time the other member must take the connector over (within 60 s; the session timeout
/// is 6 s), and the killed one is started again as its standby. The writer goes on for a
/// second after the last takeover. Returns the members (still running) and every event
/// written, for the caller to read its sink and count.
pub async fn failover_under_a_writer<S: SourceDb>(
    db: &S,
    file: &Path,
    rounds: usize,
) -> (Vec<Relay>, Vec<OutboxEvent>) {
    member_file(file);
    let group = super::unique("group");
    let dir = file.parent().unwrap();
    let mut members: Vec<Relay> = (0..2)
        .map(|i| launch(&[file], &group, dir.join(format!("member{i}.log"))))
        .collect();
    for m in &mut members {
        m.wait_ready(Duration::from_secs(60));
    }
    let connector = db.name().to_string();
    wait_owner(&members, &connector, Duration::from_secs(60));
    let stop = Arc::new(AtomicBool::new(false));
    let killer = {
        let stop = stop.clone();
        tokio::task::spawn_blocking(move || {
            // However the rounds end, the writer stops.
            let _stop = suite::scopeguard(move || stop.store(true, Ordering::Relaxed));
            for _ in 0..rounds {
                std::thread::sleep(Duration::from_millis(1000 + rand::random::<u64>() % 2000));
                let owner = wait_owner(&members, &connector, Duration::from_secs(60));
                members[owner].kill9();
                let next = wait_owner(&members, &connector, Duration::from_secs(60));
                assert_ne!(next, owner, "a killed member cannot own the connector");
                members[owner].spawn();
                members[owner].wait_ready(Duration::from_secs(60));
            }
            std::thread::sleep(Duration::from_secs(1));
            members
        })
    };
    let (events, members) = tokio::join!(write_until(db, &stop), killer);
    (members.expect("the failover rounds"), events)
}

/// Inserts sequenced [`AGGREGATE`] events (10 aggregates) in transactions of 1 to 12 rows,
/// 5 to 25 ms apart, until `stop` (or 20,000 events); returns them in commit order.
async fn write_until<S: SourceDb>(db: &S, stop: &AtomicBool) -> Vec<OutboxEvent> {
    let mut all: Vec<OutboxEvent> = Vec::new();
    while !stop.load(Ordering::Relaxed) && all.len() < 20_000 {
        let n = 1 + rand::random::<u32>() as usize % 12;
        let batch = suite::sequenced_range(AGGREGATE, 10, all.len()..all.len() + n, 50);
        db.insert(&batch, false).await;
        all.extend(batch);
        tokio::time::sleep(Duration::from_millis(5 + rand::random::<u64>() % 20)).await;
    }
    all
}
