//! `devboy explore`: the code graph's answer to "how does X work", printed
//! as the model sees it or as JSON.

use std::io::Write as _;
use std::path::Path;

use devboy_core::pipeline_config::ExploreSettings;

/// The answer's options from the pipeline config's `[explore]`, the
/// command line's budget, and the environment's escape hatch.
pub fn options(settings: &ExploreSettings, budget_chars: Option<usize>) -> devboy_explore::Options {
    devboy_explore::Options {
        budget_chars: budget_chars.unwrap_or(settings.budget_chars),
        adaptive: settings.adaptive_effective(),
    }
}

/// Answers `query` about the tree at `root` on stdout.
pub fn explore_cmd(
    query: &str,
    root: &Path,
    options: &devboy_explore::Options,
    json: bool,
) -> anyhow::Result<()> {
    let index = devboy_explore::Index::open(root, &devboy_explore::cache_dir())?;
    let answer = devboy_explore::explore(&index, query, options);
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer(&mut out, &answer)?;
        out.write_all(b"\n")?;
    } else {
        out.write_all(answer.text.as_bytes())?;
    }
    Ok(())
}
