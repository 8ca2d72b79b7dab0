//! Grants with no browser in them: devboy gets a server's token itself on
//! every connect and keeps it in memory only.
//!
//! - **Client credentials** (the MCP client-credentials extension): the
//!   configured client's id with its secret, or with an assertion signed by
//!   its private key (`private_key_jwt`, see [`super::assertion`]).
//! - **Cross-app access** (enterprise-managed authorization): the user's ID
//!   token from the enterprise's identity provider is exchanged there
//!   (RFC 8693 token exchange) for an identity assertion authorization grant
//!   (ID-JAG) naming the server's authorization server and the server; the
//!   authorization server takes it as a JWT bearer grant (RFC 7523) from
//!   the configured client and issues the server's token.
//!
//! Tokens, assertions and ID tokens are never logged nor put in an error.

use std::time::Duration;

use devboy_core::config::{OAuthConfig, OAuthGrant};
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, ClientCredentialsConfig, OAuthState,
    OAuthTokenResponse,
};

use super::assertion::SigningKey;
use super::{bare_manager, is_private};

const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";

/// How long one token request, or the ID-token command, may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The manager of a server whose config names a grant without a browser,
/// holding the token got for it now; `Ok(None)` for the
/// authorization-code grant (a person logs in with `devboy login`).
pub async fn manager(
    url: &str,
    oauth: &OAuthConfig,
) -> Result<Option<AuthorizationManager>, AuthError> {
    match oauth.grant {
        OAuthGrant::AuthorizationCode => Ok(None),
        OAuthGrant::ClientCredentials => client_credentials(url, oauth).await,
        OAuthGrant::CrossApp => cross_app(url, oauth).await,
    }
}

/// What the grant is called in a message.
pub fn grant_name(grant: OAuthGrant) -> &'static str {
    match grant {
        OAuthGrant::AuthorizationCode => "login",
        OAuthGrant::ClientCredentials => "client credentials",
        OAuthGrant::CrossApp => "cross-app access grant",
    }
}

fn refused(what: impl Into<String>) -> AuthError {
    AuthError::ClientCredentialsError(what.into())
}

async fn client_credentials(
    url: &str,
    oauth: &OAuthConfig,
) -> Result<Option<AuthorizationManager>, AuthError> {
    let Some(client_id) = &oauth.client_id else {
        return Ok(None);
    };
    let scopes = oauth.scopes.clone().unwrap_or_default();
    if let Some(secret) = &oauth.client_secret {
        let mut state = OAuthState::Unauthorized(bare_manager(url).await?);
        state
            .authenticate_client_credentials(ClientCredentialsConfig::ClientSecret {
                client_id: client_id.clone(),
                client_secret: secret.clone(),
                scopes,
                resource: Some(url.to_owned()),
            })
            .await?;
        return Ok(state.into_authorization_manager());
    }
    let Some(path) = &oauth.private_key_file else {
        return Ok(None);
    };
    let pem = std::fs::read_to_string(path)
        .map_err(|e| refused(format!("private_key_file {}: {e}", path.display())))?;
    let key = SigningKey::from_pem(&pem)
        .map_err(|e| refused(format!("private_key_file {}: {e}", path.display())))?;
    let manager = bare_manager(url).await?;
    let metadata = manager.resolve_metadata().await?.metadata;
    offers(
        &metadata,
        "token_endpoint_auth_methods_supported",
        "private_key_jwt",
    )?;
    offers(
        &metadata,
        "token_endpoint_auth_signing_alg_values_supported",
        key.algorithm(),
    )?;
    // RFC 7523 names the authorization server as the audience; its issuer
    // identifies it (the token endpoint where it names none).
    let audience = metadata
        .issuer
        .clone()
        .unwrap_or_else(|| metadata.token_endpoint.clone());
    let assertion = key
        .client_assertion(client_id, &audience)
        .map_err(refused)?;
    let mut form = vec![
        ("grant_type", "client_credentials".to_owned()),
        ("client_assertion_type", ASSERTION_TYPE.to_owned()),
        ("client_assertion", assertion),
        ("resource", url.to_owned()),
    ];
    if !scopes.is_empty() {
        form.push(("scope", scopes.join(" ")));
    }
    let token: OAuthTokenResponse = post_form(&metadata.token_endpoint, &form, None).await?;
    authorized(manager, client_id, token).await
}

async fn cross_app(
    url: &str,
    oauth: &OAuthConfig,
) -> Result<Option<AuthorizationManager>, AuthError> {
    let (Some(client_id), Some(secret), Some(idp)) = (
        &oauth.client_id,
        &oauth.client_secret,
        &oauth.idp_token_endpoint,
    ) else {
        return Ok(None);
    };
    let id_token = match (&oauth.id_token, &oauth.id_token_command) {
        (Some(token), _) => token.clone(),
        (None, Some(command)) => run_id_token_command(command).await?,
        (None, None) => return Ok(None),
    };
    let manager = bare_manager(url).await?;
    let metadata = manager.resolve_metadata().await?.metadata;
    offers(&metadata, "grant_types_supported", JWT_BEARER)?;
    let issuer = metadata.issuer.clone().ok_or_else(|| {
        refused("the authorization server's metadata names no issuer, which the identity provider's grant must name")
    })?;
    let scope = oauth.scopes.as_ref().map(|s| s.join(" "));

    // 1. At the identity provider: the ID token for a grant to this server.
    let mut form = vec![
        ("grant_type", TOKEN_EXCHANGE.to_owned()),
        ("requested_token_type", ID_JAG.to_owned()),
        ("subject_token", id_token),
        ("subject_token_type", ID_TOKEN.to_owned()),
        ("audience", issuer),
        ("resource", url.to_owned()),
    ];
    if let Some(id) = &oauth.idp_client_id {
        form.push(("client_id", id.clone()));
    }
    if let Some(scope) = &scope {
        form.push(("scope", scope.clone()));
    }
    let exchanged: Exchanged = post_form(idp, &form, None).await?;
    if exchanged.issued_token_type.as_deref() != Some(ID_JAG) {
        return Err(refused(format!(
            "{idp}: the identity provider issued {} instead of an ID-JAG",
            exchanged
                .issued_token_type
                .as_deref()
                .unwrap_or("a token of no named type")
        )));
    }

    // 2. At the authorization server: the grant for the server's token,
    //    from the client it knows (client_secret_basic).
    let mut form = vec![
        ("grant_type", JWT_BEARER.to_owned()),
        ("assertion", exchanged.access_token),
        ("resource", url.to_owned()),
    ];
    if let Some(scope) = scope {
        form.push(("scope", scope));
    }
    let basic = basic_credentials(client_id, secret);
    let token: OAuthTokenResponse =
        post_form(&metadata.token_endpoint, &form, Some(&basic)).await?;
    authorized(manager, client_id, token).await
}

/// The identity provider's answer to the exchange (RFC 8693 §2.2.1).
#[derive(serde::Deserialize)]
struct Exchanged {
    access_token: String,
    issued_token_type: Option<String>,
}

/// `manager` holding `token`, as rmcp's clients use it.
async fn authorized(
    manager: AuthorizationManager,
    client_id: &str,
    token: OAuthTokenResponse,
) -> Result<Option<AuthorizationManager>, AuthError> {
    let mut state = OAuthState::Unauthorized(manager);
    state.set_credentials(client_id, token).await?;
    Ok(state.into_authorization_manager())
}

/// Refuses a grant the authorization server says it does not take, when
/// it lists what it takes under `field`.
fn offers(metadata: &AuthorizationMetadata, field: &str, wanted: &str) -> Result<(), AuthError> {
    let Some(listed) = metadata
        .additional_fields
        .get(field)
        .and_then(|v| v.as_array())
    else {
        return Ok(());
    };
    if listed.iter().any(|v| v.as_str() == Some(wanted)) {
        return Ok(());
    }
    let names: Vec<&str> = listed.iter().filter_map(|v| v.as_str()).collect();
    Err(refused(format!(
        "the authorization server does not take `{wanted}` ({field}: {})",
        names.join(", ")
    )))
}

/// `Authorization: Basic` for a client id and secret, each form-encoded
/// first (RFC 6749 §2.3.1).
fn basic_credentials(id: &str, secret: &str) -> String {
    use base64::Engine as _;
    let encode = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let pair = format!("{}:{}", encode(id), encode(secret));
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

/// POSTs `form` to a token endpoint and reads its JSON answer. The
/// endpoint must be `https://`, or `http://` on this machine or a private
/// network; redirects are not followed. An error answer is reported by
/// its `error` and `error_description`, never with the body's tokens.
async fn post_form<T: serde::de::DeserializeOwned>(
    endpoint: &str,
    form: &[(&str, String)],
    authorization: Option<&str>,
) -> Result<T, AuthError> {
    let parsed = reqwest::Url::parse(endpoint)
        .map_err(|e| refused(format!("{endpoint}: not a URL: {e}")))?;
    if parsed.scheme() != "https" && !(parsed.scheme() == "http" && is_private(endpoint)) {
        return Err(refused(format!(
            "{endpoint}: a token endpoint must be https:// (http:// only on this machine or a private network)"
        )));
    }
    let client = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| refused(e.to_string()))?;
    let body: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form.iter().map(|(k, v)| (*k, v.as_str())))
        .finish();
    let mut request = client
        .post(parsed)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(body);
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response = request
        .send()
        .await
        .map_err(|e| refused(format!("{endpoint}: {}", e.without_url())))?;
    let status = response.status();
    let bytes = response
        .bytes()
        .await
        .map_err(|e| refused(format!("{endpoint}: {}", e.without_url())))?;
    if !status.is_success() {
        let said: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        let error = said["error"].as_str().unwrap_or("no error code");
        let description = said["error_description"].as_str().unwrap_or("");
        return Err(refused(format!(
            "{endpoint} answered {status}: {error}{}{description}",
            if description.is_empty() { "" } else { ": " }
        )));
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| refused(format!("{endpoint}: an answer that is not a token: {e}")))
}

/// Runs `id_token_command` through the platform's shell and takes its
/// standard output, trimmed, as the ID token.
async fn run_id_token_command(command: &str) -> Result<String, AuthError> {
    #[cfg(unix)]
    let mut shell = {
        let mut c = tokio::process::Command::new("sh");
        c.arg("-c").arg(command);
        c
    };
    #[cfg(windows)]
    let mut shell = {
        let mut c = tokio::process::Command::new("cmd");
        c.arg("/C").arg(command);
        c
    };
    shell
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let done = tokio::time::timeout(REQUEST_TIMEOUT, shell.output())
        .await
        .map_err(|_| {
            refused(format!(
                "id_token_command `{command}` took over {REQUEST_TIMEOUT:?}"
            ))
        })?
        .map_err(|e| refused(format!("id_token_command `{command}`: {e}")))?;
    if !done.status.success() {
        let stderr = String::from_utf8_lossy(&done.stderr);
        let stderr = stderr.trim();
        let mut from = stderr.len().saturating_sub(300);
        while !stderr.is_char_boundary(from) {
            from += 1;
        }
        let tail = &stderr[from..];
        return Err(refused(format!(
            "id_token_command `{command}` failed ({}): {tail}",
            done.status
        )));
    }
    let token = String::from_utf8_lossy(&done.stdout).trim().to_owned();
    if token.is_empty() {
        return Err(refused(format!(
            "id_token_command `{command}` printed nothing"
        )));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_encode_each_part_before_joining_them() {
        use base64::Engine as _;
        let header = basic_credentials("app:1", "s3cr=t/+");
        let pair = base64::engine::general_purpose::STANDARD
            .decode(header.strip_prefix("Basic ").unwrap())
            .unwrap();
        assert_eq!(String::from_utf8(pair).unwrap(), "app%3A1:s3cr%3Dt%2F%2B");
    }

    #[tokio::test]
    async fn the_id_token_command_gives_its_output_or_says_why_not() {
        assert_eq!(
            run_id_token_command("printf '  tok.en  \\n'")
                .await
                .unwrap(),
            "tok.en"
        );
        let failed = run_id_token_command("echo denied >&2; exit 3")
            .await
            .unwrap_err()
            .to_string();
        assert!(
            failed.contains("failed") && failed.contains("denied"),
            "{failed}"
        );
        let empty = run_id_token_command("true").await.unwrap_err().to_string();
        assert!(empty.contains("printed nothing"), "{empty}");
    }

    #[tokio::test]
    async fn a_token_endpoint_in_the_clear_on_the_internet_is_refused() {
        let error = post_form::<serde_json::Value>("http://auth.example.com/token", &[], None)
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("must be https://"), "{error}");
    }
}
