//! What `find_files` did in the window, from its `retrieval` records: how
//! often a configured model answered, how often it fell back to the offline
//! ranker, and what its queries cost. Reported, not tuned: no rule acts on
//! it yet.

use crate::event::RetrievalRecord;
use crate::read::EventTable;

/// `find_files` over the window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RetrievalFigures {
    /// Queries.
    pub queries: u64,
    /// Queries with a model configured.
    pub configured: u64,
    /// Of them, answered by the model.
    pub answered: u64,
    /// Model calls answered, over all queries.
    pub calls: u64,
    /// Model calls that failed.
    pub failed_calls: u64,
    /// Input tokens, cached or not.
    pub input_tokens: u64,
    /// Of them, read from the cache.
    pub cached_input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
}

impl RetrievalFigures {
    /// The figures of `table`, `None` when it holds no query.
    pub fn of(table: &EventTable) -> Option<RetrievalFigures> {
        Self::of_records(&table.retrieval)
    }

    fn of_records(records: &[RetrievalRecord]) -> Option<RetrievalFigures> {
        if records.is_empty() {
            return None;
        }
        let mut f = RetrievalFigures::default();
        for r in records {
            f.queries += 1;
            f.configured += u64::from(r.configured);
            f.answered += u64::from(r.answered);
            f.calls += r.calls;
            f.failed_calls += r.failed_calls;
            f.input_tokens += r.input_tokens;
            f.cached_input_tokens += r.cached_input_tokens;
            f.output_tokens += r.output_tokens;
        }
        Some(f)
    }

    /// The report's `# find_files:` line.
    pub fn line(&self) -> String {
        let mut line = format!(
            "# find_files: {} queries; offline {}",
            self.queries,
            self.queries - self.answered
        );
        if self.configured > 0 {
            let per = |n: u64| n as f64 / self.answered.max(1) as f64;
            line.push_str(&format!(
                "; with a model configured {}: answered {}, fell back {}; per answered query {:.1} calls, {:.0} input tokens ({:.0}% cached), {:.0} output; failed calls {}",
                self.configured,
                self.answered,
                self.configured - self.answered.min(self.configured),
                per(self.calls),
                per(self.input_tokens),
                100.0 * self.cached_input_tokens as f64 / self.input_tokens.max(1) as f64,
                per(self.output_tokens),
                self.failed_calls
            ));
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_how_often_the_model_answered_and_what_it_cost() {
        let model = RetrievalRecord {
            configured: true,
            answered: true,
            calls: 3,
            failed_calls: 0,
            input_tokens: 4000,
            cached_input_tokens: 1000,
            output_tokens: 40,
        };
        let fell_back = RetrievalRecord {
            configured: true,
            failed_calls: 1,
            ..RetrievalRecord::default()
        };
        let offline = RetrievalRecord::default();
        let f = RetrievalFigures::of_records(&[model, model, fell_back, offline]).unwrap();
        assert_eq!(
            f.line(),
            "# find_files: 4 queries; offline 2; with a model configured 3: answered 2, fell back 1; per answered query 3.0 calls, 4000 input tokens (25% cached), 40 output; failed calls 1"
        );
        assert_eq!(
            RetrievalFigures::of_records(&[offline]).unwrap().line(),
            "# find_files: 1 queries; offline 1"
        );
        assert!(RetrievalFigures::of_records(&[]).is_none());
    }
}
