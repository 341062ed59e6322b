//! Resource use of a child process from Linux `/proc` (proc(5)): resident set size and
//! CPU time, summed over all its threads.

/// `/proc/<pid>/stat` reports CPU time in clock ticks of USER_HZ, which is 100 on Linux.
const USER_HZ: f64 = 100.0;

/// A sample of one process.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// Peak resident set size so far (VmHWM), in KiB.
    pub hwm_kib: u64,
    /// Resident set size now (VmRSS), in KiB.
    pub rss_kib: u64,
    /// User + system CPU time so far, in seconds.
    pub cpu_s: f64,
}

/// Reads the sample of `pid`; `None` when the process is gone.
pub fn sample(pid: u32) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields = stat_fields(&stat)?;
    Some(Sample {
        hwm_kib: kib("VmHWM:"),
        rss_kib: kib("VmRSS:"),
        cpu_s: stat_cpu_s(&fields)?,
    })
}

/// The fields of a `/proc/<pid>/stat` line after the command name (which is in parentheses
/// and may contain spaces): index 0 is field 3 (state), so field N is at N - 3.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    Some(stat[stat.rfind(')')? + 2..].split_whitespace().collect())
}

/// User + system CPU seconds in a parsed `/proc/<pid>/stat` (fields 14 and 15).
fn stat_cpu_s(fields: &[&str]) -> Option<f64> {
    let ticks = |i: usize| fields.get(i - 3).and_then(|v| v.parse::<f64>().ok());
    Some((ticks(14)? + ticks(15)?) / USER_HZ)
}

/// For each of `pids`: CPU seconds (user + system) of it and its live child processes (a
/// PostgreSQL postmaster's backends and walsenders); `None` when that pid is gone. Children
/// that exited take their time with them, so this is for processes that live through the
/// measurement. One pass over `/proc`, one read of each process's `stat`: the collector
/// calls it every 20 ms while a lane waits for its first record, on the measured machine.
pub fn trees_cpu_s(pids: &[u32]) -> Vec<Option<f64>> {
    let mut own: Vec<Option<f64>> = vec![None; pids.len()];
    let mut children = vec![0.0; pids.len()];
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let Some(fields) = stat_fields(&stat) else {
                continue;
            };
            // ppid is field 4.
            let ppid = fields.get(4 - 3).and_then(|v| v.parse::<u32>().ok());
            for (i, &wanted) in pids.iter().enumerate() {
                if pid == wanted {
                    own[i] = stat_cpu_s(&fields);
                } else if ppid == Some(wanted) {
                    children[i] += stat_cpu_s(&fields).unwrap_or(0.0);
                }
            }
        }
    }
    own.into_iter()
        .zip(children)
        .map(|(own, children)| Some(own? + children))
        .collect()
}
