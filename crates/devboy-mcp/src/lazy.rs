//! Lazy listing (`[tools] lazy`): a session whose client would otherwise
//! carry every tool definition on every model request is listed only the
//! built-ins, `devboy_find_tools` and the upstream tools it has found or
//! used. Found tools join the list with a `tools/list_changed`; a call to
//! any upstream tool by its exposed name works whether it is listed or not.
//!
//! Whether a session is lazy is decided at each `tools/list` from the
//! config, the client's name and what the full listing costs; once lazy, a
//! session stays lazy, so the model never sees tools it found vanish.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use devboy_core::config::ToolsConfig;
use rmcp::model::Tool;
use tokio::sync::watch;

use crate::catalog::Catalog;
use crate::sync::lock;

/// One session's lazy listing.
#[derive(Debug)]
pub(crate) struct LazyListing {
    active: AtomicBool,
    revealed: Mutex<HashSet<String>>,
    /// Bumped whenever a lazy session's list grows.
    grew: watch::Sender<u64>,
}

impl Default for LazyListing {
    fn default() -> Self {
        Self {
            active: AtomicBool::new(false),
            revealed: Mutex::default(),
            grew: watch::Sender::new(0),
        }
    }
}

impl LazyListing {
    /// Whether the session is lazy, deciding it now if it is not yet.
    pub(crate) fn decide(
        &self,
        tools: &ToolsConfig,
        client_name: Option<&str>,
        catalog: &Catalog,
    ) -> bool {
        if self.active.load(Ordering::SeqCst) {
            return true;
        }
        // Measured only when the decision depends on it, and bounded by
        // its bytes first so that the tokenizer stays off this path for
        // any listing within the budget.
        let tokens = if tools.lazy.measures(client_name) {
            catalog.listing_tokens_within(tools.lazy_budget)
        } else {
            0
        };
        let lazy = tools.lazy.applies(client_name, tokens, tools.lazy_budget);
        if lazy {
            self.active.store(true, Ordering::SeqCst);
        }
        lazy
    }

    /// Whether the session has been found lazy.
    pub(crate) fn is_active(&self) -> bool {
        self.active.load(Ordering::SeqCst)
    }

    /// What the session is listed from `catalog`.
    pub(crate) fn listing(&self, catalog: &Catalog) -> Vec<Tool> {
        if self.is_active() {
            catalog.lazy_listing(&lock(&self.revealed))
        } else {
            catalog.full_listing()
        }
    }

    /// Adds upstream tools (exposed names) to the session's list; a lazy
    /// session's client is told its list changed when one is new.
    pub(crate) fn reveal<'a>(&self, names: impl IntoIterator<Item = &'a str>) {
        let mut revealed = lock(&self.revealed);
        let mut grew = false;
        for name in names {
            grew |= revealed.insert(name.to_owned());
        }
        drop(revealed);
        if grew && self.is_active() {
            self.grew.send_modify(|n| *n += 1);
        }
    }

    /// How many upstream tools the session has found or used.
    pub(crate) fn revealed(&self) -> usize {
        lock(&self.revealed).len()
    }

    /// A receiver that wakes when a lazy session's list grows.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.grew.subscribe()
    }
}
