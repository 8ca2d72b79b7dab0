//! `devboy find-files`, and the model `find-files` and `eval find-files`
//! navigate with (`[retrieval.llm]` of the config `devboy mcp` reads).

use std::io::Write as _;
use std::path::Path;

use devboy_core::config::{LlmProvider, ProxyConfig};
use devboy_retrieval::{HttpLlm, Llm, Options, Requested};

/// How `devboy find-files` ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FindStrategy {
    /// The configured model (Beam up to 50 nodes, Block above), else offline.
    Auto,
    /// The offline ranker.
    Offline,
    /// Beam (needs a model).
    Beam,
    /// Block (needs a model).
    Block,
}

impl FindStrategy {
    /// What to ask `find` for.
    pub fn requested(self) -> Requested {
        match self {
            FindStrategy::Auto => Requested::Auto,
            FindStrategy::Offline => Requested::Offline,
            FindStrategy::Beam => Requested::Beam,
            FindStrategy::Block => Requested::Block,
        }
    }
}

/// The configured model, or why there is none.
pub struct Model {
    pub llm: Option<HttpLlm>,
    pub why_not: Option<String>,
}

impl Model {
    /// The model of the config `devboy mcp` would read (`explicit`, else the
    /// default file, else the embedded default). A config that does not
    /// load is an error; a model that cannot be used (no key, MCP
    /// sampling outside an MCP session) is `None` with the reason, which
    /// also goes to stderr.
    pub fn from_config(explicit: Option<&Path>) -> anyhow::Result<Model> {
        let config = ProxyConfig::resolve(explicit)?;
        for warning in config.warnings.iter().filter(|w| w.contains("retrieval")) {
            eprintln!("devboy: {warning}");
        }
        let Some(llm) = config.retrieval_llm else {
            return Ok(Model {
                llm: None,
                why_not: Some("no [retrieval.llm] in the config".into()),
            });
        };
        let why_not = if llm.provider == LlmProvider::Sampling {
            "[retrieval.llm] provider mcp-sampling is the MCP client's model; only devboy_find_files inside a client that offers sampling can use it".to_owned()
        } else {
            match HttpLlm::from_config(&llm, &|var| std::env::var(var).ok()) {
                Ok(model) => {
                    return Ok(Model {
                        llm: Some(model),
                        why_not: None,
                    })
                }
                Err(error) => format!("[retrieval.llm]: {error}"),
            }
        };
        eprintln!("devboy: {why_not}; ranking offline");
        Ok(Model {
            llm: None,
            why_not: Some(why_not),
        })
    }

    /// The model as `find` takes it.
    pub fn llm(&self) -> Option<&dyn Llm> {
        self.llm.as_ref().map(|l| l as &dyn Llm)
    }

    /// Fails when `strategy` needs a model and there is none.
    pub fn check(&self, strategy: FindStrategy) -> anyhow::Result<()> {
        if matches!(strategy, FindStrategy::Beam | FindStrategy::Block) && self.llm.is_none() {
            anyhow::bail!(
                "--strategy {}: navigating the tree needs a model, and {}; add [retrieval.llm] to devboy.toml (see config/devboy.toml), or use --strategy auto",
                if strategy == FindStrategy::Beam { "beam" } else { "block" },
                self.why_not.as_deref().unwrap_or("there is none")
            );
        }
        Ok(())
    }
}

/// A runtime for the model's calls.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// `devboy find-files`.
pub fn find_files_cmd(
    query: &str,
    root: &Path,
    options: &Options,
    strategy: FindStrategy,
    json: bool,
    config: Option<&Path>,
) -> anyhow::Result<()> {
    let model = if strategy == FindStrategy::Offline {
        Model {
            llm: None,
            why_not: None,
        }
    } else {
        Model::from_config(config)?
    };
    model.check(strategy)?;
    let index = devboy_explore::Index::open(root, &devboy_explore::cache_dir())?;
    let prepared = devboy_retrieval::prepare(&index, query);
    let result = runtime()?.block_on(devboy_retrieval::find(
        &prepared,
        query,
        strategy.requested(),
        model.llm(),
        options,
    ))?;
    let mut out = std::io::stdout().lock();
    if json {
        let mut report = serde_json::to_value(&result)?;
        report["index"] = serde_json::json!({
            "files": index.files.len(),
            "seconds": index.stats.seconds,
        });
        serde_json::to_writer(&mut out, &report)?;
        out.write_all(b"\n")?;
    } else {
        out.write_all(devboy_retrieval::render(query, &result).as_bytes())?;
    }
    Ok(())
}
