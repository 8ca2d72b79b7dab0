//! What the tool definitions cost per session, next to what its tool
//! results cost, from the session summaries. Every model request carries
//! every tool's definition (name, description, input schema), so the
//! figure is per request: the last list devboy served the session, which
//! each later request carries. The results are paid once each, so theirs
//! is the session's total. Reported, not tuned: no rule acts on it yet.

use crate::read::EventTable;
use crate::table::int;

/// Definitions and results over the session summaries of the window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DefinitionFigures {
    /// Session summaries.
    pub sessions: u64,
    /// Of them, the sessions that recorded the tool lists they were served.
    pub listed: u64,
    /// Over the listed sessions: tokens of the last list's definitions.
    pub definition_tokens: u64,
    /// Over the listed sessions: tools in the last list.
    pub tools: u64,
    /// Over the listed sessions: lists served.
    pub lists: u64,
    /// Over the listed sessions: tokens of the tool results sent.
    pub listed_result_tokens: u64,
    /// Over all sessions: tokens of the tool results sent.
    pub result_tokens: u64,
}

impl DefinitionFigures {
    /// The figures of `table`'s session summaries; `None` when it has none.
    pub fn of(table: &EventTable) -> Option<DefinitionFigures> {
        let mut f = DefinitionFigures::default();
        for s in table.sessions.values() {
            f.sessions += 1;
            f.result_tokens += s.tokens_final;
            if let Some(d) = s.definitions {
                f.listed += 1;
                f.definition_tokens += d.tokens;
                f.tools += d.tools;
                f.lists += d.lists;
                f.listed_result_tokens += s.tokens_final;
            }
        }
        (f.sessions > 0).then_some(f)
    }

    /// Average definition tokens per request of a session that recorded
    /// them; `None` when none did (old telemetry), rather than 0.
    pub fn per_request(&self) -> Option<f64> {
        (self.listed > 0).then(|| self.definition_tokens as f64 / self.listed as f64)
    }

    /// The report's `# tool definitions:` line.
    pub fn line(&self) -> String {
        let avg = |n: u64, of: u64| n as f64 / of.max(1) as f64;
        let whole = |x: f64| int(x.round() as i64);
        let Some(per_request) = self.per_request() else {
            return format!(
                "# tool definitions: not recorded by any of the {} sessions (their telemetry predates it); tool results sent to the model: {} tokens per session",
                int(self.sessions as i64),
                whole(avg(self.result_tokens, self.sessions))
            );
        };
        let mut line = format!(
            "# tool definitions per session ({} of {} sessions recorded them): {} tokens on every model request, for {} tools (name, description and input schema of the last tools/list devboy served; {:.1} lists per session); tool results sent to the model: {} tokens over the whole session",
            int(self.listed as i64),
            int(self.sessions as i64),
            whole(per_request),
            whole(avg(self.tools, self.listed)),
            avg(self.lists, self.listed),
            whole(avg(self.listed_result_tokens, self.listed)),
        );
        let unlisted = self.sessions - self.listed;
        if unlisted > 0 {
            line.push_str(&format!(
                "; {} session{} recorded no tool list (older telemetry, or never listed)",
                int(unlisted as i64),
                if unlisted == 1 { "" } else { "s" }
            ));
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ClientKind, DefinitionsSummary, SessionRecord};

    fn session(tokens_final: u64, definitions: Option<(u64, u64, u64)>) -> SessionRecord {
        SessionRecord {
            results: 1,
            sample_rate: 1.0,
            compactions: 0,
            dropped: 0,
            client: ClientKind::ClaudeCode,
            speculation: None,
            tokens_final,
            definitions: definitions.map(|(tokens, tools, lists)| DefinitionsSummary {
                tokens,
                tools,
                lists,
            }),
        }
    }

    fn table(sessions: Vec<SessionRecord>) -> EventTable {
        EventTable {
            sessions: sessions.into_iter().zip(1..).map(|(s, i)| (i, s)).collect(),
            ..EventTable::default()
        }
    }

    #[test]
    fn the_line_sets_definitions_per_request_next_to_results_per_session() {
        let f = DefinitionFigures::of(&table(vec![
            session(12_000, Some((4_000, 40, 1))),
            session(8_000, Some((5_000, 50, 2))),
            session(100_000, None),
        ]))
        .unwrap();
        assert_eq!(f.per_request(), Some(4_500.0));
        assert_eq!(
            f.line(),
            "# tool definitions per session (2 of 3 sessions recorded them): 4,500 tokens on every model request, for 45 tools (name, description and input schema of the last tools/list devboy served; 1.5 lists per session); tool results sent to the model: 10,000 tokens over the whole session; 1 session recorded no tool list (older telemetry, or never listed)"
        );
    }

    #[test]
    fn old_telemetry_says_so_rather_than_zero() {
        let f =
            DefinitionFigures::of(&table(vec![session(300, None), session(500, None)])).unwrap();
        assert_eq!(f.per_request(), None);
        assert_eq!(
            f.line(),
            "# tool definitions: not recorded by any of the 2 sessions (their telemetry predates it); tool results sent to the model: 400 tokens per session"
        );
        assert_eq!(DefinitionFigures::of(&table(Vec::new())), None);
    }
}
