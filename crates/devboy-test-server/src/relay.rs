//! `devboy-test-server relay --delay-ms N -- CMD ARGS…`: a stdio relay that
//! makes any MCP server slow, like a server behind a network.
//!
//! It starts `CMD ARGS…` and passes lines both ways byte for byte; each
//! JSON-RPC response the server sends (a line with an `id` and a `result`
//! or `error`) reaches the client N ms after the server wrote it.
//! Responses keep their order and overlap (the delay is latency, not a
//! queue): ten responses written at once all arrive N ms later.
//! Notifications and requests from the server pass at once.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Usage, for a wrong command line.
const USAGE: &str = "usage: devboy-test-server relay --delay-ms N -- CMD [ARGS…]";

/// Runs the relay with the arguments after `relay`; returns the exit code.
pub async fn run(args: &[String]) -> i32 {
    let (delay, command) = match parse(args) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("devboy-test-server relay: {message}\n{USAGE}");
            return 2;
        }
    };
    let mut child = match tokio::process::Command::new(&command[0])
        .args(&command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(error) => {
            eprintln!(
                "devboy-test-server relay: cannot start {:?}: {error}",
                command[0]
            );
            return 1;
        }
    };
    let (Some(mut to_server), Some(from_server)) = (child.stdin.take(), child.stdout.take()) else {
        return 1;
    };
    // Client → server: at once.
    tokio::spawn(async move {
        let mut lines = BufReader::new(tokio::io::stdin());
        let mut line = Vec::new();
        while matches!(lines.read_until(b'\n', &mut line).await, Ok(n) if n > 0) {
            if to_server.write_all(&line).await.is_err() || to_server.flush().await.is_err() {
                break;
            }
            line.clear();
        }
    });
    delay_responses(from_server, tokio::io::stdout(), delay).await;
    match child.wait().await {
        Ok(status) => status.code().unwrap_or(1),
        Err(_) => 1,
    }
}

/// Server → client: each response `delay` after it was read, in order;
/// everything else at once. A line's due time is set when it is read, so
/// responses read together arrive together (latency, not a queue).
async fn delay_responses(
    from_server: impl tokio::io::AsyncRead + Unpin,
    mut out: impl tokio::io::AsyncWrite + Unpin + Send + 'static,
    delay: Duration,
) {
    let (lines_out, mut due_lines) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((due, line)) = due_lines.recv().await {
            tokio::time::sleep_until(due).await;
            if out.write_all(&line).await.is_err() || out.flush().await.is_err() {
                return;
            }
        }
    });
    let mut lines = BufReader::new(from_server);
    let mut line = Vec::new();
    while matches!(lines.read_until(b'\n', &mut line).await, Ok(n) if n > 0) {
        let due = if is_response(&line) {
            Instant::now() + delay
        } else {
            Instant::now()
        };
        if lines_out.send((due, std::mem::take(&mut line))).is_err() {
            break;
        }
    }
    drop(lines_out);
    let _ = writer.await;
}

fn parse(args: &[String]) -> Result<(Duration, Vec<String>), String> {
    let mut delay = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--delay-ms" => {
                let value = rest.next().ok_or("--delay-ms needs a value")?;
                let ms: u64 = value
                    .parse()
                    .map_err(|_| format!("--delay-ms must be an integer, got {value:?}"))?;
                delay = Some(Duration::from_millis(ms));
            }
            "--" => {
                let command: Vec<String> = rest.cloned().collect();
                if command.is_empty() {
                    return Err("no command after --".into());
                }
                return Ok((delay.ok_or("--delay-ms is required")?, command));
            }
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    Err("no command (give it after --)".into())
}

/// Whether a line is a JSON-RPC response.
fn is_response(line: &[u8]) -> bool {
    match serde_json::from_slice::<serde_json::Value>(line) {
        Ok(serde_json::Value::Object(message)) => {
            message.contains_key("id")
                && (message.contains_key("result") || message.contains_key("error"))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On tokio's paused clock: a notification arrives at once, and three
    /// responses written at once all arrive exactly one delay later.
    #[tokio::test(start_paused = true)]
    async fn responses_overlap_and_notifications_pass_at_once() {
        use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
        let (mut server, server_side) = tokio::io::duplex(4096);
        let (client_side, client) = tokio::io::duplex(4096);
        let delay = Duration::from_millis(300);
        tokio::spawn(delay_responses(server_side, client_side, delay));
        let start = Instant::now();
        server
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n")
            .await
            .unwrap();
        for id in 1..=3 {
            let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}\n");
            server.write_all(line.as_bytes()).await.unwrap();
        }
        let mut lines = tokio::io::BufReader::new(client).lines();
        let mut arrivals = Vec::new();
        for _ in 0..4 {
            let line = lines.next_line().await.unwrap().unwrap();
            arrivals.push((is_response(line.as_bytes()), start.elapsed()));
        }
        assert_eq!(
            arrivals,
            [
                (false, Duration::ZERO),
                (true, delay),
                (true, delay),
                (true, delay)
            ]
        );
    }

    #[test]
    fn only_responses_wait() {
        assert!(is_response(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        assert!(is_response(
            br#"{"jsonrpc":"2.0","id":"a","error":{"code":1,"message":"x"}}"#
        ));
        assert!(!is_response(
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#
        ));
        assert!(!is_response(
            br#"{"jsonrpc":"2.0","id":2,"method":"roots/list"}"#
        ));
        assert!(!is_response(b"not json"));
    }

    #[test]
    fn the_command_line_needs_a_delay_and_a_command() {
        let args = |s: &[&str]| s.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let (delay, command) = parse(&args(&["--delay-ms", "300", "--", "node", "x.js"])).unwrap();
        assert_eq!(delay, Duration::from_millis(300));
        assert_eq!(command, ["node", "x.js"]);
        assert!(parse(&args(&["--", "node"])).is_err());
        assert!(parse(&args(&["--delay-ms", "300", "--"])).is_err());
        assert!(parse(&args(&["--delay-ms", "soon", "--", "x"])).is_err());
    }
}
