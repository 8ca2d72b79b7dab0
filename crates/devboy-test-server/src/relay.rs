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
    // Server → client: responses after the delay, in order.
    let (lines_out, mut due_lines) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
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
    match child.wait().await {
        Ok(status) => status.code().unwrap_or(1),
        Err(_) => 1,
    }
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
