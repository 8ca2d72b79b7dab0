//! The text report of `devboy tune analyze`.

use std::fmt;

use crate::aggregate::EndpointStats;
use crate::analyze::{unnamed, AnalyzeReport};
use crate::event::id_text;
use crate::table::{int, pct, size, Align, TextTable};

/// At most this many endpoint rows; the rest are summed in one line.
const MAX_ROWS: usize = 40;

impl fmt::Display for AnalyzeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.options;
        let r = &self.read;
        writeln!(
            f,
            "devboy tune analyze: the last {} days of {}",
            o.days,
            o.input.display()
        )?;
        let expansions = if r.expansions > 0 {
            format!(", {} expansions", int(r.expansions as i64))
        } else {
            String::new()
        };
        writeln!(
            f,
            "read {} result events{expansions} and {} session summaries from {} files ({:.1} MB) in {:.1} s",
            int(r.results as i64),
            int(r.sessions as i64),
            r.files,
            r.bytes as f64 / 1e6,
            self.elapsed.as_secs_f64()
        )?;
        let skipped = [
            (r.malformed, "malformed lines"),
            (r.unsupported, "lines of a newer schema"),
            (r.other_kinds, "lines of other kinds"),
            (r.old, "events before the window"),
            (r.files_old as u64, "files last written before the window"),
        ];
        let skipped: Vec<String> = skipped
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{} {what}", int(*n as i64)))
            .collect();
        if !skipped.is_empty() {
            writeln!(f, "skipped: {}", skipped.join(", "))?;
        }
        for (path, error) in &r.unreadable {
            writeln!(f, "unreadable, skipped: {}: {error}", path.display())?;
        }
        if self.analysis.endpoints.is_empty() {
            writeln!(
                f,
                "\nno result events in the window: nothing to tune. (devboy writes them while `devboy mcp` serves, unless telemetry is off.)"
            )?;
            if let Some(figures) = &self.definitions {
                writeln!(f, "{}", figures.line())?;
            }
            return self.outcome(f);
        }
        let s = &self.analysis.sessions;
        writeln!(
            f,
            "sessions: {} ({} sampled or with dropped events), median {} results; {} compactions ({:.2} per 100 results), {:.0} results per context partition",
            int(s.sessions as i64),
            int(s.sampled as i64),
            int(s.median_results as i64),
            int(s.compactions as i64),
            s.compaction_rate() * 100.0,
            s.results_per_partition()
        )?;
        if !s.sampled_rates.is_empty() {
            let rates: Vec<String> = s
                .sampled_rates
                .iter()
                .map(|(rate, n)| format!("{} at rate {}", int(*n as i64), rate_text(*rate)))
                .collect();
            writeln!(
                f,
                "sampled sessions: {}; their events are weighted by 1/rate, so calls, tokens and savings marked ~ are scaled estimates (minimum support counts observed events, unscaled)",
                rates.join(", ")
            )?;
        }
        if s.unsummarized > 0 {
            writeln!(
                f,
                "sessions without a summary (still running or killed): {}; their events count as recorded (weight 1)",
                int(s.unsummarized as i64)
            )?;
        }
        let (excluded, excluded_events) = self.excluded;
        if excluded > 0 {
            writeln!(
                f,
                "sessions sampled or with dropped events, left out of the cache replay and simulation: {} ({} events); their events keep their recorded figures",
                int(excluded as i64),
                int(excluded_events as i64)
            )?;
        }
        writeln!(
            f,
            "tokens counted with {}; savings are percentages of the baseline `raw`: the tokens of what the client would have shown the model without devboy",
            self.analysis.tokenizer.as_deref().unwrap_or("(no tokenizer named)")
        )?;
        let (agreeing, replayed) = self.reproduced;
        if replayed > 0 {
            writeln!(
                f,
                "the cache replay of the current settings reproduces {:.1}% of {} recorded dedup outcomes; simulations move only those",
                agreeing as f64 * 100.0 / replayed as f64,
                int(replayed as i64)
            )?;
        }
        writeln!(f)?;
        f.write_str(&self.endpoint_table())?;
        if self.analysis.scaled() {
            writeln!(
                f,
                "~: a scaled estimate (events of sampled sessions weighted by 1/sample_rate); dup %, fp dup % and avg size are over observed events"
            )?;
        }
        writeln!(
            f,
            "dup %: results dedup replaced; fp dup %: results whose body was already in the context (from fingerprints); sizes in characters; tokens: the baseline, sent: what the model got"
        )?;
        let x = &self.analysis.total.expanded;
        if x.calls > 0 {
            writeln!(
                f,
                "# expanded: devboy_expand delivered {} tokens in {} {}, counted in tokens, sent and the savings of the tool whose result each id stood for ({} again of what the model had been shown, taken back from the savings; {} of parts it had not been shown, in the baseline too); no expansion counts as a result",
                int(x.tokens as i64),
                int(x.calls as i64),
                if x.calls == 1 { "call" } else { "calls" },
                int(x.again_tokens as i64),
                int(x.new_tokens() as i64),
            )?;
        }
        if let Some(figures) = &self.enrichment {
            writeln!(f, "{}", figures.line())?;
        }
        if let Some(figures) = &self.find_files {
            writeln!(f, "{}", figures.line())?;
        }
        if let Some(figures) = &self.definitions {
            writeln!(f, "{}", figures.line())?;
        }
        self.decisions_text(f)?;
        self.outcome(f)
    }
}

impl AnalyzeReport {
    fn name_of(&self, e: &EndpointStats) -> String {
        match self.names.get(e.tool) {
            Some(n) => n.to_owned(),
            None => format!("({})", id_text(e.tool)),
        }
    }

    fn endpoint_table(&self) -> String {
        let mut t = TextTable::new(&[
            ("endpoint", Align::Left),
            ("calls", Align::Right),
            ("dup %", Align::Right),
            ("fp dup %", Align::Right),
            ("avg size", Align::Right),
            ("shape", Align::Left),
            ("inner formats", Align::Left),
            ("tokens", Align::Right),
            ("sent", Align::Right),
            ("dedup %", Align::Right),
            ("enc %", Align::Right),
            ("comb %", Align::Right),
        ]);
        let v = &self.vocab;
        let row = |name: String, e: &EndpointStats, shape: String, inner: String| {
            let (d, enc, c) = e.split_pct();
            let mark = if e.scaled { "~" } else { "" };
            vec![
                name,
                format!("{mark}{}", int(e.calls as i64)),
                pct(e.dup_rate() * 100.0),
                if e.sequenced > 0 {
                    pct(e.implied_dup_rate() * 100.0)
                } else {
                    "-".into()
                },
                size(e.avg_chars()),
                shape,
                inner,
                format!("{mark}{}", size(e.tokens_baseline as f64)),
                format!("{mark}{}", size(e.tokens_final as f64)),
                pct(d),
                pct(enc),
                pct(c),
            ]
        };
        for e in self.analysis.endpoints.iter().take(MAX_ROWS) {
            let shape = e
                .dominant_shape()
                .and_then(|(s, share)| {
                    v.shapes
                        .get(s)
                        .map(|n| format!("{n} {:.0}%", share * 100.0))
                })
                .unwrap_or_else(|| "-".into());
            let inner: Vec<&str> = e
                .top_inner(3)
                .into_iter()
                .filter_map(|i| v.inner.get(i))
                .collect();
            let inner = if inner.is_empty() {
                "-".into()
            } else {
                inner.join(",")
            };
            t.row(row(self.name_of(e), e, shape, inner));
        }
        let rest = self.analysis.endpoints.len().saturating_sub(MAX_ROWS);
        if rest > 0 {
            let mut others = EndpointStats::default();
            for e in &self.analysis.endpoints[MAX_ROWS..] {
                others.calls += e.calls;
                others.observed += e.observed;
                others.scaled |= e.scaled;
                others.chars += e.chars;
                others.dedup = std::array::from_fn(|i| others.dedup[i] + e.dedup[i]);
                others.tokens_baseline += e.tokens_baseline;
                others.tokens_final += e.tokens_final;
                others.dedup_saved += e.dedup_saved;
                others.encoder_saved += e.encoder_saved;
                others.expanded += e.expanded;
                others.sequenced += e.sequenced;
                others.implied_repeats += e.implied_repeats;
            }
            t.row(row(
                format!("({rest} more)"),
                &others,
                String::new(),
                String::new(),
            ));
        }
        t.rule();
        t.row(row(
            "total".into(),
            &self.analysis.total,
            String::new(),
            String::new(),
        ));
        t.render()
    }

    /// "decided by team data (…)" when the priors, not the member's own
    /// figures, made the change to `target`.
    fn decided_by(&self, target: &crate::rules::Target) -> Option<String> {
        if !self.decided_by_shared.contains(target) {
            return None;
        }
        let name = match target {
            crate::rules::Target::Endpoint { name, .. }
            | crate::rules::Target::Tool { name, .. } => name,
            crate::rules::Target::Global { .. } => return None,
        };
        let b = self.blended.iter().find(|b| &b.endpoint == name)?;
        let kind = match b.source {
            crate::fingerprint::SharedSource::Team => "team data",
            crate::fingerprint::SharedSource::StaleTeam => "team data older than the TTL",
            crate::fingerprint::SharedSource::Provider(_) => "provider data",
        };
        Some(format!("decided by {kind}: {}", blend_line(b)))
    }

    fn decisions_text(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.decisions.is_empty()
            && self.held.is_empty()
            && self.priors.is_empty()
            && self.speculation.is_empty()
        {
            writeln!(
                f,
                "\nno rule fired: the current settings fit these events (rules need ≥ {} results per endpoint)",
                crate::rules::MIN_SUPPORT
            )?;
        }
        if !self.decisions.is_empty() {
            writeln!(
                f,
                "\nproposed changes, each simulated on the same events (tokens saved on that endpoint, or on all events for a top-level key):"
            )?;
        }
        for d in &self.decisions {
            let c = &d.change;
            writeln!(
                f,
                "  {:<7} {}: {} -> {}  ({})",
                if d.kept { "kept" } else { "dropped" },
                c.target,
                c.from,
                c.to,
                c.rule
            )?;
            writeln!(f, "          why: {}", c.reason)?;
            if let Some(by) = self.decided_by(&c.target) {
                writeln!(f, "          {by}")?;
            }
            let gain = d.after - d.before;
            let pp = if d.baseline == 0 {
                0.0
            } else {
                gain as f64 * 100.0 / d.baseline as f64
            };
            writeln!(
                f,
                "          simulated: saved {} -> {} tokens ({}{}, {:+.1} pp of {}){}",
                int(d.before),
                int(d.after),
                if gain >= 0 { "+" } else { "" },
                int(gain),
                pp,
                int(d.baseline as i64),
                if !d.judged {
                    "; kept unjudged: too few results of this member's own to judge the team's or provider's figures by"
                } else if d.kept {
                    ""
                } else if self.kept_old_config {
                    "; the whole proposal would save less"
                } else {
                    "; saves less, the current value stays"
                }
            )?;
        }
        if !self.speculation.is_empty() {
            writeln!(
                f,
                "\nspeculation switches (they change no token sent; written because the simulation kept the proposal):"
            )?;
            for c in &self.speculation {
                writeln!(
                    f,
                    "  set     {}: {} -> {}  ({})",
                    c.target, c.from, c.to, c.rule
                )?;
                writeln!(f, "          why: {}", c.reason)?;
            }
        }
        if !self.priors.is_empty() {
            writeln!(
                f,
                "\nvalue-model priors (inputs of speculation; they change no token sent, so they are not simulated):"
            )?;
            for c in &self.priors {
                writeln!(
                    f,
                    "  set     {}: {} -> {}  ({})",
                    c.target, c.from, c.to, c.rule
                )?;
                writeln!(f, "          why: {}", c.reason)?;
                if let Some(by) = self.decided_by(&c.target) {
                    writeln!(f, "          {by}")?;
                }
            }
        }
        if !self.blended.is_empty() {
            let team = self
                .blended
                .iter()
                .any(|b| !matches!(b.source, crate::fingerprint::SharedSource::Provider(_)));
            let provider = self
                .blended
                .iter()
                .any(|b| matches!(b.source, crate::fingerprint::SharedSource::Provider(_)));
            let whose = match (team, provider) {
                (true, true) => "team and provider",
                (true, false) => "team",
                _ => "provider",
            };
            writeln!(
                f,
                "\nblended with {whose} fingerprints before the rules ran ({} endpoint{}):",
                self.blended.len(),
                if self.blended.len() == 1 { "" } else { "s" }
            )?;
            for b in &self.blended {
                writeln!(f, "  {}", blend_line(b))?;
            }
        }
        if !self.held.is_empty() {
            writeln!(f, "\nheld by hand edits (left as they are):")?;
            for h in &self.held {
                writeln!(
                    f,
                    "  {} would set {} = {}, but `{}` was written by hand",
                    h.rule, h.target, h.to, h.by
                )?;
            }
        }
        let unnamed = unnamed(self);
        if !unnamed.is_empty() {
            let list: Vec<String> = unnamed
                .iter()
                .take(10)
                .map(|(h, n)| format!("{h} ({} calls)", int(*n as i64)))
                .collect();
            writeln!(
                f,
                "\nendpoints without a name in {} (not tuned; config keys must be names): {}{}",
                self.options.names_file.display(),
                list.join(", "),
                if unnamed.len() > 10 {
                    format!(", and {} more", unnamed.len() - 10)
                } else {
                    String::new()
                }
            )?;
            if let Some(note) = &self.names.note {
                writeln!(f, "  ({note})")?;
            }
        }
        Ok(())
    }

    fn outcome(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for note in &self.notes {
            writeln!(f, "note: {note}")?;
        }
        if let Some(t) = &self.total {
            writeln!(
                f,
                "\nall kept changes together: saved {:.1}% -> {:.1}% of the baseline ({} -> {} tokens; an estimate from recorded figures{}, see the limits in `devboy tune analyze --help`)",
                t.pct(t.old_saved),
                t.pct(t.new_saved),
                int(t.old_saved),
                int(t.new_saved),
                if self.analysis.scaled() {
                    ", those of sampled sessions scaled by 1/sample_rate"
                } else {
                    ""
                }
            )?;
        }
        if self.kept_old_config {
            let unjudged = self.decisions.iter().filter(|d| !d.judged).count();
            if unjudged == 0 {
                writeln!(
                    f,
                    "\nthe proposal as a whole would save less than the current config: nothing changed"
                )?;
            } else {
                writeln!(
                    f,
                    "\nthe proposal as a whole would save less than the current config: only the {unjudged} change(s) team or provider figures decided unjudged are made"
                )?;
            }
        }
        if self.snippet.is_empty() {
            if self.options.output.exists() {
                writeln!(f, "\n{} unchanged", self.options.output.display())?;
            } else {
                let applies = match &self.options.project_config {
                    Some(project) => format!("the project's {} applies", project.display()),
                    None => "the built-in defaults apply".to_owned(),
                };
                writeln!(
                    f,
                    "\nnothing to change; {} not written ({applies})",
                    self.options.output.display()
                )?;
            }
            return Ok(());
        }
        crate::analyze_report::write_outcome(
            f,
            self.written.as_deref(),
            self.options.dry_run,
            &self.options.output,
            &self.snippet,
        )
    }
}

/// A sampling rate as written: at most three decimals, no trailing zeros.
fn rate_text(rate: f64) -> String {
    let text = format!("{rate:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text.is_empty() || text == "0" {
        format!("{rate:e}")
    } else {
        text.to_owned()
    }
}

/// The end of a report: where the TOML went (or would go), then the TOML.
pub(crate) fn write_outcome(
    f: &mut fmt::Formatter<'_>,
    written: Option<&std::path::Path>,
    dry_run: bool,
    output: &std::path::Path,
    snippet: &str,
) -> fmt::Result {
    match (written, dry_run) {
        (Some(path), _) => writeln!(f, "\nwrote {}:", path.display())?,
        (None, true) => writeln!(
            f,
            "\ndry run: nothing written; {} would get:",
            output.display()
        )?,
        (None, false) => writeln!(f, "\n{} was not written; it would get:", output.display())?,
    }
    for line in snippet.lines() {
        writeln!(f, "  {line}")?;
    }
    Ok(())
}

/// One blended endpoint, in one line.
fn blend_line(b: &crate::analyze::Blended) -> String {
    let (calls, sessions, members) = (b.shared_calls, b.shared_sessions, b.shared_members);
    format!(
        "{}: {:.0}% {} ({} result{}, {} sessions, {} member{}), {:.0}% own ({} result{})",
        b.endpoint,
        b.weight * 100.0,
        b.source,
        int(calls as i64),
        if calls == 1 { "" } else { "s" },
        int(sessions as i64),
        members,
        if members == 1 { "" } else { "s" },
        (1.0 - b.weight) * 100.0,
        int(b.own_calls as i64),
        if b.own_calls == 1 { "" } else { "s" }
    )
}
