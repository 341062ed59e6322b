//! The wall clock, as checkpoints, metrics and records state times: a leaf.

/// Current wall-clock time in milliseconds since the Unix epoch (0 for a clock before it).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
