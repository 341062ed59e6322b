//! The Lua script that commits a batch: the epoch check, the key-type checks, every `XADD`
//! and the checkpoint `SET`, in one `EVAL`.
//!
//! Why a script and not `MULTI`/`EXEC`: Redis does not roll back a transaction's queued
//! commands that fail when `EXEC` runs them (an `XADD` to a key holding a list answers
//! `WRONGTYPE` while the commands around it, the checkpoint `SET` among them, still apply),
//! so a `MULTI` batch could move the checkpoint past records that were never written. A
//! script runs atomically too (no other client's command runs in between) and does not roll
//! back either, but it can check *first* and write only when every write will succeed:
//!
//! 1. `GET <checkpoint_key>:epoch` must be this instance's epoch, else nothing is written
//!    (`OUTBOXD_FENCED`): a newer instance took over.
//! 2. `TYPE` of every stream key of the batch must be `stream` or `none`, and that of the
//!    checkpoint key `string` or `none`, else nothing is written (`OUTBOXD_WRONGTYPE`).
//! 3. The `XADD`s in order, then the `SET` of the checkpoint.
//!
//! What remains that could fail during step 3 is what no check can foresee (the server
//! killed mid-script: then the append-only file holds none of the script, as Redis logs a
//! script's effects as one `MULTI`/`EXEC` block). Over `maxmemory`, Redis refuses the first
//! write of a script that has not written yet (`OOM`): that is the first `XADD`, before
//! anything is written. The script has no shebang line, so it runs on Redis 6.2 and 7.
//!
//! Arguments: `KEYS` = epoch key, checkpoint key, then the batch's distinct stream keys;
//! `ARGV` = epoch, checkpoint JSON, `MAXLEN` (empty: no trimming), record count, then per
//! record: its stream's index among the stream keys (1-based), its field count `n`, and
//! `2n` field names and values.

/// The script's source.
pub(crate) const COMMIT: &str = r#"
local epoch = redis.call('GET', KEYS[1])
if epoch ~= ARGV[1] then
  return redis.error_reply('OUTBOXD_FENCED ' .. tostring(epoch))
end
local ct = redis.call('TYPE', KEYS[2])['ok']
if ct ~= 'string' and ct ~= 'none' then
  return redis.error_reply('OUTBOXD_WRONGTYPE 0 ' .. ct)
end
for i = 3, #KEYS do
  local t = redis.call('TYPE', KEYS[i])['ok']
  if t ~= 'stream' and t ~= 'none' then
    return redis.error_reply('OUTBOXD_WRONGTYPE ' .. (i - 2) .. ' ' .. t)
  end
end
local n = tonumber(ARGV[4])
local p = 5
for r = 1, n do
  local args
  if ARGV[3] ~= '' then
    args = {KEYS[2 + tonumber(ARGV[p])], 'MAXLEN', '~', ARGV[3], '*'}
  else
    args = {KEYS[2 + tonumber(ARGV[p])], '*'}
  end
  local nf = tonumber(ARGV[p + 1])
  for f = 1, 2 * nf do
    args[#args + 1] = ARGV[p + 1 + f]
  end
  redis.call('XADD', unpack(args))
  p = p + 2 + 2 * nf
end
redis.call('SET', KEYS[2], ARGV[2])
return n
"#;

/// The error code the script answers with when the epoch is not this instance's.
pub(crate) const FENCED: &str = "OUTBOXD_FENCED";
/// The error code the script answers with when a key holds the wrong type.
pub(crate) const WRONG_TYPE: &str = "OUTBOXD_WRONGTYPE";

/// A wrong-type answer's details: which key (0: the checkpoint key, `i` ≥ 1: the `i`-th
/// stream key) and the type it holds.
pub(crate) fn wrong_type(detail: &str) -> Option<(usize, &str)> {
    let mut parts = detail.split_whitespace();
    let index = parts.next()?.parse().ok()?;
    Some((index, parts.next()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_type_details_parse() {
        assert_eq!(wrong_type("2 list"), Some((2, "list")));
        assert_eq!(wrong_type("0 hash"), Some((0, "hash")));
        assert_eq!(wrong_type("x"), None);
    }
}
