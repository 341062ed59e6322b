//! Durations measured per fault and source, and the page they are reported on: shared by
//! `benches/failover` and `benches/faults`.

/// Measured durations, in seconds, per (fault, source), in the order measured.
#[derive(Default)]
pub struct Timings {
    runs: Vec<(String, String, f64)>,
}

impl Timings {
    /// Notes one measurement.
    pub fn add(&mut self, fault: &str, source: &str, seconds: f64) {
        self.runs.push((fault.into(), source.into(), seconds));
    }

    /// The (fault, source) pairs, in the order first measured.
    fn keys(&self) -> Vec<(&str, &str)> {
        let mut keys: Vec<(&str, &str)> = Vec::new();
        for (f, s, _) in &self.runs {
            if !keys.contains(&(f.as_str(), s.as_str())) {
                keys.push((f, s));
            }
        }
        keys
    }

    /// The measurements of one pair, in the order measured.
    fn of(&self, fault: &str, source: &str) -> Vec<f64> {
        self.runs
            .iter()
            .filter(|(f, s, _)| f == fault && s == source)
            .map(|(_, _, t)| *t)
            .collect()
    }

    /// A Markdown table, a row per pair: runs, min, median, max, every value; with `goal`
    /// (seconds), a column counting the runs at or over it.
    pub fn table(&self, goal: Option<f64>) -> String {
        let over = goal.map_or(String::new(), |g| format!(" over {g} s |"));
        let rule = if goal.is_some() { "---|" } else { "" };
        let mut table = format!(
            "| fault | source | runs | min s | median s | max s |{over} all (s) |\n\
             |---|---|---|---|---|---|{rule}---|\n"
        );
        for (fault, source) in self.keys() {
            let all = self.of(fault, source);
            let mut sorted = all.clone();
            sorted.sort_by(f64::total_cmp);
            let over = goal.map_or(String::new(), |g| {
                format!(" {} |", all.iter().filter(|t| **t >= g).count())
            });
            let listed = all
                .iter()
                .map(|t| format!("{t:.2}"))
                .collect::<Vec<_>>()
                .join(", ");
            table.push_str(&format!(
                "| {fault} | {source} | {} | {:.2} | {:.2} | {:.2} |{over} {listed} |\n",
                all.len(),
                sorted[0],
                sorted[sorted.len() / 2],
                sorted[sorted.len() - 1],
            ));
        }
        table
    }

    /// `{"runs": [{"fault", "source", "seconds": [...]}, ...]}`.
    pub fn json(&self) -> serde_json::Value {
        let runs: Vec<_> = self
            .keys()
            .into_iter()
            .map(|(f, s)| serde_json::json!({"fault": f, "source": s, "seconds": self.of(f, s)}))
            .collect();
        serde_json::json!({ "runs": runs })
    }
}

/// The 1-minute load average (`/proc/loadavg`), to read the figures against.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// The machine's cores, for the reports.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The current UTC time as `YYYY-MM-DD HH:MM:SS UTC` (no date crate in the benches).
pub fn utc_now() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M:%S UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}
