//! Real object-store servers on loopback, for tests of code that talks to S3
//! and Azure Blob Storage through the `object_store` crate.
//!
//! - [`S3Server`]: moto's S3-compatible server (`moto_server`, PyPI
//!   `moto[server]`, pinned in `tests/peers/requirements.txt`).
//! - [`AzuriteServer`]: Azurite's blob service (`azurite-blob`, npm
//!   `azurite`, pinned in `tests/peers/package.json`), Microsoft's Azure
//!   Storage emulator.
//!
//! Each server is started on `127.0.0.1` on a port it picks itself (port 0;
//! the port is read from its start-up line), with its own data, so any number
//! of tests can run their own at once. Each is killed (its whole process
//! group) when dropped. [`S3Server::env`] and [`AzuriteServer::env`] give the
//! variables `AmazonS3Builder::from_env()` / `MicrosoftAzureBuilder::from_env()`
//! read; pass them as options (e.g. `object_store::parse_url_opts`) or as a
//! child's environment rather than setting them in the test process, since
//! tests run in parallel.
//!
//! A server that does not start panics with its output, so tests fail loudly.

use std::io::{BufRead as _, BufReader, Read, Write as _};
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;

use crate::claude::{exited_unreaped, kill_group};
use crate::peers;

/// How long a server may take to print its address and answer HTTP.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// How much of a server's output is kept for failure messages.
const LOG_LIMIT: usize = 64 * 1024;

/// Azurite's well-known development account (public, the same everywhere).
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";

/// Azurite's well-known development account key (public, the same everywhere).
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// The access key id and secret [`S3Server::env`] gives (moto accepts any).
pub const S3_CREDENTIAL: &str = "testing";

/// moto's S3-compatible server on loopback.
///
/// moto keeps everything in memory, conditional puts (`If-None-Match: *`,
/// `If-Match: <etag>`) answer 412 like S3, and a server from [`Self::start`]
/// does **not** check credentials: any access key and secret are accepted
/// (see [`Self::start_refusing_credentials`] for one that refuses all).
#[derive(Debug)]
pub struct S3Server {
    process: ServerProcess,
}

impl S3Server {
    /// Starts `moto_server` on `127.0.0.1` on a free port and waits until it
    /// answers HTTP.
    ///
    /// # Panics
    /// If moto is not installed (run `tests/peers/install.sh`) or does not
    /// start within 20 s (the message holds its output).
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server that checks credentials and knows none, so every
    /// signed request is refused with 403 `InvalidAccessKeyId` (moto with
    /// `INITIAL_NO_AUTH_ACTION_COUNT=0` and no IAM users): what a wrong
    /// access key looks like to a client. [`Self::create_bucket`] fails on it.
    ///
    /// # Panics
    /// As [`Self::start`].
    pub fn start_refusing_credentials() -> Self {
        Self::start_with(&[("INITIAL_NO_AUTH_ACTION_COUNT", "0")])
    }

    fn start_with(env: &[(&str, &str)]) -> Self {
        let mut cmd = Command::new(peers::venv_bin("moto_server"));
        cmd.args(["-H", "127.0.0.1", "-p", "0"])
            .env("PYTHONUNBUFFERED", "1")
            .envs(env.iter().copied());
        // Werkzeug: " * Running on http://127.0.0.1:PORT" once it listens.
        let process = ServerProcess::start("moto_server", cmd, "Running on http://127.0.0.1:");
        Self { process }
    }

    /// The port the server listens on (on `127.0.0.1`).
    pub fn port(&self) -> u16 {
        self.process.port
    }

    /// The endpoint URL, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port())
    }

    /// How long the server took from spawn to answering HTTP.
    pub fn startup_time(&self) -> Duration {
        self.process.startup
    }

    /// Creates bucket `name` (an unsigned `PUT /NAME`, which moto accepts).
    ///
    /// # Panics
    /// If the server does not answer 200 (e.g. an invalid bucket name: S3
    /// names are 3 to 63 characters of `a-z0-9.-`).
    pub fn create_bucket(&self, name: &str) {
        let (status, body) = http(self.port(), "PUT", &format!("/{name}"), &[])
            .unwrap_or_else(|e| panic!("moto: create bucket {name}: {e}"));
        assert_eq!(status, 200, "moto: create bucket {name}: {body}");
    }

    /// What `AmazonS3Builder::from_env()` reads to talk to this server:
    /// `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_REGION` (`us-east-1`) and `AWS_ALLOW_HTTP` (`true`). Requests are
    /// path-style (`ENDPOINT/BUCKET/KEY`), `object_store`'s default.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ACCESS_KEY_ID", S3_CREDENTIAL.to_string()),
            ("AWS_SECRET_ACCESS_KEY", S3_CREDENTIAL.to_string()),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// The server's output so far (its request log, errors).
    pub fn log(&self) -> String {
        self.process.log()
    }
}

/// Azurite's blob service on loopback, with its data in a temporary folder.
///
/// Azurite checks Shared Key signatures: only the well-known account
/// [`AZURITE_ACCOUNT`] with key [`AZURITE_KEY`] is accepted.
#[derive(Debug)]
pub struct AzuriteServer {
    process: ServerProcess,
    _data: tempfile::TempDir,
}

impl AzuriteServer {
    /// Starts `azurite-blob` on `127.0.0.1` on a free port, storing in a new
    /// temporary folder, and waits until it answers HTTP. Telemetry is off
    /// and any API version is accepted (`--skipApiVersionCheck`).
    ///
    /// # Panics
    /// If Azurite is not installed (run `tests/peers/install.sh`) or does not
    /// start within 20 s (the message holds its output).
    pub fn start() -> Self {
        let data = tempfile::Builder::new()
            .prefix("devboy-azurite-")
            .tempdir()
            .expect("azurite: temporary data folder");
        let mut cmd = Command::new(peers::node_bin("azurite-blob"));
        cmd.args(["--blobHost", "127.0.0.1", "--blobPort", "0", "--location"])
            .arg(data.path())
            .args(["--silent", "--skipApiVersionCheck", "--disableTelemetry"])
            .current_dir(data.path());
        // "Azurite Blob service successfully listens on http://127.0.0.1:PORT"
        let process = ServerProcess::start(
            "azurite-blob",
            cmd,
            "successfully listens on http://127.0.0.1:",
        );
        Self {
            process,
            _data: data,
        }
    }

    /// The port the blob service listens on (on `127.0.0.1`).
    pub fn port(&self) -> u16 {
        self.process.port
    }

    /// The account's blob endpoint, path-style:
    /// `http://127.0.0.1:PORT/devstoreaccount1`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/{AZURITE_ACCOUNT}", self.port())
    }

    /// How long the server took from spawn to answering HTTP.
    pub fn startup_time(&self) -> Duration {
        self.process.startup
    }

    /// The folder Azurite stores its data in.
    pub fn data_dir(&self) -> &Path {
        self._data.path()
    }

    /// Creates container `name` (a Shared Key signed `PUT ?restype=container`).
    ///
    /// # Panics
    /// If the server does not answer 201 (e.g. an invalid name: 3 to 63
    /// characters of `a-z0-9-`).
    pub fn create_container(&self, name: &str) {
        let version = "2021-08-06";
        let date = http_date(SystemTime::now());
        // Shared Key string-to-sign for the Blob service: the verb, eleven
        // empty standard headers, the x-ms-* headers, then the resource
        // (`/ACCOUNT` + the path-style URL path, which starts with the
        // account again) and its query parameters.
        let string_to_sign = format!(
            "PUT\n{}x-ms-date:{date}\nx-ms-version:{version}\n/{AZURITE_ACCOUNT}/{AZURITE_ACCOUNT}/{name}\nrestype:container",
            "\n".repeat(11)
        );
        let key = base64::engine::general_purpose::STANDARD
            .decode(AZURITE_KEY)
            .expect("well-known key is base64");
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key);
        let signature = base64::engine::general_purpose::STANDARD
            .encode(ring::hmac::sign(&key, string_to_sign.as_bytes()).as_ref());
        let headers = [
            ("x-ms-date", date),
            ("x-ms-version", version.to_string()),
            (
                "Authorization",
                format!("SharedKey {AZURITE_ACCOUNT}:{signature}"),
            ),
        ];
        let target = format!("/{AZURITE_ACCOUNT}/{name}?restype=container");
        let (status, body) = http(self.port(), "PUT", &target, &headers)
            .unwrap_or_else(|e| panic!("azurite: create container {name}: {e}"));
        assert_eq!(status, 201, "azurite: create container {name}: {body}");
    }

    /// What `MicrosoftAzureBuilder::from_env()` (or `parse_url_opts` with
    /// `az://CONTAINER`) needs to talk to this server:
    /// `AZURE_STORAGE_ACCOUNT_NAME` (`devstoreaccount1`),
    /// `AZURE_STORAGE_ACCOUNT_KEY` (the well-known key),
    /// `AZURE_STORAGE_ENDPOINT` ([`Self::endpoint`]) and `AZURE_ALLOW_HTTP`
    /// (`true`).
    ///
    /// Deliberately without `AZURE_STORAGE_USE_EMULATOR=true`: in emulator
    /// mode `object_store` 0.14 ignores the endpoint option and reads the
    /// URL from the *process* variable `AZURITE_BLOB_STORAGE_URL` (default
    /// `http://127.0.0.1:10000`), which parallel tests cannot each set. With
    /// the endpoint path-style, requests and signatures are the same as in
    /// emulator mode; the one difference is `list_with_offset`, which
    /// emulator mode filters on the client.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AZURE_STORAGE_ACCOUNT_NAME", AZURITE_ACCOUNT.to_string()),
            ("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY.to_string()),
            ("AZURE_STORAGE_ENDPOINT", self.endpoint()),
            ("AZURE_ALLOW_HTTP", "true".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// The server's output so far.
    pub fn log(&self) -> String {
        self.process.log()
    }
}

/// A server child in its own process group, its stdout and stderr drained
/// into a bounded log.
#[derive(Debug)]
struct ServerProcess {
    child: Child,
    port: u16,
    startup: Duration,
    log: Arc<Mutex<String>>,
}

impl ServerProcess {
    /// Spawns `cmd`, waits for an output line containing `marker` followed by
    /// the port, then for the port to answer HTTP.
    fn start(name: &str, mut cmd: Command, marker: &str) -> Self {
        let started = Instant::now();
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: spawn {:?}: {e}", cmd.get_program()));
        let log = Arc::new(Mutex::new(String::new()));
        let (lines_tx, lines_rx) = mpsc::channel::<String>();
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        drain(name, stdout, Arc::clone(&log), lines_tx.clone());
        drain(name, stderr, Arc::clone(&log), lines_tx);
        let mut process = Self {
            child,
            port: 0,
            startup: Duration::ZERO,
            log,
        };

        let deadline = started + START_TIMEOUT;
        let port = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines_rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(port) = port_after(&line, marker) {
                        break port;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    process.fail(name, "did not print its address within 20 s")
                }
                // Both pipes closed: the server exited.
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    process.fail(name, "exited before listening")
                }
            }
        };
        process.port = port;
        loop {
            if http(port, "GET", "/", &[]).is_ok() {
                break;
            }
            if Instant::now() >= deadline {
                process.fail(name, &format!("port {port} does not answer HTTP"));
            }
            if exited_unreaped(process.child.id()).unwrap_or(true) {
                process.fail(name, "exited");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        process.startup = started.elapsed();
        process
    }

    fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Kills the server and panics with `why` and its output.
    fn fail(&mut self, name: &str, why: &str) -> ! {
        self.kill();
        // Let the readers take in what the server printed last.
        std::thread::sleep(Duration::from_millis(100));
        panic!(
            "test store server {name} did not start: {why} (run tests/peers/install.sh?); \
             its output:\n{}",
            self.log()
        )
    }

    fn kill(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // The leader is unreaped, so its group id is still ours.
            kill_group(self.child.id());
        }
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads `stream` line by line on a thread: each line is appended to `log`
/// (keeping its last [`LOG_LIMIT`] bytes) and sent on `lines` while someone
/// listens.
fn drain(
    name: &str,
    stream: impl Read + Send + 'static,
    log: Arc<Mutex<String>>,
    lines: mpsc::Sender<String>,
) {
    let spawned = std::thread::Builder::new()
        .name(format!("{name}-output"))
        .spawn(move || {
            let mut reader = BufReader::new(stream);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let line = String::from_utf8_lossy(&buf).into_owned();
                if let Ok(mut log) = log.lock() {
                    log.push_str(&line);
                    if log.len() > LOG_LIMIT {
                        let mut cut = log.len() - LOG_LIMIT;
                        while !log.is_char_boundary(cut) {
                            cut += 1;
                        }
                        log.drain(..cut);
                    }
                }
                let _ = lines.send(line);
            }
        });
    spawned.expect("spawn output reader thread");
}

/// The port in `line` right after `marker` (`…http://127.0.0.1:PORT…`).
fn port_after(line: &str, marker: &str) -> Option<u16> {
    let rest = &line[line.find(marker)? + marker.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|&p| p != 0)
}

/// One HTTP/1.1 request without a body to `127.0.0.1:port`; the status code
/// and the body (as text).
fn http(
    port: u16,
    method: &str,
    target: &str,
    headers: &[(&str, String)],
) -> std::io::Result<(u16, String)> {
    let timeout = Duration::from_secs(10);
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut request = format!(
        "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n"
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes())?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let response = String::from_utf8_lossy(&response);
    let status = response
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| response.strip_prefix("HTTP/1.0 "))
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("not an HTTP response: {response:?}"),
            )
        })?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// `time` as an HTTP date (RFC 7231 IMF-fixdate), e.g.
/// `Fri, 27 Nov 2026 03:36:57 GMT`.
fn http_date(time: SystemTime) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let (h, m, s) = (secs % 86_400 / 3600, secs % 3600 / 60, secs % 60);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{}, {day:02} {} {year} {h:02}:{m:02}:{s:02} GMT",
        WEEKDAYS[days.rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates() {
        assert_eq!(http_date(UNIX_EPOCH), "Thu, 01 Jan 1970 00:00:00 GMT");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_750_617);
        assert_eq!(http_date(t), "Fri, 27 Nov 2026 03:36:57 GMT");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(http_date(leap), "Tue, 29 Feb 2000 00:00:00 GMT");
    }

    #[test]
    fn a_server_that_dies_fails_with_its_output() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo 'Address already in use' >&2; exit 3"]);
        let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            ServerProcess::start("fake", cmd, "listening on http://127.0.0.1:")
        }))
        .expect_err("must panic");
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(message.contains("fake did not start"), "{message}");
        assert!(message.contains("exited before listening"), "{message}");
        assert!(message.contains("Address already in use"), "{message}");
    }

    #[test]
    fn ports_in_start_up_lines() {
        let moto = " * Running on http://127.0.0.1:45575\n";
        assert_eq!(
            port_after(moto, "Running on http://127.0.0.1:"),
            Some(45575)
        );
        let azurite = "Azurite Blob service successfully listens on http://127.0.0.1:46855\n";
        assert_eq!(
            port_after(azurite, "successfully listens on http://127.0.0.1:"),
            Some(46855)
        );
        assert_eq!(port_after("starting on 127.0.0.1:0", "127.0.0.1:"), None);
        assert_eq!(port_after("nothing here", "127.0.0.1:"), None);
    }
}
