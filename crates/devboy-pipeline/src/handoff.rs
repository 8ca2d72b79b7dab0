//! [`Handoff`]: one processed result, and whether whoever waits for it
//! still does.
//!
//! The proxy gives the pipeline a deadline per result: past it, the
//! original goes to the client untouched and the session keeps serving.
//! The pipeline itself knows no clock, so the deadline reaches it as this
//! flag, set by the waiter when it stops waiting. The pipeline looks at it
//! between its stages and stops early; and since the waiter and the
//! pipeline may both decide at the same moment, the last word is a single
//! atomic exchange: either the pipeline hands its result over (and the
//! waiter sends it) or the waiter has given up (and the pipeline takes
//! back whatever it recorded as delivered, because the model never saw it).

use std::sync::atomic::{AtomicU8, Ordering};

const WAITING: u8 = 0;
const HANDED_OVER: u8 = 1;
const GIVEN_UP: u8 = 2;

/// The fate of one result between the pipeline and its waiter; see the
/// module docs. Exactly one of [`hand_over`](Self::hand_over) and
/// [`give_up`](Self::give_up) succeeds.
#[derive(Debug, Default)]
pub struct Handoff(AtomicU8);

impl Handoff {
    /// A result someone waits for.
    pub fn new() -> Self {
        Self(AtomicU8::new(WAITING))
    }

    /// The waiter stops waiting. `true` if it was first: the pipeline's
    /// result will not be used. `false` if the result was already handed
    /// over (the waiter must then take it).
    pub fn give_up(&self) -> bool {
        self.0
            .compare_exchange(WAITING, GIVEN_UP, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The pipeline's check between stages: the waiter has given up.
    pub fn given_up(&self) -> bool {
        self.0.load(Ordering::Acquire) == GIVEN_UP
    }

    /// The pipeline is done. `true` if the waiter takes the result; `false`
    /// if it had given up, and what the result recorded must be undone.
    pub fn hand_over(&self) -> bool {
        self.0
            .compare_exchange(WAITING, HANDED_OVER, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_side_wins() {
        let h = Handoff::new();
        assert!(!h.given_up());
        assert!(h.hand_over());
        assert!(!h.give_up(), "already handed over");
        assert!(!h.given_up());

        let h = Handoff::new();
        assert!(h.give_up());
        assert!(h.given_up());
        assert!(!h.hand_over(), "the waiter has gone");
    }

    #[test]
    fn a_race_has_one_winner() {
        for _ in 0..200 {
            let h = std::sync::Arc::new(Handoff::new());
            let other = h.clone();
            let waiter = std::thread::spawn(move || other.give_up());
            let handed = h.hand_over();
            let gave_up = waiter.join().unwrap();
            assert!(handed != gave_up);
        }
    }
}
