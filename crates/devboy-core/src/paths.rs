//! Default locations, in one place for every command.
//!
//! XDG layout: `$XDG_CONFIG_HOME/devboy/` (else `~/.config/devboy/`), with
//! telemetry below it, and `DEVBOY_CONFIG_DIR` / `DEVBOY_TELEMETRY_DIR` to
//! override either. Runtime state (the context-partition files that the
//! Claude Code hooks write and running proxies watch) lives in
//! `$XDG_RUNTIME_DIR/devboy/` (else `<config_dir>/run/`), overridden by
//! `DEVBOY_RUNTIME_DIR`. What devboy can rebuild (explore's indexes, the
//! upstreams' last tool lists) lives in `$XDG_CACHE_HOME/devboy/` (else
//! `~/.cache/devboy/`), overridden by `DEVBOY_CACHE_DIR`. Empty variables
//! count as unset, and a relative `XDG_*` directory is ignored, as the XDG
//! spec asks. Nothing here touches
//! the file system; the `*_with_env` forms take the environment as a
//! function so that callers and tests need not mutate the process's.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::hash::fnv1a64;

/// Overrides [`config_dir`].
pub const CONFIG_DIR_ENV: &str = "DEVBOY_CONFIG_DIR";
/// Overrides [`telemetry_dir`].
pub const TELEMETRY_DIR_ENV: &str = "DEVBOY_TELEMETRY_DIR";
/// Overrides [`runtime_dir`].
pub const RUNTIME_DIR_ENV: &str = "DEVBOY_RUNTIME_DIR";
/// Overrides [`cache_dir`].
pub const CACHE_DIR_ENV: &str = "DEVBOY_CACHE_DIR";
/// The config file's name inside [`config_dir`].
pub const CONFIG_FILE_NAME: &str = "devboy.toml";
/// The endpoint names map's name inside [`config_dir`].
pub const ENDPOINT_NAMES_FILE_NAME: &str = "endpoint-names.json";

/// devboy's config directory: `$DEVBOY_CONFIG_DIR`, else
/// `$XDG_CONFIG_HOME/devboy`, else `$HOME/.config/devboy`.
pub fn config_dir() -> PathBuf {
    config_dir_with_env(&process_env)
}

/// Where telemetry goes: `$DEVBOY_TELEMETRY_DIR`, else
/// `<config_dir>/telemetry`.
pub fn telemetry_dir() -> PathBuf {
    telemetry_dir_with_env(&process_env)
}

/// The config file read when none is given: `<config_dir>/devboy.toml`.
pub fn default_config_file() -> PathBuf {
    default_config_file_with_env(&process_env)
}

/// The hash → name map of the user's own endpoints, which `devboy mcp`
/// keeps and `devboy tune` reads: `<config_dir>/endpoint-names.json`. In
/// the config directory, not with telemetry, so that sharing telemetry
/// shares no names.
pub fn endpoint_names_file() -> PathBuf {
    endpoint_names_file_with_env(&process_env)
}

/// [`endpoint_names_file`] with the environment given as a function.
pub fn endpoint_names_file_with_env(env: &dyn Fn(&str) -> Option<OsString>) -> PathBuf {
    config_dir_with_env(env).join(ENDPOINT_NAMES_FILE_NAME)
}

/// Where running devboy processes and hook commands meet:
/// `$DEVBOY_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/devboy`, else
/// `<config_dir>/run`.
pub fn runtime_dir() -> PathBuf {
    runtime_dir_with_env(&process_env)
}

/// [`runtime_dir`] with the environment given as a function. A relative
/// `XDG_RUNTIME_DIR` is ignored, as for `XDG_CONFIG_HOME`.
pub fn runtime_dir_with_env(env: &dyn Fn(&str) -> Option<OsString>) -> PathBuf {
    if let Some(dir) = non_empty(env, RUNTIME_DIR_ENV) {
        return PathBuf::from(dir);
    }
    match xdg(env, "XDG_RUNTIME_DIR") {
        Some(xdg) => xdg.join("devboy"),
        None => config_dir_with_env(env).join("run"),
    }
}

/// Where devboy keeps what it can rebuild: `$DEVBOY_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/devboy`, else `$HOME/.cache/devboy`, else (no home at
/// all) `devboy-cache` in the temporary directory, so a cache never lands
/// in whatever directory devboy was started in.
pub fn cache_dir() -> PathBuf {
    cache_dir_with_env(&process_env)
}

/// [`cache_dir`] with the environment given as a function.
pub fn cache_dir_with_env(env: &dyn Fn(&str) -> Option<OsString>) -> PathBuf {
    if let Some(dir) = non_empty(env, CACHE_DIR_ENV) {
        return PathBuf::from(dir);
    }
    if let Some(xdg) = xdg(env, "XDG_CACHE_HOME") {
        return xdg.join("devboy");
    }
    match non_empty(env, "HOME").or_else(|| non_empty(env, "USERPROFILE")) {
        Some(home) => PathBuf::from(home).join(".cache").join("devboy"),
        None => non_empty(env, "TMPDIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir)
            .join("devboy-cache"),
    }
}

/// Where `devboy mcp` keeps each upstream's last listing, so that its
/// first `tools/list` can answer at once: `<cache_dir>/listings`.
pub fn listing_cache_dir() -> PathBuf {
    listing_cache_dir_with_env(&process_env)
}

/// [`listing_cache_dir`] with the environment given as a function.
pub fn listing_cache_dir_with_env(env: &dyn Fn(&str) -> Option<OsString>) -> PathBuf {
    cache_dir_with_env(env).join("listings")
}

/// The context-partition state file of the project at `project` (which the
/// caller has already made absolute and canonical; this function does no
/// I/O): `<runtime_dir>/partitions/<16 hex digits>.json`, the digits being
/// the 64-bit FNV-1a hash of the path's bytes. FNV-1a, not std's hasher,
/// because the name must be the same in every devboy build that shares the
/// directory.
pub fn partition_file(runtime_dir: &Path, project: &Path) -> PathBuf {
    runtime_dir.join("partitions").join(format!(
        "{:016x}.json",
        fnv1a64(project.as_os_str().as_encoded_bytes())
    ))
}

/// [`config_dir`] with the environment given as a function.
///
/// Without `HOME` (nor `USERPROFILE`, for Windows) the result is the
/// relative `.config/devboy`.
pub fn config_dir_with_env(env: &dyn Fn(&str) -> Option<OsString>) -> PathBuf {
    if let Some(dir) = non_empty(env, CONFIG_DIR_ENV) {
        return PathBuf::from(dir);
    }
    xdg_config_home_with_env(env).join("devboy")
}

/// The XDG config base every program shares: `$XDG_CONFIG_HOME` when it is
/// absolute, else `$HOME/.config` (where Claude Desktop keeps its config on
/// Linux, too).
pub fn xdg_config_home() -> PathBuf {
    xdg_config_home_with_env(&process_env)
}

/// [`xdg_config_home`] with the environment given as a function.
pub fn xdg_config_home_with_env(env: &dyn Fn(&str) -> Option<OsString>) -> PathBuf {
    if let Some(xdg) = xdg(env, "XDG_CONFIG_HOME") {
        return xdg;
    }
    let home = non_empty(env, "HOME")
        .or_else(|| non_empty(env, "USERPROFILE"))
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".config")
}

/// [`telemetry_dir`] with the environment given as a function.
pub fn telemetry_dir_with_env(env: &dyn Fn(&str) -> Option<OsString>) -> PathBuf {
    match non_empty(env, TELEMETRY_DIR_ENV) {
        Some(dir) => PathBuf::from(dir),
        None => config_dir_with_env(env).join("telemetry"),
    }
}

/// [`default_config_file`] with the environment given as a function.
pub fn default_config_file_with_env(env: &dyn Fn(&str) -> Option<OsString>) -> PathBuf {
    config_dir_with_env(env).join(CONFIG_FILE_NAME)
}

fn process_env(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

fn non_empty(env: &dyn Fn(&str) -> Option<OsString>, name: &str) -> Option<OsString> {
    env(name).filter(|v| !v.is_empty())
}

/// An XDG base directory variable, when set to an absolute path (the spec
/// has a relative one ignored).
fn xdg(env: &dyn Fn(&str) -> Option<OsString>, name: &str) -> Option<PathBuf> {
    non_empty(env, name)
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn home_fallback() {
        let env = env_of(&[("HOME", "/home/u")]);
        assert_eq!(
            config_dir_with_env(&env),
            PathBuf::from("/home/u/.config/devboy")
        );
        assert_eq!(
            telemetry_dir_with_env(&env),
            PathBuf::from("/home/u/.config/devboy/telemetry")
        );
        assert_eq!(
            default_config_file_with_env(&env),
            PathBuf::from("/home/u/.config/devboy/devboy.toml")
        );
    }

    #[test]
    fn xdg_config_home_wins_over_home_when_absolute() {
        let env = env_of(&[("HOME", "/home/u"), ("XDG_CONFIG_HOME", "/xdg")]);
        assert_eq!(config_dir_with_env(&env), PathBuf::from("/xdg/devboy"));
        let relative = env_of(&[("HOME", "/home/u"), ("XDG_CONFIG_HOME", "rel")]);
        assert_eq!(
            config_dir_with_env(&relative),
            PathBuf::from("/home/u/.config/devboy")
        );
    }

    #[test]
    fn devboy_overrides_win_and_empty_counts_as_unset() {
        let env = env_of(&[
            ("HOME", "/home/u"),
            ("XDG_CONFIG_HOME", "/xdg"),
            ("DEVBOY_CONFIG_DIR", "/etc/devboy"),
            ("DEVBOY_TELEMETRY_DIR", "/var/tele"),
        ]);
        assert_eq!(config_dir_with_env(&env), PathBuf::from("/etc/devboy"));
        assert_eq!(telemetry_dir_with_env(&env), PathBuf::from("/var/tele"));
        assert_eq!(
            endpoint_names_file_with_env(&env),
            PathBuf::from("/etc/devboy/endpoint-names.json"),
            "beside the config, never under the telemetry directory"
        );
        assert_eq!(
            default_config_file_with_env(&env),
            PathBuf::from("/etc/devboy/devboy.toml")
        );
        let empty = env_of(&[
            ("HOME", "/home/u"),
            ("DEVBOY_CONFIG_DIR", ""),
            ("XDG_CONFIG_HOME", ""),
        ]);
        assert_eq!(
            config_dir_with_env(&empty),
            PathBuf::from("/home/u/.config/devboy")
        );
    }

    #[test]
    fn telemetry_follows_config_dir_override() {
        let env = env_of(&[("DEVBOY_CONFIG_DIR", "/c")]);
        assert_eq!(telemetry_dir_with_env(&env), PathBuf::from("/c/telemetry"));
    }

    #[test]
    fn runtime_dir_resolution() {
        let home = env_of(&[("HOME", "/home/u")]);
        assert_eq!(
            runtime_dir_with_env(&home),
            PathBuf::from("/home/u/.config/devboy/run")
        );
        let xdg = env_of(&[("HOME", "/home/u"), ("XDG_RUNTIME_DIR", "/run/user/1000")]);
        assert_eq!(
            runtime_dir_with_env(&xdg),
            PathBuf::from("/run/user/1000/devboy")
        );
        let relative = env_of(&[("DEVBOY_CONFIG_DIR", "/c"), ("XDG_RUNTIME_DIR", "rel")]);
        assert_eq!(runtime_dir_with_env(&relative), PathBuf::from("/c/run"));
        let overridden = env_of(&[
            ("XDG_RUNTIME_DIR", "/run/user/1000"),
            ("DEVBOY_RUNTIME_DIR", "/tmp/rt"),
        ]);
        assert_eq!(runtime_dir_with_env(&overridden), PathBuf::from("/tmp/rt"));
        let empty = env_of(&[
            ("DEVBOY_CONFIG_DIR", "/c"),
            ("DEVBOY_RUNTIME_DIR", ""),
            ("XDG_RUNTIME_DIR", ""),
        ]);
        assert_eq!(runtime_dir_with_env(&empty), PathBuf::from("/c/run"));
    }

    #[test]
    fn partition_file_is_stable_and_keyed_by_project() {
        let rt = Path::new("/rt");
        let a = partition_file(rt, Path::new("/work/a"));
        let b = partition_file(rt, Path::new("/work/b"));
        assert_ne!(a, b);
        assert_eq!(a, partition_file(rt, Path::new("/work/a")));
        assert_eq!(a.parent(), Some(Path::new("/rt/partitions")));
        // Pinned: the name must not change between builds.
        assert_eq!(
            partition_file(rt, Path::new("")),
            Path::new("/rt/partitions/cbf29ce484222325.json")
        );
        let name = a.file_name().unwrap().to_str().unwrap();
        assert_eq!(name.len(), "0123456789abcdef.json".len());
    }

    #[test]
    fn cache_dir_resolution() {
        let home = env_of(&[("HOME", "/home/u")]);
        assert_eq!(
            cache_dir_with_env(&home),
            PathBuf::from("/home/u/.cache/devboy")
        );
        assert_eq!(
            listing_cache_dir_with_env(&home),
            PathBuf::from("/home/u/.cache/devboy/listings")
        );
        let xdg = env_of(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "/xc")]);
        assert_eq!(cache_dir_with_env(&xdg), PathBuf::from("/xc/devboy"));
        let relative = env_of(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "rel")]);
        assert_eq!(
            cache_dir_with_env(&relative),
            PathBuf::from("/home/u/.cache/devboy")
        );
        let overridden = env_of(&[("XDG_CACHE_HOME", "/xc"), ("DEVBOY_CACHE_DIR", "/c")]);
        assert_eq!(cache_dir_with_env(&overridden), PathBuf::from("/c"));
        let homeless = env_of(&[("TMPDIR", "/scratch")]);
        assert_eq!(
            cache_dir_with_env(&homeless),
            PathBuf::from("/scratch/devboy-cache")
        );
    }

    #[test]
    fn no_home_is_relative() {
        let env = env_of(&[]);
        assert_eq!(config_dir_with_env(&env), PathBuf::from(".config/devboy"));
    }
}
