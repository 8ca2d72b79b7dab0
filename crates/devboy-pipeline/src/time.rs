//! The caller's session clock, passed into every call that depends on age.

use std::time::Duration;

/// A point on the caller's monotonic session clock, in milliseconds from an
/// origin the caller chooses (typically the session's start).
///
/// The crate never reads a clock itself: the proxy passes
/// `Timestamp::from_millis(start.elapsed().as_millis() as u64)`, tests and
/// replays pass whatever their script says. Callers must not let it run
/// backwards; if it does, ages saturate at zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The clock's origin.
    pub const ZERO: Self = Self(0);

    /// `ms` milliseconds after the origin.
    pub const fn from_millis(ms: u64) -> Self {
        Self(ms)
    }

    /// Milliseconds after the origin.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// How long after `earlier` this is; zero if it is not after it.
    pub fn saturating_since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    /// This point moved `d` later (whole milliseconds, saturating).
    pub fn saturating_add(self, d: Duration) -> Self {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Self(self.0.saturating_add(ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_saturate() {
        let a = Timestamp::from_millis(1_000);
        let b = a.saturating_add(Duration::from_secs(2));
        assert_eq!(b.as_millis(), 3_000);
        assert_eq!(b.saturating_since(a), Duration::from_secs(2));
        assert_eq!(a.saturating_since(b), Duration::ZERO);
        assert_eq!(
            Timestamp::from_millis(u64::MAX).saturating_add(Duration::MAX),
            Timestamp::from_millis(u64::MAX)
        );
        assert_eq!(Timestamp::ZERO, Timestamp::default());
    }
}
