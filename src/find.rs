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
    /// Why `llm` is `None`.
    pub why_not: Option<String>,
    /// `[retrieval.llm]` is in the config (a model was asked for).
    pub configured: bool,
}

impl Model {
    /// No model (`--strategy offline`).
    fn none() -> Model {
        Model {
            llm: None,
            why_not: None,
            configured: false,
        }
    }

    /// The model `strategy` runs with (none for `offline`), or why it
    /// cannot run: the model of the config, checked.
    pub fn for_strategy(strategy: FindStrategy, config: Option<&Path>) -> anyhow::Result<Model> {
        let model = if strategy == FindStrategy::Offline {
            Model::none()
        } else {
            Model::from_config(config)?
        };
        model.check(strategy)?;
        Ok(model)
    }

    /// The model of the config `devboy mcp` would read (`explicit`, else the
    /// default file, else the embedded default). A config that does not
    /// load is an error; a model that cannot be used (no key, MCP
    /// sampling outside an MCP session) is `None` with the reason.
    fn from_config(explicit: Option<&Path>) -> anyhow::Result<Model> {
        let config = ProxyConfig::resolve(explicit)?;
        for warning in config.warnings.iter().filter(|w| w.contains("retrieval")) {
            eprintln!("devboy: {warning}");
        }
        let Some(llm) = config.retrieval_llm else {
            return Ok(Model {
                llm: None,
                why_not: Some("no model is configured".into()),
                configured: false,
            });
        };
        let why_not = if llm.provider == LlmProvider::Sampling {
            "[retrieval.llm] provider mcp-sampling is the MCP client's model; only devboy_find_files inside a client that offers sampling can use it".to_owned()
        } else {
            match HttpLlm::from_env(&llm) {
                Ok(model) => {
                    return Ok(Model {
                        llm: Some(model),
                        why_not: None,
                        configured: true,
                    })
                }
                Err(why) => why,
            }
        };
        Ok(Model {
            llm: None,
            why_not: Some(why_not),
            configured: true,
        })
    }

    /// Why a configured model is not used (`None` when it is, or when
    /// none is configured).
    pub fn unusable(&self) -> Option<&str> {
        self.why_not.as_deref().filter(|_| self.configured)
    }

    /// The model as `find` takes it.
    pub fn llm(&self) -> Option<&dyn Llm> {
        self.llm.as_ref().map(|l| l as &dyn Llm)
    }

    /// Fails when `strategy` needs a model and there is none; says on
    /// stderr why a configured model is not used when ranking offline.
    fn check(&self, strategy: FindStrategy) -> anyhow::Result<()> {
        let named = match strategy {
            FindStrategy::Beam => "beam",
            FindStrategy::Block => "block",
            _ => {
                if let Some(why) = self.unusable() {
                    eprintln!("devboy: {why}; ranking offline");
                }
                return Ok(());
            }
        };
        match (&self.llm, self.unusable()) {
            (Some(_), _) => Ok(()),
            (None, Some(why)) => anyhow::bail!(
                "--strategy {named} navigates the tree with a model, and {why}"
            ),
            (None, None) => anyhow::bail!(
                "--strategy {named} navigates the tree with a model, and none is configured: add a [retrieval.llm] section to devboy.toml (`devboy init` writes one, commented), or use --strategy auto"
            ),
        }
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
    let model = Model::for_strategy(strategy, config)?;
    let index = devboy_explore::Index::open(root, &devboy_explore::cache_dir())?;
    let prepared = devboy_retrieval::prepare(&index, query);
    let mut result = runtime()?.block_on(devboy_retrieval::find(
        &prepared,
        query,
        strategy.requested(),
        model.llm(),
        options,
    ))?;
    if result.fallback.is_none() {
        result.fallback = model.unusable().map(str::to_owned);
    }
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
