//! Logging in to HTTP upstreams that need OAuth (the MCP authorization
//! spec, 2025-11-25), on rmcp's authorization support.
//!
//! `devboy login NAME` runs the authorization-code flow once: it asks the
//! server for its challenge (`WWW-Authenticate`), discovers the protected
//! resource's and the authorization server's metadata, identifies devboy
//! (a client id from the config, a client ID metadata document, or dynamic
//! registration), and sends the user's browser to the authorization URL
//! (PKCE S256, the resource indicator, the scopes the challenge or the
//! metadata name) with a redirect to a loopback port it listens on. The
//! tokens it gets are kept in a [`TokenFile`], one per server and URL,
//! readable by the user only; every devboy then connects with them,
//! refreshing before they expire. Tokens are never logged or printed.

mod assertion;
pub mod machine;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use devboy_core::config::{OAuthConfig, UpstreamConfig, UpstreamTransport};
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, AuthorizationRequest,
    AuthorizationSession, CredentialStore, OAuthClientConfig, OAuthState, StoredCredentials,
};

/// How long `devboy login` waits for the browser to come back.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The name devboy registers under.
const CLIENT_NAME: &str = "devboy";

/// Where one server's tokens are kept: `oauth/<name>-<hash of its URL>.json`
/// in devboy's config directory, the directory `0700` and the file `0600`.
#[derive(Clone, Debug)]
pub struct TokenFile {
    path: PathBuf,
}

impl TokenFile {
    /// The file of server `name` at `url`, under `config_dir`.
    pub fn new(config_dir: &Path, name: &str, url: &str) -> Self {
        let hash = devboy_core::hash::fnv1a64(url.as_bytes());
        let name = devboy_core::naming::sanitize_component(name);
        Self {
            path: config_dir
                .join("oauth")
                .join(format!("{name}-{hash:016x}.json")),
        }
    }

    /// The file of `server`, when it is an HTTP server.
    pub fn of(server: &UpstreamConfig) -> Option<Self> {
        match &server.transport {
            UpstreamTransport::Http { url, .. } => Some(Self::new(
                &devboy_core::paths::config_dir(),
                &server.name,
                url,
            )),
            _ => None,
        }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// When it was last written, if it exists.
    pub fn modified(&self) -> Option<SystemTime> {
        std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok()
    }

    /// Removes it (and the scopes wanted beyond it); false when there was
    /// none.
    pub fn remove(&self) -> std::io::Result<bool> {
        let _ = std::fs::remove_file(self.wanted_path());
        let _ = std::fs::remove_file(self.lock_path());
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Where the scopes a server asked for beyond the login are kept.
    fn wanted_path(&self) -> PathBuf {
        self.path.with_extension("scopes")
    }

    /// Notes that the server asked for `scope` (space-separated scopes) for
    /// a call: the next login asks for them too.
    pub fn want_scope(&self, scope: &str) -> std::io::Result<()> {
        let mut wanted = self.wanted_scopes();
        for s in scope.split_whitespace() {
            if !wanted.iter().any(|w| w == s) {
                wanted.push(s.to_owned());
            }
        }
        let dir = self.path.parent().unwrap_or_else(|| Path::new("."));
        create_private_dir(dir)?;
        write_private(&self.wanted_path(), wanted.join(" ").as_bytes())
    }

    /// The scopes servers asked for beyond the login, in order.
    pub fn wanted_scopes(&self) -> Vec<String> {
        std::fs::read_to_string(self.wanted_path())
            .map(|text| text.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// The scopes the kept login was granted.
    pub fn granted_scopes(&self) -> Vec<String> {
        self.read()
            .ok()
            .flatten()
            .map(|c| c.granted_scopes)
            .unwrap_or_default()
    }

    fn read(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(store_error(&self.path, &e)),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| AuthError::CredentialStoreError(format!("{}: {e}", self.path.display())))
    }

    /// Writes `credentials` whole (a temporary file renamed over it), so a
    /// reader never sees half of it, readable by the user only.
    fn write(&self, credentials: &StoredCredentials) -> Result<(), AuthError> {
        let dir = self.path.parent().unwrap_or_else(|| Path::new("."));
        create_private_dir(dir).map_err(|e| store_error(dir, &e))?;
        let text = serde_json::to_vec(credentials)
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
        let temporary = self.path.with_extension("json.tmp");
        write_private(&temporary, &text).map_err(|e| store_error(&temporary, &e))?;
        std::fs::rename(&temporary, &self.path).map_err(|e| store_error(&self.path, &e))
    }
}

fn store_error(path: &Path, error: &std::io::Error) -> AuthError {
    AuthError::CredentialStoreError(format!("{}: {error}", path.display()))
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::write(path, bytes)
}

/// How long a refresh waits for another's to finish.
const REFRESH_WAIT: Duration = Duration::from_secs(30);

/// Refreshes under way in this process (guards held).
static REFRESHING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A held token lock, counted in [`REFRESHING`] while it lives.
struct Refreshing(#[allow(dead_code)] std::fs::File);

impl Drop for Refreshing {
    fn drop(&mut self) {
        REFRESHING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Waits, up to `limit`, for the token refreshes under way in this process
/// to end (within what devboy's ending allows: `devboy mcp` bounds all of
/// its stopping by `serve::ENDING`, and a refresh takes milliseconds).
/// devboy stopping calls it first: with a server that rotates
/// refresh tokens, one spent by a refresh whose answer is never saved is
/// lost, and the login with it.
pub async fn let_refreshes_finish(limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while REFRESHING.load(std::sync::atomic::Ordering::SeqCst) > 0
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl TokenFile {
    /// The file whose lock one refresh holds (the tokens' own file is
    /// replaced whole on each save, so it cannot carry the lock).
    fn lock_path(&self) -> PathBuf {
        self.path.with_extension("lock")
    }
}

#[async_trait::async_trait]
impl CredentialStore for TokenFile {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.read()
    }

    /// An exclusive lock on the tokens' lock file for one refresh, its
    /// load and its save: of the requests and processes (several agents'
    /// devboys share the file) that find the token due at once, each
    /// refreshes in turn with the refresh token the one before saved. A
    /// server that rotates refresh tokens refuses a second use of one, so
    /// without this all but one would read as a lost login.
    async fn acquire_refresh_guard(
        &self,
    ) -> Result<Option<rmcp::transport::auth::CredentialRefreshGuard>, AuthError> {
        let path = self.lock_path();
        let dir = self
            .path
            .parent()
            .unwrap_or_else(|| Path::new("."))
            .to_owned();
        let file = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            create_private_dir(&dir)?;
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
        })
        .await
        .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?
        .map_err(|e| store_error(&self.lock_path(), &e))?;
        // Waits for the holder, but not for ever: one that hangs past
        // REFRESH_WAIT is left to it, and this refresh goes ahead.
        let deadline = tokio::time::Instant::now() + REFRESH_WAIT;
        loop {
            match file.try_lock() {
                // Closing the file releases the lock.
                Ok(()) => {
                    REFRESHING.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    return Ok(Some(rmcp::transport::auth::CredentialRefreshGuard::new(
                        Refreshing(file),
                    )));
                }
                Err(std::fs::TryLockError::WouldBlock)
                    if tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    tracing::warn!(file = %self.lock_path().display(), "another refresh holds the token lock past {} s; refreshing anyway", REFRESH_WAIT.as_secs());
                    return Ok(None);
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(store_error(&self.lock_path(), &e))
                }
            }
        }
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.write(&credentials)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.remove()
            .map(|_| ())
            .map_err(|e| store_error(&self.path, &e))
    }
}

/// Whether `url`'s host is this machine or a private network, where the
/// server's metadata may live too (rmcp refuses such addresses for
/// metadata by default, against a public server pointing it inward).
fn is_private(url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(url) else {
        return false;
    };
    match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback() || ip.is_private() || ip.is_link_local(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback() || ip.is_unique_local(),
        None => false,
    }
}

/// An authorization manager for the server at `url`, its tokens in memory.
async fn bare_manager(url: &str) -> Result<AuthorizationManager, AuthError> {
    if is_private(url) {
        AuthorizationManager::new_allowing_private_addresses(url).await
    } else {
        AuthorizationManager::new(url).await
    }
}

/// An authorization manager for the server at `url` keeping its tokens in
/// `tokens`.
pub async fn manager(url: &str, tokens: TokenFile) -> Result<AuthorizationManager, AuthError> {
    let mut manager = bare_manager(url).await?;
    manager.set_credential_store(tokens);
    Ok(manager)
}

/// The authorization-server metadata a 2025-03-26 server publishes at its
/// origin's root (`/.well-known/oauth-authorization-server`), when its
/// issuer is on the server's own origin.
///
/// That spec had clients look there, with no protected-resource metadata
/// and no issuer check; such servers name an issuer with a path
/// (`https://host/oauth`) whose RFC 8414 location is elsewhere, and rmcp
/// refuses the mismatch. devboy takes the document then, and only from the
/// origin the user configured naming that same origin as issuer: the
/// check guards against a server passing off another authorization server
/// (a mix-up), which a document of the server's own origin about itself
/// cannot do.
async fn root_metadata(url: &str) -> Option<AuthorizationMetadata> {
    let server = reqwest::Url::parse(url).ok()?;
    let mut at = server.clone();
    at.set_path("/.well-known/oauth-authorization-server");
    at.set_query(None);
    at.set_fragment(None);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .ok()?;
    let response = client.get(at).send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    let metadata: AuthorizationMetadata = response.json().await.ok()?;
    let issuer = reqwest::Url::parse(metadata.issuer.as_deref()?).ok()?;
    let same_origin =
        |other: &str| reqwest::Url::parse(other).is_ok_and(|u| u.origin() == server.origin());
    (issuer.origin() == server.origin()
        && same_origin(&metadata.authorization_endpoint)
        && same_origin(&metadata.token_endpoint))
    .then_some(metadata)
}

/// Whether `error` is rmcp refusing metadata whose issuer differs from
/// where it was found (see [`root_metadata`]).
fn is_issuer_mismatch(error: &AuthError) -> bool {
    matches!(error, AuthError::AuthorizationServerMismatch { .. })
}

/// The manager a connection uses: the kept tokens, with the client the
/// config names (a confidential client refreshes with its secret).
/// `Ok(None)` when nothing is kept yet.
pub async fn connecting_manager(
    url: &str,
    tokens: TokenFile,
    oauth: &OAuthConfig,
) -> Result<Option<AuthorizationManager>, AuthError> {
    let mut manager = manager(url, tokens).await?;
    let found = match manager.initialize_from_store().await {
        Err(error) if is_issuer_mismatch(&error) => match root_metadata(url).await {
            Some(metadata) => {
                manager.set_metadata(metadata);
                manager.initialize_from_store().await?
            }
            None => return Err(error),
        },
        other => other?,
    };
    if !found {
        return Ok(None);
    }
    if let (Some(id), Some(secret)) = (&oauth.client_id, &oauth.client_secret) {
        let mut client = OAuthClientConfig::new(id.clone(), "http://127.0.0.1/callback")
            .with_client_secret(secret.clone());
        if let Some(scopes) = &oauth.scopes {
            client = client.with_scopes(scopes.clone());
        }
        manager.configure_client(client)?;
    }
    Ok(Some(manager))
}

/// Asks the server for its challenge: the `WWW-Authenticate` of the 401 an
/// unauthenticated `initialize` gets, if it answers so.
async fn challenge(
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
) -> Option<String> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .ok()?;
    let mut request = client
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    for (key, value) in headers {
        request = request.header(key, value);
    }
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")}}});
    let response = request.json(&body).send().await.ok()?;
    if response.status() != reqwest::StatusCode::UNAUTHORIZED {
        return None;
    }
    response
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Runs the login of `server` (an HTTP server): `open` is given the
/// authorization URL to show the user. Returns once the tokens are kept.
pub async fn login(
    server: &UpstreamConfig,
    tokens: TokenFile,
    open: impl FnOnce(&str),
) -> Result<(), String> {
    let UpstreamTransport::Http { url, headers } = &server.transport else {
        return Err(format!(
            "server `{}` is not an HTTP server; only HTTP servers log in",
            server.name
        ));
    };
    let oauth = &server.oauth;
    let port = oauth.callback_port.unwrap_or(0);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:{port} for the redirect: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let redirect = format!("http://127.0.0.1:{port}/callback");

    let manager = manager(url, tokens.clone())
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let mut request = AuthorizationRequest::new(redirect.clone()).with_client_name(CLIENT_NAME);
    if let Some(id) = &oauth.client_id {
        request = request.with_preregistered_client(id.clone());
    }
    if let Some(secret) = &oauth.client_secret {
        request = request.with_client_secret(secret.clone());
    }
    if let Some(document) = &oauth.client_metadata_url {
        request = request.with_client_metadata_url(document.clone());
    }
    // A step-up: the server asked for more than the login has (403
    // `insufficient_scope`), so this login asks for that with what was
    // granted (or configured).
    let wanted = tokens.wanted_scopes();
    if !wanted.is_empty() {
        let mut scopes = oauth
            .scopes
            .clone()
            .unwrap_or_else(|| tokens.granted_scopes());
        for scope in wanted {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        request = request.with_scopes(scopes);
    } else if let Some(scopes) = &oauth.scopes {
        request = request.with_scopes(scopes.iter().cloned());
    } else {
        request = request.with_initial_scope_selection();
    }
    if let Some(header) = challenge(url, headers).await {
        request = request.with_challenge(header);
    }
    let mut state = OAuthState::Unauthorized(manager);
    let cannot_start =
        |e: AuthError| format!("cannot start the authorization of `{}`: {e}", server.name);
    match state.start_authorization(request.clone()).await {
        Ok(()) => {}
        Err(error) if is_issuer_mismatch(&error) => {
            let (Some(metadata), OAuthState::Unauthorized(mut manager)) =
                (root_metadata(url).await, state)
            else {
                return Err(cannot_start(error));
            };
            manager.set_metadata(metadata);
            let session = AuthorizationSession::new(manager, request)
                .await
                .map_err(|(_, e)| cannot_start(e))?;
            state = OAuthState::Session(session);
        }
        Err(error) => return Err(cannot_start(error)),
    }
    let authorization_url = state
        .get_authorization_url()
        .await
        .map_err(|e| e.to_string())?;
    open(&authorization_url);

    let callback = tokio::time::timeout(LOGIN_TIMEOUT, redirect_of(&listener, &redirect))
        .await
        .map_err(|_| {
            format!(
                "no answer from the browser within {} s",
                LOGIN_TIMEOUT.as_secs()
            )
        })??;
    state
        .handle_callback_url(&callback)
        .await
        .map_err(|e| format!("the authorization server's answer was refused: {e}"))?;
    let _ = std::fs::remove_file(tokens.wanted_path());
    Ok(())
}

/// Waits for the browser's request of `/callback` on `listener`, answers
/// it with a page saying what happened, and returns its whole URL.
async fn redirect_of(listener: &tokio::net::TcpListener, redirect: &str) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let (mut stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let mut head = Vec::new();
        let mut buffer = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buffer[..n]),
            }
        }
        let head = String::from_utf8_lossy(&head);
        let target = head
            .lines()
            .next()
            .and_then(|line| line.split_whitespace().nth(1))
            .unwrap_or("");
        let Some(query) = target.strip_prefix("/callback") else {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            continue;
        };
        let refused = query.contains("error=");
        let page = if refused {
            "devboy: the authorization was refused; see the terminal."
        } else {
            "devboy: logged in. You can close this tab."
        };
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
            page.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        return Ok(format!("{redirect}{query}"));
    }
}

/// Opens `url` for the user: `$BROWSER` when set (a command; `%s` stands
/// for the URL, else it is appended), else the platform's opener. Returns
/// what was run, or `None` when nothing could be (the caller prints the
/// URL either way).
pub fn open_in_browser(url: &str) -> Option<String> {
    if let Some(browser) = std::env::var_os("BROWSER").filter(|b| !b.is_empty()) {
        let browser = browser.to_string_lossy().into_owned();
        // The convention: a list of commands separated by `:`; the first
        // that starts is used.
        for command in browser.split(':').filter(|c| !c.trim().is_empty()) {
            let line = if command.contains("%s") {
                command.replace("%s", &shell_quote(url))
            } else {
                format!("{command} {}", shell_quote(url))
            };
            let started = std::process::Command::new("sh")
                .args(["-c", &line])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .spawn();
            if started.is_ok() {
                return Some(command.to_owned());
            }
        }
        return None;
    }
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else if cfg!(windows) {
        "explorer"
    } else {
        "xdg-open"
    };
    std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()
        .map(|_| opener.to_owned())
}

/// `s` as one word for `sh`.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// What a connection needs when the server asked for a login it does not
/// have: the words calls and status give.
pub fn needs_login(name: &str) -> String {
    format!("needs a login: run `devboy login {name}`")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_file_is_the_users_alone_and_whole() {
        let dir = tempfile::tempdir().unwrap();
        let file = TokenFile::new(dir.path(), "remote api", "https://mcp.example/mcp");
        assert!(file.path().ends_with(format!(
            "oauth/remote_api-{:016x}.json",
            devboy_core::hash::fnv1a64(b"https://mcp.example/mcp")
        )));
        assert!(file.read().unwrap().is_none());
        let stored = StoredCredentials::new("client-1".into(), None, vec!["mcp".into()], Some(1));
        file.write(&stored).unwrap();
        let back = file.read().unwrap().unwrap();
        assert_eq!(back.client_id, "client-1");
        assert_eq!(back.granted_scopes, ["mcp"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(file.path()), 0o600);
            assert_eq!(mode(file.path().parent().unwrap()), 0o700);
        }
        assert!(file.remove().unwrap());
        assert!(!file.remove().unwrap());
        // Another URL of the same name is another file.
        let other = TokenFile::new(dir.path(), "remote api", "https://mcp.example/other");
        assert_ne!(other.path(), file.path());
    }

    #[test]
    fn scopes_a_server_asked_for_are_kept_for_the_next_login_and_go_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = TokenFile::new(dir.path(), "api", "https://mcp.example/mcp");
        assert!(file.wanted_scopes().is_empty());
        file.want_scope("mcp:basic mcp:write").unwrap();
        file.want_scope("mcp:write admin").unwrap();
        assert_eq!(file.wanted_scopes(), ["mcp:basic", "mcp:write", "admin"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(file.wanted_path())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // A logout forgets them with the tokens.
        file.write(&StoredCredentials::new("c".into(), None, vec![], None))
            .unwrap();
        assert!(file.remove().unwrap());
        assert!(file.wanted_scopes().is_empty());
    }

    #[tokio::test]
    async fn one_refresh_at_a_time_holds_the_token_lock() {
        let dir = tempfile::tempdir().unwrap();
        // Two handles on one server's tokens, as two connections have.
        let first = TokenFile::new(dir.path(), "api", "https://mcp.example/mcp");
        let second = first.clone();
        let held = first.acquire_refresh_guard().await.unwrap();
        assert!(held.is_some());
        let waiting = tokio::spawn(async move { second.acquire_refresh_guard().await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiting.is_finished(), "the second waits for the first");
        drop(held);
        let next = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("taken once the first lets go")
            .unwrap()
            .unwrap();
        assert!(next.is_some());
    }

    #[test]
    fn loopback_and_private_hosts_may_keep_their_metadata_there() {
        assert!(is_private("http://localhost:3000/mcp"));
        assert!(is_private("http://127.0.0.1:3000/mcp"));
        assert!(is_private("http://[::1]:3000/mcp"));
        assert!(is_private("http://10.1.2.3/mcp"));
        assert!(!is_private("https://mcp.example.com/mcp"));
        assert!(!is_private("https://8.8.8.8/mcp"));
    }
}
