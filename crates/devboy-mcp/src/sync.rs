//! Poison-tolerant locking for the whole crate: a holder that panicked
//! must not take the proxy down, so every guard is recovered from a
//! poisoned lock.

use std::sync::{Mutex, RwLock};

/// Poison-tolerant lock: a panicked holder must not take the proxy down.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Poison-tolerant read lock.
pub(crate) fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

/// Poison-tolerant write lock.
pub(crate) fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}
