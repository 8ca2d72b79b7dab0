//! The L0 stage: one session's dedup decisions, as the proxy drives them.
//!
//! [`L0Stage`] owns the session's [`DedupCache`], [`ExpandStore`] and
//! [`IdAllocator`] and turns "this body is about to reach the model" into
//! an [`L0Outcome`]:
//!
//! - a body the model already holds in full, in the current context, is
//!   replaced by a one-line reference naming the visible id it was shown
//!   with (`> [ref: r3, unchanged; devboy_expand r3]`);
//! - a fresh body large enough to be worth referencing later goes out in
//!   full with its id on one extra line (`> [id: r3]`), so a later
//!   reference resolves by plain text match (DESIGN §4.2);
//! - anything else passes unchanged.
//!
//! Calls that may change what a tool would return invalidate by path and by
//! the endpoints configured for them ([`L0Stage::on_call`]); compaction
//! advances the partition ([`L0Stage::advance_partition`]). The stage does
//! no I/O and reads no clock.

use serde_json::{Map, Value};

use crate::dedup::{DedupCache, DedupConfig, Delivered, RecordOutcome};
use crate::expand::{ExpandConfig, ExpandStore, Expansion, StoreOutcome};
use crate::fingerprint::Fingerprint;
use crate::ids::{EndpointKey, IdAllocator, ReferenceId};
use crate::time::Timestamp;

/// Argument names whose string values (or arrays of strings) name files or
/// directories a call reads or writes.
pub const PATH_ARGUMENTS: &[&str] = &[
    "path",
    "paths",
    "file_path",
    "filePath",
    "file",
    "files",
    "source",
    "destination",
    "target",
    "directory",
    "dir",
];

/// What a call may do to the world, as far as the stage needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideEffect {
    /// Reads only (MCP `readOnlyHint: true`, or configured).
    ReadOnly,
    /// May change state (declared, or unknown: unknown means may mutate).
    MayMutate,
}

/// The stage's settings.
#[derive(Debug, Clone, Default)]
pub struct L0Config {
    /// The dedup cache's bounds.
    pub dedup: DedupConfig,
    /// The expand store's bounds.
    pub expand: ExpandConfig,
}

/// What to do with one body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum L0Outcome {
    /// Send it as it is.
    Unchanged,
    /// Send it in full, followed by `id_line` on a line of its own.
    Fresh {
        /// The id the body is now known by.
        id: ReferenceId,
        /// The line to append, e.g. `> [id: r3]`.
        id_line: String,
    },
    /// Send `hint` instead of the body: the model holds it already.
    Repeat {
        /// The id the model was shown with the earlier delivery.
        id: ReferenceId,
        /// The reference line that replaces the body.
        hint: String,
    },
}

/// Why `devboy_expand` cannot return bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// The text is not an id of the form `r12`.
    #[error("`{0}` is not a devboy id (ids look like r12)")]
    Malformed(String),
    /// This session never issued that id.
    #[error("{0} was not issued in this session")]
    Unknown(ReferenceId),
    /// The id was issued but its bytes no longer fit the store.
    #[error("{0} has expired from devboy's store; repeat the original call instead")]
    Expired(ReferenceId),
}

/// One session's L0 state; see the module docs.
#[derive(Debug)]
pub struct L0Stage {
    cache: DedupCache,
    store: ExpandStore,
    ids: IdAllocator,
}

impl L0Stage {
    /// A stage with empty state.
    pub fn new(config: L0Config) -> Self {
        Self {
            cache: DedupCache::new(config.dedup),
            store: ExpandStore::new(config.expand),
            ids: IdAllocator::new(),
        }
    }

    /// The dedup cache, for stats.
    pub fn cache(&self) -> &DedupCache {
        &self.cache
    }

    /// The expand store, for stats.
    pub fn store(&self) -> &ExpandStore {
        &self.store
    }

    /// Decides what the model sees for `body`, produced by `endpoint` from
    /// `paths`, at `now`. A fresh body that is remembered is also stored so
    /// `devboy_expand` can return it.
    pub fn on_result(
        &mut self,
        endpoint: EndpointKey,
        body: &[u8],
        paths: Vec<String>,
        now: Timestamp,
    ) -> L0Outcome {
        let config = self.cache.config();
        if body.len() < config.min_body_bytes || body.len() > config.max_bytes {
            return L0Outcome::Unchanged;
        }
        let fp = Fingerprint::of(body);
        if let Some(delivered) = self.cache.lookup(fp, now) {
            let id = delivered.id;
            return L0Outcome::Repeat {
                id,
                hint: reference_hint(id),
            };
        }
        // Claim an id only for a body the cache will remember and the store
        // can give back: an id that can be neither referenced nor expanded
        // would be noise in the model's context.
        let id = self.ids.next();
        if self.store.insert(id, body) == StoreOutcome::TooLarge {
            return L0Outcome::Unchanged;
        }
        match self
            .cache
            .record_delivered(fp, Delivered::new(id, endpoint, paths), body.len(), now)
        {
            RecordOutcome::Inserted | RecordOutcome::Refreshed => L0Outcome::Fresh {
                id,
                id_line: id_line(id),
            },
            RecordOutcome::Skipped(_) => L0Outcome::Unchanged,
        }
    }

    /// Records a call before it is forwarded: a call that may mutate forgets
    /// every body read from the paths in its arguments and every body of the
    /// endpoints it is configured to invalidate. Returns how many bodies
    /// were forgotten.
    pub fn on_call(
        &mut self,
        effect: SideEffect,
        paths: &[String],
        invalidates: &[EndpointKey],
    ) -> usize {
        if effect == SideEffect::ReadOnly {
            return 0;
        }
        let mut forgotten = 0;
        for path in paths {
            forgotten += self.cache.invalidate_path(path);
        }
        for endpoint in invalidates {
            forgotten += self.cache.invalidate_endpoint(endpoint);
        }
        forgotten
    }

    /// The model's context was compacted or cleared: nothing delivered
    /// before may be referenced again. Returns the new partition.
    pub fn advance_partition(&mut self) -> u64 {
        self.cache.advance_partition()
    }

    /// The exact bytes an id stood for, from its text (`r12`).
    pub fn expand(&mut self, id_text: &str) -> Result<&[u8], ExpandError> {
        let id: ReferenceId = id_text
            .parse()
            .map_err(|_| ExpandError::Malformed(id_text.to_owned()))?;
        match self.store.expand(id, &self.ids) {
            Expansion::Bytes(bytes) => Ok(bytes),
            Expansion::Expired => Err(ExpandError::Expired(id)),
            Expansion::Unknown => Err(ExpandError::Unknown(id)),
        }
    }
}

/// The line appended to a fresh body.
pub fn id_line(id: ReferenceId) -> String {
    format!("> [id: {id}]")
}

/// The line that stands in for a repeated body.
pub fn reference_hint(id: ReferenceId) -> String {
    format!("> [ref: {id}, unchanged; devboy_expand {id}]")
}

/// The paths named in a call's arguments (see [`PATH_ARGUMENTS`]), in
/// order, without duplicates. Nested objects are not searched: a path deep
/// inside a payload is data, not the call's target.
pub fn paths_in_arguments(arguments: Option<&Map<String, Value>>) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    let Some(arguments) = arguments else {
        return paths;
    };
    let mut push = |value: &str| {
        if !value.is_empty() && !paths.iter().any(|p| p == value) {
            paths.push(value.to_owned());
        }
    };
    for key in PATH_ARGUMENTS {
        match arguments.get(*key) {
            Some(Value::String(s)) => push(s),
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).for_each(&mut push),
            _ => {}
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stage() -> L0Stage {
        L0Stage::new(L0Config::default())
    }

    fn fs_read() -> EndpointKey {
        EndpointKey::new("fs", "read_text_file")
    }

    fn t(ms: u64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    #[test]
    fn fresh_then_repeat_names_the_id_it_was_shown_with() {
        let mut stage = stage();
        let body = "x".repeat(2000);
        let first = stage.on_result(fs_read(), body.as_bytes(), vec!["/r/a".into()], t(0));
        let L0Outcome::Fresh { id, id_line } = first else {
            panic!("expected fresh, got {first:?}");
        };
        assert_eq!(id_line, format!("> [id: {id}]"));
        let second = stage.on_result(fs_read(), body.as_bytes(), vec!["/r/a".into()], t(10));
        let L0Outcome::Repeat { id: again, hint } = second else {
            panic!("expected repeat, got {second:?}");
        };
        assert_eq!(again, id);
        // The id in the hint is found by text in what the model saw first.
        assert!(hint.contains(&id.to_string()) && id_line.contains(&id.to_string()));
        assert_eq!(stage.expand(&id.to_string()), Ok(body.as_bytes()));
    }

    #[test]
    fn small_bodies_pass_unchanged_and_claim_no_id() {
        let mut stage = stage();
        assert_eq!(
            stage.on_result(fs_read(), b"short", vec![], t(0)),
            L0Outcome::Unchanged
        );
        assert_eq!(
            stage.expand("r1"),
            Err(ExpandError::Unknown("r1".parse().unwrap()))
        );
    }

    #[test]
    fn mutating_call_on_the_path_makes_the_next_read_full() {
        let mut stage = stage();
        let body = "y".repeat(2000);
        stage.on_result(fs_read(), body.as_bytes(), vec!["/r/a.txt".into()], t(0));
        // A read-only call changes nothing.
        assert_eq!(
            stage.on_call(SideEffect::ReadOnly, &["/r/a.txt".into()], &[]),
            0
        );
        assert!(matches!(
            stage.on_result(fs_read(), body.as_bytes(), vec!["/r/a.txt".into()], t(1)),
            L0Outcome::Repeat { .. }
        ));
        assert_eq!(
            stage.on_call(SideEffect::MayMutate, &["/r/a.txt".into()], &[]),
            1
        );
        assert!(matches!(
            stage.on_result(fs_read(), body.as_bytes(), vec!["/r/a.txt".into()], t(2)),
            L0Outcome::Fresh { .. }
        ));
    }

    #[test]
    fn configured_invalidations_forget_their_endpoints() {
        let mut stage = stage();
        let graph = EndpointKey::new("mem", "read_graph");
        let body = "g".repeat(2000);
        stage.on_result(graph.clone(), body.as_bytes(), vec![], t(0));
        assert_eq!(
            stage.on_call(SideEffect::MayMutate, &[], std::slice::from_ref(&graph)),
            1
        );
        assert!(matches!(
            stage.on_result(graph, body.as_bytes(), vec![], t(1)),
            L0Outcome::Fresh { .. }
        ));
    }

    #[test]
    fn compaction_makes_everything_full_again_but_ids_still_expand() {
        let mut stage = stage();
        let body = "z".repeat(2000);
        let L0Outcome::Fresh { id, .. } = stage.on_result(fs_read(), body.as_bytes(), vec![], t(0))
        else {
            panic!("fresh expected");
        };
        stage.advance_partition();
        let next = stage.on_result(fs_read(), body.as_bytes(), vec![], t(1));
        assert!(
            matches!(next, L0Outcome::Fresh { id: new, .. } if new != id),
            "{next:?}"
        );
        assert_eq!(stage.expand(&id.to_string()), Ok(body.as_bytes()));
    }

    #[test]
    fn expand_rejects_what_is_not_an_id() {
        let mut stage = stage();
        assert!(matches!(
            stage.expand("abc"),
            Err(ExpandError::Malformed(_))
        ));
    }

    #[test]
    fn paths_come_from_known_argument_names_only() {
        let args = json!({
            "path": "/a", "paths": ["/b", "/a", 3], "source": "/c",
            "content": "/not/a/target", "nested": {"path": "/d"}
        });
        assert_eq!(
            paths_in_arguments(args.as_object()),
            vec!["/a".to_string(), "/b".into(), "/c".into()]
        );
        assert!(paths_in_arguments(None).is_empty());
    }
}
