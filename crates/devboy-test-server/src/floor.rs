//! `devboy-test-server floor -- CMD ARGS…`: the least a stdio proxy can
//! do, for the proxy bench to measure as the floor of the hop.
//!
//! It starts `CMD ARGS…` and copies lines both ways on two plain threads
//! with blocking reads and writes (each wakes when its pipe has data: no
//! scheduler in between), parsing each line the server sends once as
//! JSON, as any proxy that looks at results must. The server's stderr is
//! drained on a third thread, as a proxy that keeps its upstreams' logs
//! does.

use std::io::{BufRead as _, BufReader, BufWriter, Read as _, Write as _};
use std::process::{Command, Stdio};

/// Runs the floor relay with the arguments after `floor`; returns the
/// exit code.
pub fn run(args: &[String]) -> i32 {
    let command = match args {
        [dashes, command @ ..] if dashes == "--" && !command.is_empty() => command,
        _ => {
            eprintln!("usage: devboy-test-server floor -- CMD [ARGS…]");
            return 2;
        }
    };
    let mut child = match Command::new(&command[0])
        .args(&command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(error) => {
            eprintln!(
                "devboy-test-server floor: cannot start {:?}: {error}",
                command[0]
            );
            return 1;
        }
    };
    let (Some(mut to_server), Some(from_server), Some(mut logs)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return 1;
    };
    std::thread::spawn(move || {
        let mut sink = [0u8; 64 * 1024];
        while matches!(logs.read(&mut sink), Ok(n) if n > 0) {}
    });
    std::thread::spawn(move || {
        let mut lines = BufReader::with_capacity(64 * 1024, std::io::stdin().lock());
        let mut line = Vec::new();
        while matches!(lines.read_until(b'\n', &mut line), Ok(n) if n > 0) {
            if to_server.write_all(&line).is_err() {
                break;
            }
            line.clear();
        }
    });
    let mut lines = BufReader::with_capacity(64 * 1024, from_server);
    let mut out = BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let mut line = Vec::new();
    while matches!(lines.read_until(b'\n', &mut line), Ok(n) if n > 0) {
        // The one parse; a line that is not JSON passes all the same.
        let _ = serde_json::from_slice::<serde_json::Value>(&line);
        if out.write_all(&line).and_then(|()| out.flush()).is_err() {
            break;
        }
        line.clear();
    }
    match child.wait() {
        Ok(status) => status.code().unwrap_or(1),
        Err(_) => 1,
    }
}
