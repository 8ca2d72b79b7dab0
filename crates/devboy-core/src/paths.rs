//! Default locations, in one place for every command.
//!
//! XDG layout: `$XDG_CONFIG_HOME/devboy/` (else `~/.config/devboy/`), with
//! telemetry below it, and `DEVBOY_CONFIG_DIR` / `DEVBOY_TELEMETRY_DIR` to
//! override either. Empty variables count as unset, and a relative
//! `XDG_CONFIG_HOME` is ignored, as the XDG spec asks. Nothing here touches
//! the file system; the `*_with_env` forms take the environment as a
//! function so that callers and tests need not mutate the process's.

use std::ffi::OsString;
use std::path::PathBuf;

/// Overrides [`config_dir`].
pub const CONFIG_DIR_ENV: &str = "DEVBOY_CONFIG_DIR";
/// Overrides [`telemetry_dir`].
pub const TELEMETRY_DIR_ENV: &str = "DEVBOY_TELEMETRY_DIR";
/// The config file's name inside [`config_dir`].
pub const CONFIG_FILE_NAME: &str = "devboy.toml";

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

/// [`config_dir`] with the environment given as a function.
///
/// Without `HOME` (nor `USERPROFILE`, for Windows) the result is the
/// relative `.config/devboy`.
pub fn config_dir_with_env(env: &dyn Fn(&str) -> Option<OsString>) -> PathBuf {
    if let Some(dir) = non_empty(env, CONFIG_DIR_ENV) {
        return PathBuf::from(dir);
    }
    if let Some(xdg) = non_empty(env, "XDG_CONFIG_HOME").map(PathBuf::from) {
        if xdg.is_absolute() {
            return xdg.join("devboy");
        }
    }
    let home = non_empty(env, "HOME")
        .or_else(|| non_empty(env, "USERPROFILE"))
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".config").join("devboy")
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
    fn no_home_is_relative() {
        let env = env_of(&[]);
        assert_eq!(config_dir_with_env(&env), PathBuf::from(".config/devboy"));
    }
}
