//! What `devboy_expand` delivers, counted (invariant 8: savings are
//! reported honestly).
//!
//! A reference or an elision is counted as saved when it goes out; when the
//! model then expands the id, what it receives is counted too, by what it
//! is ([`Delivered`], whose `figures` is the one rule telemetry and the
//! tuner sum by as well):
//!
//! - the id of a result that went out whole, or of a reference to one, and
//!   the whole of an elided result asked for without a range (which shows
//!   its kept part again), deliver what the model was shown: a cost, taken
//!   back from the saving that stood in for it (dedup's, or the encoder's
//!   for an elided result);
//! - a range of an elided result (the `lines=`/`items=` its hint names)
//!   delivers parts the model was never shown: new content, received at an
//!   equal baseline.
//!
//! To tell them apart the session remembers, per id it printed, the
//! endpoint whose result the id stood for (the result that last named it)
//! and whether that delivery was elided ([`IssuedIds`]).

use std::collections::HashMap;

use devboy_pipeline::result_pipeline::{Action, Processed, Totals};
use devboy_pipeline::ExpandStore;
use devboy_pipeline::{EndpointKey, ReferenceId};
use devboy_telemetry::{Delivered, ExpandedSummary, TokenFigures};

/// What one id this session printed stood for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Issued {
    /// The endpoint whose result last named the id.
    pub endpoint: EndpointKey,
    /// That result went out elided: the model holds only its kept part.
    pub elided: bool,
}

impl Issued {
    /// What expanding the id delivers, all of it or (`ranged`) the units a
    /// range names.
    pub fn delivered(&self, ranged: bool) -> Delivered {
        match (self.elided, ranged) {
            (false, _) => Delivered::Again,
            (true, false) => Delivered::AgainElided,
            (true, true) => Delivered::New,
        }
    }
}

/// Fewest ids remembered before the first pruning.
const PRUNE_FLOOR: usize = 1024;

/// What each id the session printed stood for, bounded like the expand
/// store that resolves them: an id whose bytes the store no longer holds
/// cannot be expanded, so it is forgotten here too, whenever the map has
/// doubled since the last pruning (amortized constant work per id).
#[derive(Debug)]
pub(crate) struct IssuedIds {
    ids: HashMap<ReferenceId, Issued>,
    prune_at: usize,
}

impl Default for IssuedIds {
    fn default() -> Self {
        Self {
            ids: HashMap::new(),
            prune_at: PRUNE_FLOOR,
        }
    }
}

impl IssuedIds {
    /// Notes the id `processed` printed for a result of `endpoint`, if any.
    pub fn note(&mut self, processed: &Processed, endpoint: &EndpointKey, store: &ExpandStore) {
        let Some(id) = processed.id else {
            return;
        };
        // A reference names a delivery the model holds whole (an elided
        // body is never referenced); every other action printed the id
        // with the result it stands for.
        let issued = Issued {
            endpoint: endpoint.clone(),
            elided: processed.action == Action::Elided,
        };
        self.ids.insert(id, issued);
        if self.ids.len() >= self.prune_at {
            self.ids.retain(|id, _| store.holds(*id));
            self.prune_at = (2 * self.ids.len()).max(PRUNE_FLOOR);
        }
    }

    /// What `id` stood for, if the session printed it and can still
    /// expand it.
    pub fn get(&self, id: ReferenceId) -> Option<&Issued> {
        self.ids.get(&id)
    }

    /// How many ids are remembered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.ids.len()
    }
}

/// The session's `devboy_expand` deliveries so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ExpandedTotals {
    /// How many, and their tokens.
    pub summary: ExpandedSummary,
    /// What they add to the results' totals.
    figures: TokenFigures,
}

impl ExpandedTotals {
    /// Counts one delivery of `tokens`.
    pub fn add(&mut self, delivered: Delivered, tokens: u64) {
        self.summary.add(delivered, tokens);
        self.figures += delivered.figures(tokens);
    }

    /// `results`, the pipeline's totals, with these deliveries counted in:
    /// what the model received in all.
    pub fn onto(&self, results: &Totals) -> Totals {
        let f = &self.figures;
        Totals {
            tokens_raw: results.tokens_raw + f.tokens_baseline,
            tokens_final: results.tokens_final + f.tokens_final,
            dedup_saved: results.dedup_saved + f.dedup_saved,
            encoder_saved: results.encoder_saved + f.encoder_saved,
            ..results.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devboy_pipeline::ExpandConfig;
    use devboy_pipeline::{IdAllocator, SessionTag};

    fn processed(action: Action, id: ReferenceId) -> Processed {
        Processed {
            action,
            id: Some(id),
            ..Processed::unchanged(10)
        }
    }

    #[test]
    fn an_id_is_a_repeat_unless_a_range_of_an_elided_result() {
        let endpoint = EndpointKey::new("fs", "read");
        let issued = |elided| Issued {
            endpoint: endpoint.clone(),
            elided,
        };
        assert_eq!(issued(false).delivered(false), Delivered::Again);
        assert_eq!(issued(false).delivered(true), Delivered::Again);
        assert_eq!(issued(true).delivered(false), Delivered::AgainElided);
        assert_eq!(issued(true).delivered(true), Delivered::New);
    }

    #[test]
    fn the_last_result_naming_an_id_is_what_it_stands_for() {
        let mut ids = IdAllocator::new(SessionTag::FIXED);
        let store = ExpandStore::new(ExpandConfig::default());
        let mut issued = IssuedIds::default();
        let (a, b) = (ids.next(), ids.next());
        let read = EndpointKey::new("fs", "read");
        let many = EndpointKey::new("fs", "read_many");
        issued.note(&processed(Action::Fresh, a), &read, &store);
        issued.note(&processed(Action::Elided, b), &read, &store);
        issued.note(&Processed::unchanged(5), &read, &store);
        assert_eq!(issued.get(a).map(|i| i.elided), Some(false));
        assert_eq!(issued.get(b).map(|i| i.elided), Some(true));
        // Another tool's result referenced `a`: its saving is the one an
        // expansion takes back.
        issued.note(&processed(Action::Reference, a), &many, &store);
        assert_eq!(issued.get(a).map(|i| &i.endpoint), Some(&many));
        assert_eq!(issued.len(), 2);
    }

    #[test]
    fn ids_the_store_no_longer_holds_are_forgotten() {
        let mut ids = IdAllocator::new(SessionTag::FIXED);
        // Room for one body of 100 bytes at a time.
        let mut store = ExpandStore::new(ExpandConfig { max_bytes: 100 });
        let mut issued = IssuedIds::default();
        let endpoint = EndpointKey::new("fs", "read");
        let mut last = None;
        for _ in 0..3 * PRUNE_FLOOR {
            let id = ids.next();
            let _ = store.insert(id, vec![0; 100]);
            issued.note(&processed(Action::Fresh, id), &endpoint, &store);
            last = Some(id);
            assert!(issued.len() <= PRUNE_FLOOR, "{}", issued.len());
        }
        let last = last.unwrap();
        assert!(store.holds(last));
        assert!(issued.get(last).is_some(), "what the store holds is known");
    }

    /// A session through its public face: a result referenced and its id
    /// expanded, a file elided and expanded whole and by the range its
    /// hint names; each delivery moves the report by exactly its tokens.
    #[test]
    fn the_report_counts_what_expand_delivered() {
        use crate::{Forwarded, PipelineSession};
        use devboy_core::call::{CallRoute, ResolvedCall, SideEffect};
        use devboy_core::pipeline_config::{PipelineConfig, SideEffectClass};
        use devboy_pipeline::route::PartRange;
        use devboy_pipeline::{Handoff, Timestamp};
        use std::sync::Arc;

        let config = PipelineConfig::from_str(
            "schema_version = 3\n[encoding]\nbudget_tokens = 450\n",
            std::path::Path::new("test.toml"),
        )
        .unwrap();
        let session =
            PipelineSession::new(Arc::new(config), true, IdAllocator::new(SessionTag::FIXED));
        let read = |path: &str| {
            let args = serde_json::json!({ "path": path });
            ResolvedCall::new(
                "fs__read_text_file",
                CallRoute::Upstream {
                    upstream: "fs".into(),
                    tool: "read_text_file".into(),
                },
                args.as_object().cloned(),
                SideEffect::stated(SideEffectClass::ReadOnly),
            )
        };
        let file = |lines: usize| -> String {
            (1..=lines)
                .map(|i| format!("line {i} of the file, with words\n"))
                .collect()
        };
        let mut at = 0;
        let mut deliver = |path: &str, text: &str| {
            at += 10;
            session
                .process(
                    &read(path),
                    &Forwarded::Single { text, json: None },
                    Timestamp::from_millis(at),
                    &Handoff::new(),
                )
                .expect("the pipeline applies")
        };
        let small = file(30);
        let fresh = deliver("/a.txt", &small);
        assert_eq!(fresh.action, Action::Fresh);
        let repeat = deliver("/a.txt", &small);
        assert_eq!(repeat.action, Action::Reference);
        let big = file(3000);
        let elided = deliver("/b.txt", &big);
        assert_eq!(elided.action, Action::Elided);

        let tokens = |text: &str| session.tokenizer().count(text) as i64;
        let figures = |session: &PipelineSession| {
            let r = session.report();
            let n = |k: &str| r[k].as_i64().unwrap();
            let t = session.totals();
            (
                n("tokens_raw"),
                n("tokens_final"),
                t.dedup_saved,
                t.encoder_saved,
            )
        };
        let expand = |id: ReferenceId, range: Option<PartRange>| {
            let text = session
                .expand(&id.to_string(), range.as_ref(), false, None)
                .unwrap();
            session.record_expansion(&id.to_string(), range.is_some(), &text);
            tokens(&text)
        };

        // The referenced id: delivered again, a cost to dedup.
        let (raw, fin, dedup, encoder) = figures(&session);
        let again = expand(repeat.id.unwrap(), None);
        assert!(again > 0);
        assert_eq!(
            figures(&session),
            (raw, fin + again, dedup - again, encoder)
        );
        // The elided file whole: its head again, a cost to the encoder.
        let head = expand(elided.id.unwrap(), None);
        assert_eq!(
            figures(&session),
            (raw, fin + again + head, dedup - again, encoder - head)
        );
        // The range its hint names: new, at an equal baseline.
        let rest = expand(
            elided.id.unwrap(),
            Some(PartRange::parse("lines", "2990-3000").unwrap()),
        );
        assert_eq!(
            figures(&session),
            (
                raw + rest,
                fin + again + head + rest,
                dedup - again,
                encoder - head
            )
        );
        let report = session.report();
        assert_eq!(
            report["expanded"],
            serde_json::json!({
                "calls": 3,
                "tokens": again + head + rest,
                "again_tokens": again + head,
                "new_tokens": rest,
            })
        );
        // The percentages are of the same totals.
        let totals = session.totals();
        assert_eq!(
            report["dedup_savings_pct"],
            serde_json::json!(totals.pct(totals.dedup_saved))
        );
        assert_eq!(report["session"]["results"], 3, "no expansion is a result");
    }

    #[test]
    fn deliveries_add_up_like_results() {
        let mut expanded = ExpandedTotals::default();
        expanded.add(Delivered::Again, 40);
        expanded.add(Delivered::AgainElided, 7);
        expanded.add(Delivered::New, 30);
        let results = Totals {
            results: 3,
            tokens_raw: 1000,
            tokens_final: 300,
            dedup_saved: 500,
            encoder_saved: 200,
            references: 1,
            ..Totals::default()
        };
        let all = expanded.onto(&results);
        assert_eq!(
            (
                expanded.summary.calls,
                expanded.summary.tokens,
                expanded.summary.again_tokens
            ),
            (3, 77, 47)
        );
        assert_eq!(all.results, 3, "an expansion is no result");
        assert_eq!(all.references, 1);
        assert_eq!((all.tokens_raw, all.tokens_final), (1030, 377));
        assert_eq!((all.dedup_saved, all.encoder_saved), (460, 193));
        assert_eq!(
            all.tokens_raw as i64 - all.tokens_final as i64,
            all.dedup_saved + all.encoder_saved
        );
    }
}
