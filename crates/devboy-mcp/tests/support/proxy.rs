//! Starting a proxy in process for the call-path tests: the test server
//! binary and a proxy over a `devboy.toml` text.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use devboy_core::config::{ConfigFormat, ProxyConfig};
use devboy_mcp::{BuiltinRegistry, Proxy, ProxyOptions};

/// The test server binary, built on first use.
pub fn test_server() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            // target/<profile>/deps/<this test> → target/<profile>/devboy-test-server
            let exe = std::env::current_exe().expect("test binary path");
            let path = exe
                .parent()
                .and_then(|deps| deps.parent())
                .expect("target dir")
                .join("devboy-test-server");
            if !path.exists() {
                let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
                let status = std::process::Command::new(cargo)
                    .args(["build", "-q", "-p", "devboy-test-server"])
                    .current_dir(env!("CARGO_MANIFEST_DIR"))
                    .status()
                    .expect("run cargo build");
                assert!(status.success(), "building devboy-test-server failed");
            }
            path
        })
        .clone()
}

/// A proxy over the servers of `toml` (a `devboy.toml` text) listing
/// `builtins`; its first listing waits for every upstream.
pub fn start_proxy(toml: &str, builtins: &BuiltinRegistry) -> Arc<Proxy> {
    let config = ProxyConfig::from_str(toml, ConfigFormat::Toml, Path::new("devboy.toml"), &|_| {
        None
    })
    .expect("config");
    let options = ProxyOptions {
        list_grace: Duration::from_secs(30),
        ..ProxyOptions::default()
    };
    Proxy::start(&config, options, builtins.listing())
}
