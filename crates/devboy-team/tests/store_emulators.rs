//! The `object_store` crate against real storage servers on loopback: moto's
//! S3-compatible server (`s3://`) and Azurite's blob service (`az://`), both
//! started by `devboy_testkit::stores` from the pinned test peers
//! (`tests/peers/install.sh`).
//!
//! What this establishes for the team store:
//! - put, get, list under a prefix, head, delete work on both;
//! - `PutMode::Create` succeeds once, then fails with `Error::AlreadyExists`,
//!   on both. On S3 this needs `S3ConditionalPut::ETagMatch` (`If-None-Match:
//!   *`), which is `object_store` 0.14's default (`aws_conditional_put=etag`);
//!   moto answers 412 like S3. With `disabled` the put is refused up front
//!   with `Error::NotImplemented`.
//! - `PutMode::Update` (compare-and-swap on the ETag, `If-Match`) succeeds
//!   with the current ETag and fails with `Error::Precondition` with a stale
//!   one, on both (S3 with the same `ETagMatch` setting).
//! - a missing bucket or container is `Error::NotFound`; a wrong key is
//!   `Error::PermissionDenied` (Azurite checks keys; moto only when started
//!   with `S3Server::start_refusing_credentials`, otherwise it accepts any).
//! - `list_with_offset` on Azurite returns the whole prefix (no `startFrom`
//!   there): filter on the client.
//!
//! Configuration goes through `parse_url_opts` with the servers' `env()` as
//! options, never through the process environment (tests run in parallel).

use devboy_testkit::stores::{AzuriteServer, S3Server};
use futures::TryStreamExt as _;
use object_store::path::Path;
use object_store::{
    Error, ObjectStore, ObjectStoreExt as _, PutMode, PutOptions, PutPayload, UpdateVersion,
};

fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A store for `url` configured from `env` plus `extra` options.
fn open_store(
    url: &str,
    env: Vec<(String, String)>,
    extra: &[(&str, &str)],
) -> Box<dyn ObjectStore> {
    install_crypto();
    let url = url::Url::parse(url).expect("url");
    let options = env
        .into_iter()
        .chain(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let (store, prefix) = object_store::parse_url_opts(&url, options).expect("build store");
    assert_eq!(prefix, Path::default());
    store
}

async fn put(store: &dyn ObjectStore, path: &str, bytes: &'static [u8]) {
    store
        .put(&Path::from(path), PutPayload::from_static(bytes))
        .await
        .unwrap_or_else(|e| panic!("put {path}: {e}"));
}

async fn read(store: &dyn ObjectStore, path: &str) -> Vec<u8> {
    let got = store
        .get(&Path::from(path))
        .await
        .unwrap_or_else(|e| panic!("get {path}: {e}"));
    got.bytes().await.expect("body").to_vec()
}

async fn list(store: &dyn ObjectStore, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = store
        .list(Some(&Path::from(prefix)))
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .unwrap_or_else(|e| panic!("list {prefix}: {e}"));
    names.sort();
    names
}

/// put / get / list / head / delete, then the conditional puts.
/// `offset_ignored`: the server ignores `list_with_offset`'s offset.
async fn exercise(store: &dyn ObjectStore, offset_ignored: bool) {
    put(store, "team/fp/a.parquet", b"alpha").await;
    put(store, "team/fp/b.parquet", b"beta").await;
    put(store, "team/other/c.parquet", b"gamma").await;
    put(store, "elsewhere/d.parquet", b"delta").await;

    assert_eq!(read(store, "team/fp/a.parquet").await, b"alpha");
    assert_eq!(
        list(store, "team/fp").await,
        ["team/fp/a.parquet", "team/fp/b.parquet"]
    );
    assert_eq!(
        list(store, "team").await,
        [
            "team/fp/a.parquet",
            "team/fp/b.parquet",
            "team/other/c.parquet"
        ]
    );
    // Listing after an offset (exclusive), e.g. to resume a scan. Azurite
    // has no `startFrom`: it ignores the offset, and `object_store` filters
    // on the client only in emulator mode (`AZURE_STORAGE_USE_EMULATOR`,
    // which parallel tests cannot use, see `AzuriteServer::env`). So on
    // Azurite here the whole prefix comes back; code that lists with an
    // offset must filter `location > offset` itself to be portable.
    let after: Vec<String> = store
        .list_with_offset(Some(&Path::from("team")), &Path::from("team/fp/b.parquet"))
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .expect("list with offset");
    let expected: &[&str] = if offset_ignored {
        &[
            "team/fp/a.parquet",
            "team/fp/b.parquet",
            "team/other/c.parquet",
        ]
    } else {
        &["team/other/c.parquet"]
    };
    assert_eq!(after, expected, "{store}: list_with_offset");
    let head = store.head(&Path::from("team/fp/b.parquet")).await.unwrap();
    assert_eq!(head.size, 4);

    // Overwrite, then delete.
    put(store, "team/fp/a.parquet", b"alpha 2").await;
    assert_eq!(read(store, "team/fp/a.parquet").await, b"alpha 2");
    store
        .delete(&Path::from("team/fp/a.parquet"))
        .await
        .unwrap();
    assert_eq!(list(store, "team/fp").await, ["team/fp/b.parquet"]);
    let gone = store.get(&Path::from("team/fp/a.parquet")).await;
    assert!(
        matches!(gone, Err(Error::NotFound { .. })),
        "get after delete: {gone:?}"
    );

    // PutMode::Create: once, then AlreadyExists; the first content stays.
    let lock = Path::from("team/lock");
    let created = store
        .put_opts(
            &lock,
            PutPayload::from_static(b"first"),
            PutOptions::from(PutMode::Create),
        )
        .await
        .expect("create once");
    let again = store
        .put_opts(
            &lock,
            PutPayload::from_static(b"second"),
            PutOptions::from(PutMode::Create),
        )
        .await;
    match &again {
        Err(e @ Error::AlreadyExists { .. }) => eprintln!("{store}: Create again: {e}"),
        other => panic!("{store}: second Create must be AlreadyExists, got {other:?}"),
    }
    assert_eq!(read(store, "team/lock").await, b"first");

    // PutMode::Update: compare-and-swap on the ETag.
    let first_version = UpdateVersion::from(created);
    assert!(first_version.e_tag.is_some(), "put returns an ETag");
    let updated = store
        .put_opts(
            &lock,
            PutPayload::from_static(b"third"),
            PutOptions::from(PutMode::Update(first_version.clone())),
        )
        .await
        .expect("update with the current ETag");
    assert_eq!(read(store, "team/lock").await, b"third");
    let stale = store
        .put_opts(
            &lock,
            PutPayload::from_static(b"fourth"),
            PutOptions::from(PutMode::Update(first_version)),
        )
        .await;
    match &stale {
        Err(e @ Error::Precondition { .. }) => eprintln!("{store}: Update with a stale ETag: {e}"),
        other => panic!("{store}: Update with a stale ETag must be Precondition, got {other:?}"),
    }
    assert_eq!(read(store, "team/lock").await, b"third");
    // The returned version chains.
    store
        .put_opts(
            &lock,
            PutPayload::from_static(b"fifth"),
            PutOptions::from(PutMode::Update(updated.into())),
        )
        .await
        .expect("update with the ETag the last update returned");
    assert_eq!(read(store, "team/lock").await, b"fifth");
}

#[tokio::test]
async fn s3_on_moto() {
    let server = S3Server::start();
    eprintln!("moto_server started in {:?}", server.startup_time());
    server.create_bucket("team-fingerprints");
    let store = open_store("s3://team-fingerprints", server.env(), &[]);
    exercise(store.as_ref(), false).await;

    // The same explicitly: `aws_conditional_put=etag` is the default.
    server.create_bucket("explicit-etag");
    let explicit = open_store(
        "s3://explicit-etag",
        server.env(),
        &[("aws_conditional_put", "etag")],
    );
    exercise(explicit.as_ref(), false).await;
}

#[tokio::test]
async fn s3_on_moto_through_the_builder() {
    use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, S3ConditionalPut};
    install_crypto();
    let server = S3Server::start();
    server.create_bucket("built");
    let builder = server.env().into_iter().fold(
        AmazonS3Builder::new().with_bucket_name("built"),
        |builder, (key, value)| {
            let key: AmazonS3ConfigKey = key.to_ascii_lowercase().parse().expect("known key");
            builder.with_config(key, value)
        },
    );
    let store = builder
        .with_conditional_put(S3ConditionalPut::ETagMatch)
        .build()
        .expect("build");
    exercise(&store, false).await;
}

#[tokio::test]
async fn s3_conditional_put_disabled_is_refused_up_front() {
    let server = S3Server::start();
    server.create_bucket("no-conditions");
    let store = open_store(
        "s3://no-conditions",
        server.env(),
        &[("aws_conditional_put", "disabled")],
    );
    let create = store
        .put_opts(
            &Path::from("x"),
            PutPayload::from_static(b"x"),
            PutOptions::from(PutMode::Create),
        )
        .await;
    match &create {
        Err(e @ Error::NotImplemented { .. }) => eprintln!("disabled Create: {e}"),
        other => panic!("disabled Create must be NotImplemented, got {other:?}"),
    }
}

#[tokio::test]
async fn s3_missing_bucket_is_not_found() {
    let server = S3Server::start();
    let store = open_store("s3://no-such-bucket", server.env(), &[]);
    let got = store.get(&Path::from("team/fp/a.parquet")).await;
    match &got {
        Err(e @ Error::NotFound { .. }) => eprintln!("moto, missing bucket, get: {e}"),
        other => panic!("missing bucket: expected NotFound, got {other:?}"),
    }
    let put = store
        .put(&Path::from("a"), PutPayload::from_static(b"a"))
        .await;
    match &put {
        Err(e) => eprintln!("moto, missing bucket, put: {e}"),
        Ok(_) => panic!("put into a missing bucket succeeded"),
    }
    let listed: Result<Vec<_>, _> = store.list(None).try_collect().await;
    match &listed {
        Err(e) => eprintln!("moto, missing bucket, list: {e}"),
        Ok(_) => panic!("list of a missing bucket succeeded"),
    }
}

#[tokio::test]
async fn s3_moto_accepts_any_credentials() {
    // moto does not check credentials (unless started with
    // INITIAL_NO_AUTH_ACTION_COUNT and IAM users): a wrong key still works.
    let server = S3Server::start();
    server.create_bucket("any-credentials");
    let store = open_store(
        "s3://any-credentials",
        server.env(),
        &[
            ("aws_access_key_id", "wrong"),
            ("aws_secret_access_key", "wrong"),
        ],
    );
    put(store.as_ref(), "a", b"a").await;
    assert_eq!(read(store.as_ref(), "a").await, b"a");
}

#[tokio::test]
async fn s3_wrong_credentials_are_permission_denied() {
    // moto with credential checks on and no IAM users refuses every key.
    let server = S3Server::start_refusing_credentials();
    let store = open_store("s3://any-bucket", server.env(), &[]);
    let put = store
        .put(&Path::from("a"), PutPayload::from_static(b"a"))
        .await;
    match &put {
        Err(e @ Error::PermissionDenied { .. }) => eprintln!("moto, wrong credentials, put: {e}"),
        other => panic!("wrong credentials: expected PermissionDenied, got {other:?}"),
    }
    let got = store.get(&Path::from("a")).await;
    match &got {
        Err(e @ Error::PermissionDenied { .. }) => eprintln!("moto, wrong credentials, get: {e}"),
        other => panic!("wrong credentials: expected PermissionDenied, got {other:?}"),
    }
    let listed: Result<Vec<_>, _> = store.list(None).try_collect().await;
    match &listed {
        Err(e) => eprintln!("moto, wrong credentials, list: {e}"),
        Ok(_) => panic!("list with wrong credentials succeeded"),
    }
}

#[tokio::test]
async fn azure_on_azurite() {
    let server = AzuriteServer::start();
    eprintln!("azurite-blob started in {:?}", server.startup_time());
    server.create_container("team-fingerprints");
    let store = open_store("az://team-fingerprints", server.env(), &[]);
    exercise(store.as_ref(), true).await;
}

#[tokio::test]
async fn azure_missing_container_is_not_found() {
    let server = AzuriteServer::start();
    let store = open_store("az://no-such-container", server.env(), &[]);
    let got = store.get(&Path::from("team/fp/a.parquet")).await;
    match &got {
        Err(e @ Error::NotFound { .. }) => eprintln!("azurite, missing container, get: {e}"),
        other => panic!("missing container: expected NotFound, got {other:?}"),
    }
    let put = store
        .put(&Path::from("a"), PutPayload::from_static(b"a"))
        .await;
    match &put {
        Err(e) => eprintln!("azurite, missing container, put: {e}"),
        Ok(_) => panic!("put into a missing container succeeded"),
    }
    let listed: Result<Vec<_>, _> = store.list(None).try_collect().await;
    match &listed {
        Err(e) => eprintln!("azurite, missing container, list: {e}"),
        Ok(_) => panic!("list of a missing container succeeded"),
    }
}

#[tokio::test]
async fn azure_wrong_key_is_refused() {
    let server = AzuriteServer::start();
    server.create_container("guarded");
    // A valid base64 key that is not the account's.
    let wrong = "d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXkgd3Jvbmcga2V5IHdyb25nIGtleQ==";
    let store = open_store(
        "az://guarded",
        server.env(),
        &[("azure_storage_account_key", wrong)],
    );
    let put = store
        .put(&Path::from("a"), PutPayload::from_static(b"a"))
        .await;
    match &put {
        Err(e @ Error::PermissionDenied { .. }) => eprintln!("azurite, wrong key, put: {e}"),
        other => panic!("wrong key: expected PermissionDenied, got {other:?}"),
    }
    let got = store.get(&Path::from("a")).await;
    match &got {
        Err(e @ Error::PermissionDenied { .. }) => eprintln!("azurite, wrong key, get: {e}"),
        other => panic!("wrong key: expected PermissionDenied, got {other:?}"),
    }
    let listed: Result<Vec<_>, _> = store.list(None).try_collect().await;
    match &listed {
        Err(e) => eprintln!("azurite, wrong key, list: {e}"),
        Ok(_) => panic!("list with a wrong key succeeded"),
    }
}

/// Several servers at once: distinct ports and data, nothing shared.
#[tokio::test]
async fn servers_side_by_side_are_independent() {
    let (s3_a, s3_b) = std::thread::scope(|scope| {
        let a = scope.spawn(S3Server::start);
        let b = scope.spawn(S3Server::start);
        (a.join().unwrap(), b.join().unwrap())
    });
    let (az_a, az_b) = std::thread::scope(|scope| {
        let a = scope.spawn(AzuriteServer::start);
        let b = scope.spawn(AzuriteServer::start);
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_ne!(s3_a.port(), s3_b.port());
    assert_ne!(az_a.port(), az_b.port());
    assert_ne!(az_a.data_dir(), az_b.data_dir());

    s3_a.create_bucket("shared-name");
    s3_b.create_bucket("shared-name");
    let a = open_store("s3://shared-name", s3_a.env(), &[]);
    let b = open_store("s3://shared-name", s3_b.env(), &[]);
    put(a.as_ref(), "only-a", b"a").await;
    assert!(matches!(
        b.head(&Path::from("only-a")).await,
        Err(Error::NotFound { .. })
    ));

    az_a.create_container("shared-name");
    az_b.create_container("shared-name");
    let a = open_store("az://shared-name", az_a.env(), &[]);
    put(a.as_ref(), "only-a", b"a").await;
    let b = open_store("az://shared-name", az_b.env(), &[]);
    assert!(matches!(
        b.head(&Path::from("only-a")).await,
        Err(Error::NotFound { .. })
    ));
}
