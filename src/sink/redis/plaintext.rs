//! Telling a plaintext Redis port from an unreachable one when `rediss://` fails.
//!
//! A Redis port without TLS does not answer a TLS handshake: it reads the client's
//! `ClientHello` as the start of an inline command and waits for its end of line, so the
//! client sees its connect time out, the kind of failure an outage gives (redis-rs reports
//! both as an I/O `TimedOut`). To keep that mistake from being retried for ever as "not
//! reachable", a TLS connection that timed out (or whose handshake read bytes that are not
//! TLS) is followed by one plain `PING` to the same port: a RESP answer (`+PONG`, `-NOAUTH
//! ...`, `-DENIED ...`) proves the port speaks Redis without TLS, a definite error.

use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo, RedisError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long the probe may take, connecting and being answered.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// When `info` asks for TLS and `e` (the failed connect) is the kind a plaintext port gives
/// (a timeout, or bytes that are not TLS), probes the port: `Some(advice)` when it answers
/// plain RESP, `None` otherwise (not TLS, another failure, or no plain answer either: then
/// the failure stays what `e` says).
pub(super) async fn tls_to_a_plaintext_port(
    info: &ConnectionInfo,
    e: &RedisError,
) -> Option<String> {
    let ConnectionAddr::TcpTls { host, port, .. } = info.addr() else {
        return None;
    };
    if !(e.is_timeout() || super::conn::io_kind(e) == Some(std::io::ErrorKind::InvalidData)) {
        return None;
    }
    let answer = plain_ping(host, *port).await?;
    is_resp(&answer).then(|| {
        format!(
            "the Redis server at {host}:{port} did not answer the TLS handshake but answers plain \
             Redis commands: that port does not speak TLS; use redis:// for a plaintext port, or \
             point rediss:// at the server's TLS port (tls-port in redis.conf, with tls-cert-file \
             and tls-key-file)"
        )
    })
}

/// Sends `PING` without TLS to `host:port` and returns the first bytes answered, `None`
/// when it cannot connect or nothing comes within [`PROBE_TIMEOUT`].
async fn plain_ping(host: &str, port: u16) -> Option<Vec<u8>> {
    let io = async {
        let mut s = tokio::net::TcpStream::connect((host, port)).await?;
        s.write_all(b"PING\r\n").await?;
        let mut buf = vec![0u8; 128];
        let n = s.read(&mut buf).await?;
        buf.truncate(n);
        Ok::<_, std::io::Error>(buf)
    };
    tokio::time::timeout(PROBE_TIMEOUT, io).await.ok()?.ok()
}

/// Whether `answer` is a RESP simple string or error: `+` or `-`, text, then CR LF (what
/// Redis answers `PING` with, logged in or not).
fn is_resp(answer: &[u8]) -> bool {
    matches!(answer.first(), Some(b'+' | b'-'))
        && answer.windows(2).any(|w| w == b"\r\n")
        && answer
            .iter()
            .take_while(|b| **b != b'\r')
            .all(|b| b.is_ascii() && !b.is_ascii_control())
}

#[cfg(test)]
mod tests {
    use super::is_resp;

    #[test]
    fn resp_answers_to_ping_are_recognised() {
        assert!(is_resp(b"+PONG\r\n"));
        assert!(is_resp(b"-NOAUTH Authentication required.\r\n"));
        assert!(is_resp(b"-DENIED Redis is running in protected mode\r\n"));
        // A TLS alert, an HTTP answer, nothing.
        assert!(!is_resp(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46]));
        assert!(!is_resp(b"HTTP/1.1 400 Bad Request\r\n"));
        assert!(!is_resp(b""));
        assert!(!is_resp(b"+PONG"));
    }
}
