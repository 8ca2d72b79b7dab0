//! The per-install salt and the salted hashes every identifier in a
//! telemetry file is replaced by.
//!
//! `h(x)` is the first 16 hex digits of SHA-256(salt ‖ x), where the salt is
//! the 32 raw bytes behind the hex in the `salt` file. The same install
//! always gives the same hash for the same name (so `devboy tune` can group
//! by endpoint); without the salt, a hash cannot be checked against a
//! guessed name.

use std::fmt;
use std::io::{self, Write};
use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

/// How many random bytes a salt holds.
pub const SALT_BYTES: usize = 32;

/// The per-install salt, with SHA-256 already primed with it so each hash
/// only absorbs its input.
#[derive(Clone)]
pub struct Salt {
    primed: Sha256,
}

impl fmt::Debug for Salt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the salt itself.
        f.write_str("Salt(…)")
    }
}

impl Salt {
    /// A salt from its bytes.
    pub fn from_bytes(bytes: [u8; SALT_BYTES]) -> Self {
        let mut primed = Sha256::new();
        primed.update(bytes);
        Self { primed }
    }

    /// A fresh random salt.
    pub fn random() -> io::Result<Self> {
        Ok(Self::from_bytes(random_bytes()?))
    }

    /// The salt stored at `path` (64 hex digits), created with fresh random
    /// bytes and mode 0600 if there is none. Two processes creating it at
    /// once agree: the file appears whole (hard link of a finished temporary
    /// file), and the one that loses the race reads the winner's.
    ///
    /// A salt file that is there but damaged (cut short by a full disk,
    /// edited, not text) is replaced by a fresh salt, with a warning: the
    /// old salt is lost either way, and keeping telemetry off until a
    /// person deletes the file would lose every event meanwhile.
    pub fn load_or_create(path: &Path) -> io::Result<Self> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                return match parse_hex(text.trim()) {
                    Ok(bytes) => Ok(Self::from_bytes(bytes)),
                    Err(damage) => Self::replace_damaged(path, &damage),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                return Self::replace_damaged(path, &e);
            }
            Err(e) => return Err(e),
        }
        let bytes = random_bytes()?;
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        let written = (|| {
            let mut file = private_file(&tmp)?;
            file.write_all(hex(&bytes).as_bytes())?;
            file.write_all(b"\n")?;
            file.sync_all()
        })();
        let linked = written.and_then(|()| std::fs::hard_link(&tmp, path));
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(Self::from_bytes(bytes)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let text = std::fs::read_to_string(path)?;
                parse_hex(text.trim()).map(Self::from_bytes)
            }
            Err(e) => Err(e),
        }
    }

    /// Replaces the damaged salt at `path` with a fresh one, under the
    /// file's lock: processes that find it damaged at once agree on one
    /// new salt (a later one reads what the first wrote).
    fn replace_damaged(path: &Path, damage: &io::Error) -> io::Result<Self> {
        let _lock = devboy_sharedfile::FileLock::acquire(path);
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(bytes) = parse_hex(text.trim()) {
                return Ok(Self::from_bytes(bytes));
            }
        }
        let bytes = random_bytes()?;
        devboy_sharedfile::replace(path, format!("{}\n", hex(&bytes)).as_bytes())?;
        tracing::warn!(
            salt = %path.display(),
            damage = %damage,
            "the telemetry salt was damaged and is replaced by a fresh one; events recorded before no longer group with later ones"
        );
        Ok(Self::from_bytes(bytes))
    }

    /// `h(parts concatenated)`: the first 64 bits of SHA-256(salt ‖ parts).
    pub fn h(&self, parts: &[&[u8]]) -> Hash64 {
        let digest = self.digest(parts);
        let mut first = [0; 8];
        first.copy_from_slice(&digest[..8]);
        Hash64(u64::from_be_bytes(first))
    }

    /// The first 128 bits of SHA-256(salt ‖ parts), for body fingerprints.
    pub fn h128(&self, parts: &[&[u8]]) -> Hash128 {
        let digest = self.digest(parts);
        let mut first = [0; 16];
        first.copy_from_slice(&digest[..16]);
        Hash128(u128::from_be_bytes(first))
    }

    fn digest(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut hasher = self.primed.clone();
        for part in parts {
            hasher.update(part);
        }
        hasher.finalize().into()
    }
}

/// `bytes` fresh random bytes from the operating system.
pub(crate) fn random_bytes<const N: usize>() -> io::Result<[u8; N]> {
    let mut bytes = [0; N];
    getrandom::fill(&mut bytes).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(bytes)
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

fn parse_hex(text: &str) -> io::Result<[u8; SALT_BYTES]> {
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("expected {} hex digits", SALT_BYTES * 2),
        )
    };
    if text.len() != SALT_BYTES * 2 || !text.is_ascii() {
        return Err(bad());
    }
    let mut out = [0; SALT_BYTES];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

/// A new file only the owner can read (mode 0600 on Unix).
pub(crate) fn private_file(path: &Path) -> io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// A 64-bit salted hash, written as 16 lower-case hex digits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hash64(pub u64);

/// A 128-bit salted hash, written as 32 lower-case hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hash128(pub u128);

impl fmt::Display for Hash64 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl fmt::Display for Hash128 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// A hash that is not the right number of hex digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadHash(String);

impl fmt::Display for BadHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a telemetry hash: {:?}", self.0)
    }
}

impl std::error::Error for BadHash {}

fn exact_hex(text: &str, digits: usize) -> Result<u128, BadHash> {
    if text.len() != digits || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(BadHash(text.to_owned()));
    }
    u128::from_str_radix(text, 16).map_err(|_| BadHash(text.to_owned()))
}

impl FromStr for Hash64 {
    type Err = BadHash;
    fn from_str(s: &str) -> Result<Self, BadHash> {
        exact_hex(s, 16).map(|v| Hash64(v as u64))
    }
}

impl FromStr for Hash128 {
    type Err = BadHash;
    fn from_str(s: &str) -> Result<Self, BadHash> {
        exact_hex(s, 32).map(Hash128)
    }
}

macro_rules! serde_as_hex {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = std::borrow::Cow::<'de, str>::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

serde_as_hex!(Hash64);
serde_as_hex!(Hash128);

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "devboy-telemetry-hash-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn hashes_are_stable_per_salt_and_differ_across_salts() {
        let a = Salt::from_bytes([1; 32]);
        let a_again = Salt::from_bytes([1; 32]);
        let b = Salt::from_bytes([2; 32]);
        let name: &[u8] = b"gh__list_issues";
        assert_eq!(a.h(&[name]), a_again.h(&[name]));
        assert_ne!(a.h(&[name]), b.h(&[name]));
        assert_ne!(a.h(&[name]), a.h(&[b"gh__get_issue"]));
        // Parts are concatenated: the split does not matter.
        assert_eq!(a.h(&[b"gh__", b"list_issues"]), a.h(&[name]));
        // Pinned: h is the first 8 bytes of SHA-256(salt ‖ x).
        let mut plain = Sha256::new();
        plain.update([1u8; 32]);
        plain.update(name);
        let digest: [u8; 32] = plain.finalize().into();
        assert_eq!(a.h(&[name]).to_string(), hex(&digest[..8]));
        assert_eq!(a.h128(&[name]).to_string(), hex(&digest[..16]));
    }

    #[test]
    fn hashes_print_and_parse_as_fixed_width_hex() {
        let h = Hash64(0xab);
        assert_eq!(h.to_string(), "00000000000000ab");
        assert_eq!("00000000000000ab".parse(), Ok(h));
        assert!("ab".parse::<Hash64>().is_err());
        assert!("zz000000000000ab".parse::<Hash64>().is_err());
        let json = serde_json::to_string(&Hash128(1)).unwrap();
        assert_eq!(json, "\"00000000000000000000000000000001\"");
        assert_eq!(serde_json::from_str::<Hash128>(&json).unwrap(), Hash128(1));
    }

    #[test]
    fn the_salt_file_is_created_once_private_and_reused() {
        let dir = temp_dir("salt");
        let path = dir.join("salt");
        let first = Salt::load_or_create(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.trim().len(), 64);
        assert!(text.trim().bytes().all(|b| b.is_ascii_hexdigit()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let second = Salt::load_or_create(&path).unwrap();
        assert_eq!(first.h(&[b"x"]), second.h(&[b"x"]));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            text,
            "not rewritten"
        );
        // Another install has another salt.
        let other = Salt::load_or_create(&dir.join("other-salt")).unwrap();
        assert_ne!(first.h(&[b"x"]), other.h(&[b"x"]));
        // Leftover temporary files are cleaned up.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        // A damaged salt (cut short, not hex, not text) is replaced by a
        // fresh one, which is then kept.
        for damaged in [&text.as_bytes()[..20], b"not hex".as_slice(), &[0xff, 0xfe]] {
            std::fs::write(&path, damaged).unwrap();
            let fresh = Salt::load_or_create(&path).unwrap();
            let replaced = std::fs::read_to_string(&path).unwrap();
            assert_eq!(replaced.trim().len(), 64, "{replaced}");
            assert_ne!(replaced, text);
            let again = Salt::load_or_create(&path).unwrap();
            assert_eq!(fresh.h(&[b"x"]), again.h(&[b"x"]));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
