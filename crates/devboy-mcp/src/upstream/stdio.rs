//! Stdio upstreams: a child process speaking MCP on its stdin and stdout,
//! in a process group of its own, its stderr kept for error messages.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use rmcp::service::{RunningService, ServiceExt};
use rmcp::RoleClient;
use tokio_util::sync::CancellationToken;

use super::diagnostics::drain_stderr;
use super::{ConnectError, Upstream, UpstreamClient};
use crate::sync::lock;
use crate::tap::NotificationTap;

/// A child process to start, as the config gives it.
pub(super) struct Stdio {
    /// The program to run.
    pub(super) command: String,
    /// Its arguments.
    pub(super) args: Vec<String>,
    /// Variables added to the inherited environment.
    pub(super) env: BTreeMap<String, String>,
    /// Its working directory; `None` inherits devboy's.
    pub(super) cwd: Option<PathBuf>,
    /// Whether the command is a package runner (`npx`, `uvx`, …), whose
    /// first start may download for a while before it speaks.
    pub(super) package_runner: bool,
}

impl Stdio {
    /// Starts the process and initializes over its stdin and stdout;
    /// `devboy_ending` is cancelled when devboy ends (the process is then
    /// stopped briskly).
    pub(super) async fn serve(
        &self,
        upstream: &Upstream,
        handler: UpstreamClient,
        devboy_ending: &CancellationToken,
    ) -> Result<RunningService<RoleClient, UpstreamClient>, ConnectError> {
        let mut cmd = tokio::process::Command::new(&self.command);
        cmd.args(&self.args).envs(&self.env);
        // A devboy started as an upstream sees this and starts no
        // upstreams of its own: a config that lists devboy itself
        // must not multiply processes (see `is_devboy`).
        cmd.env(
            super::NESTED_ENV,
            format!("{} {}", std::process::id(), upstream.config.name),
        );
        if let Some(cwd) = &self.cwd {
            cmd.current_dir(cwd);
        }
        let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
        // Own process group: npx-style launchers spawn grandchildren
        // that must die with the upstream.
        wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
        let report = crate::child::SharedReport::default();
        *lock(&upstream.child_report) = report.clone();
        let (transport, stderr) = crate::child::ChildTransport::spawn(
            wrapped,
            &upstream.config.name,
            report,
            self.package_runner,
            devboy_ending.clone(),
        )
        .map_err(|e| spawn_error(&self.command, &e))?;
        *lock(&upstream.pid) = transport.id();
        if let Some(stderr) = stderr {
            tokio::spawn(drain_stderr(
                upstream.config.name.clone(),
                stderr,
                upstream.stderr_tail.clone(),
            ));
        }
        match handler
            .serve(NotificationTap::new(
                transport,
                upstream.progress.clone(),
                upstream.relay.clone(),
            ))
            .await
        {
            Ok(running) => Ok(running),
            Err(e) => {
                // Give the exit status and the last stderr line a
                // moment to arrive: they say more than rmcp's error.
                tokio::time::sleep(Duration::from_millis(100)).await;
                let what = upstream
                    .process_facts()
                    .unwrap_or_else(|| format!("initialize failed: {e}"));
                Err(format!("{what}{}", upstream.stderr_detail()).into())
            }
        }
    }
}

/// A failed spawn, for people.
fn spawn_error(command: &str, error: &std::io::Error) -> String {
    if error.kind() == std::io::ErrorKind::NotFound {
        format!("command not found: `{command}` (check `command` and PATH)")
    } else {
        format!("failed to start `{command}`: {error}")
    }
}
