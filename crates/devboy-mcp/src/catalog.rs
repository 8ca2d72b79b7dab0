//! What the agent sees: every upstream's tools, resources and prompts under
//! namespaced names, plus devboy's built-in tools, and the routes back.
//!
//! A [`Catalog`] is an immutable snapshot rebuilt whenever an upstream's
//! listing changes; requests look names up in the current snapshot. Building
//! it is where the naming rules live: `<prefix>__<tool>`, sanitized and
//! shortened so that the client's full name (`mcp__<server>__<name>`) stays
//! within 64 characters, and made unique when shortening collides.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use devboy_core::config::ToolFilter;
use devboy_core::naming::{ToolNamer, CLIENT_TOOL_NAME_MAX};
use devboy_core::pipeline_config::SideEffectClass;
use devboy_core::tool_schema::compact;
use rmcp::model::{Prompt, Resource, ResourceTemplate, Tool, ToolAnnotations};

use crate::tool_search::ToolIndex;

/// Everything an upstream offers, as it last listed it.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct UpstreamCatalog {
    /// Tools, as listed (all pages), before allow/deny filtering.
    pub tools: Vec<Tool>,
    /// Resources (all pages).
    pub resources: Vec<Resource>,
    /// Resource templates (all pages).
    pub resource_templates: Vec<ResourceTemplate>,
    /// Prompts (all pages).
    pub prompts: Vec<Prompt>,
}

/// The `_meta` key that makes Claude Code load a tool up front instead of
/// deferring it behind its tool search.
pub(crate) const ALWAYS_LOAD_META: &str = "anthropic/alwaysLoad";

/// `tool` marked to be loaded up front.
pub(crate) fn always_loaded(mut tool: Tool) -> Tool {
    let meta = tool.meta.get_or_insert_with(Default::default);
    meta.0
        .insert(ALWAYS_LOAD_META.to_owned(), serde_json::Value::Bool(true));
    tool
}

/// One of devboy's own tools, as the catalog lists it.
#[derive(Debug, Clone)]
pub struct BuiltinListing {
    /// Its definition.
    pub tool: Tool,
    /// Listed only to a lazy session (`[tools] lazy`).
    pub lazy_only: bool,
}

/// One upstream, as the catalog lists it: its names and its last listing.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamListing<'a> {
    /// Its key in the config; routes name it.
    pub name: &'a str,
    /// The prefix of its exposed names.
    pub prefix: &'a str,
    /// Which of its tools are exposed.
    pub filter: &'a ToolFilter,
    /// What it offers.
    pub listing: &'a UpstreamCatalog,
    /// Its tools are listed to be loaded up front (`always_load`).
    pub always_load: bool,
}

impl UpstreamListing<'_> {
    /// `<prefix>__<name>`, or `name` for a server that keeps its names.
    fn exposed(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{}__{name}", self.prefix)
        }
    }
}

/// Why a server that keeps its names cannot expose one of them: only a
/// built-in can hold a name without `__` before it (the other servers'
/// names all have their prefix).
fn clash(kind: &str, name: &str, upstream: &str, exposed: &str) -> String {
    format!(
        "{kind} `{name}` of server `{upstream}` (prefix \"\") is not exposed: devboy's built-in `{exposed}` has that name; give `{upstream}` a prefix"
    )
}

/// Where a tool call goes, and what is known of what it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolRoute {
    /// One of devboy's own tools (by its exposed name).
    Builtin {
        /// What its annotations say a call does.
        side_effect: SideEffectClass,
    },
    /// An upstream tool.
    Upstream {
        /// The upstream's name (its key in the config).
        upstream: String,
        /// The tool's name on the upstream.
        tool: String,
        /// What the server's annotations say a call does.
        side_effect: SideEffectClass,
        /// The class devboy ships for it, when the upstream is a server
        /// it recognises ([`devboy_enrichment::shipped_classes`]).
        shipped: Option<SideEffectClass>,
    },
}

/// The class a tool's annotations say.
fn annotated(annotations: Option<&ToolAnnotations>) -> SideEffectClass {
    annotations.map_or(SideEffectClass::Unknown, |a| {
        SideEffectClass::from_annotations(a.read_only_hint, a.destructive_hint)
    })
}

/// One immutable view of everything the agent can use.
#[derive(Debug, Default)]
pub struct Catalog {
    /// Tools as the agent sees them.
    pub tools: Vec<Tool>,
    /// Resources as the agent sees them (URIs unchanged, names prefixed).
    pub resources: Vec<Resource>,
    /// Resource templates (URI templates unchanged, names prefixed).
    pub resource_templates: Vec<ResourceTemplate>,
    /// Prompts under prefixed names.
    pub prompts: Vec<Prompt>,
    tool_routes: HashMap<String, ToolRoute>,
    resource_routes: HashMap<String, String>,
    template_routes: Vec<(String, String)>,
    prompt_routes: HashMap<String, (String, String)>,
    /// Names that had to be shortened or de-duplicated: `(original, exposed)`.
    pub renamed: Vec<(String, String)>,
    /// What a server that keeps its names (`prefix = ""`) could not expose
    /// because a built-in has that name, each naming both.
    pub clashes: Vec<String>,
    /// Built-ins listed only to a lazy session (`devboy_find_tools`).
    lazy_only: HashSet<String>,
    /// What the full listing costs the model per request, measured once.
    listing_tokens: OnceLock<usize>,
    /// Its size as the JSON counted, measured once.
    listing_bytes: OnceLock<usize>,
    /// The search over the upstream tools, built on first use.
    index: OnceLock<ToolIndex>,
}

impl Catalog {
    /// Builds the view from the built-in tools and the upstreams' last
    /// listings (the enabled ones, in config order).
    pub fn build(
        server_name: &str,
        builtins: &[BuiltinListing],
        upstreams: &[UpstreamListing<'_>],
        compact_schemas: bool,
    ) -> Self {
        let namer = ToolNamer::new(server_name);
        let mut catalog = Catalog::default();
        let mut taken: HashSet<String> = HashSet::new();
        for builtin in builtins {
            let tool = builtin.tool.clone();
            taken.insert(tool.name.to_string());
            if builtin.lazy_only {
                catalog.lazy_only.insert(tool.name.to_string());
            }
            catalog.tool_routes.insert(
                tool.name.to_string(),
                ToolRoute::Builtin {
                    side_effect: annotated(tool.annotations.as_ref()),
                },
            );
            catalog.tools.push(tool);
        }
        let builtin_names = taken.clone();
        for upstream in upstreams {
            let listed = upstream.listing;
            let keeps_names = upstream.prefix.is_empty();
            let exposed_tools: Vec<&Tool> = listed
                .tools
                .iter()
                .filter(|tool| upstream.filter.permits(&tool.name))
                .collect();
            let names: Vec<&str> = exposed_tools.iter().map(|t| t.name.as_ref()).collect();
            let shipped = devboy_enrichment::shipped_classes(&names);
            for (tool, shipped) in exposed_tools.into_iter().zip(shipped) {
                let exposed = namer.expose(upstream.prefix, &tool.name);
                if keeps_names && builtin_names.contains(&exposed.name) {
                    catalog
                        .clashes
                        .push(clash("tool", &tool.name, upstream.name, &exposed.name));
                    continue;
                }
                let name = unique(exposed.name, &mut taken, server_name);
                let original = upstream.exposed(&tool.name);
                if exposed.shortened || name != original {
                    catalog.renamed.push((original, name.clone()));
                }
                let mut visible = tool.clone();
                visible.name = name.clone().into();
                if upstream.always_load {
                    visible = always_loaded(visible);
                }
                // The same arguments accepted, in fewer tokens on every
                // request (devboy_core::tool_schema).
                if compact_schemas {
                    visible.input_schema = Arc::new(compact(&tool.input_schema, &tool.name));
                }
                catalog.tool_routes.insert(
                    name,
                    ToolRoute::Upstream {
                        upstream: upstream.name.to_owned(),
                        tool: tool.name.to_string(),
                        side_effect: annotated(tool.annotations.as_ref()),
                        shipped,
                    },
                );
                catalog.tools.push(visible);
            }
            for resource in &listed.resources {
                if catalog.resource_routes.contains_key(&resource.uri) {
                    tracing::warn!(uri = %resource.uri, upstream = %upstream.name, "resource URI offered twice; the first upstream keeps it");
                    continue;
                }
                catalog
                    .resource_routes
                    .insert(resource.uri.clone(), upstream.name.to_owned());
                let mut visible = resource.clone();
                visible.name = upstream.exposed(&resource.name);
                catalog.resources.push(visible);
            }
            for template in &listed.resource_templates {
                let head = template
                    .uri_template
                    .split('{')
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                catalog
                    .template_routes
                    .push((head, upstream.name.to_owned()));
                let mut visible = template.clone();
                visible.name = upstream.exposed(&template.name);
                catalog.resource_templates.push(visible);
            }
            for prompt in &listed.prompts {
                let exposed = namer.expose(upstream.prefix, &prompt.name);
                if keeps_names && builtin_names.contains(&exposed.name) {
                    let what = clash("prompt", &prompt.name, upstream.name, &exposed.name);
                    catalog.clashes.push(what);
                    continue;
                }
                let name = unique(exposed.name, &mut taken, server_name);
                catalog.prompt_routes.insert(
                    name.clone(),
                    (upstream.name.to_owned(), prompt.name.clone()),
                );
                let mut visible = prompt.clone();
                visible.name = name;
                catalog.prompts.push(visible);
            }
        }
        // Longest template head first, so the most specific match wins.
        catalog
            .template_routes
            .sort_by_key(|(head, _)| std::cmp::Reverse(head.len()));
        catalog
    }

    /// The tools a session that lists everything sees: all but the
    /// lazy-only built-ins.
    pub fn full_listing(&self) -> Vec<Tool> {
        self.tools
            .iter()
            .filter(|t| !self.lazy_only.contains(t.name.as_ref()))
            .cloned()
            .collect()
    }

    /// The tools a lazy session sees: every built-in, and the upstream
    /// tools it has found or used (`revealed`), in catalog order.
    pub fn lazy_listing(&self, revealed: &HashSet<String>) -> Vec<Tool> {
        self.tools
            .iter()
            .filter(|t| {
                matches!(self.tool_route(&t.name), Some(ToolRoute::Builtin { .. }))
                    || revealed.contains(t.name.as_ref())
            })
            .cloned()
            .collect()
    }

    /// O200k tokens of [`full_listing`](Self::full_listing): what listing
    /// every tool costs on every model request.
    pub fn listing_tokens(&self) -> usize {
        *self.listing_tokens.get_or_init(|| {
            let listing = self.full_listing();
            crate::definitions::definition_tokens(&listing, devboy_pipeline::Tokenizer::O200k)
                as usize
        })
    }

    /// [`listing_tokens`](Self::listing_tokens) if already counted.
    pub fn listing_tokens_if_counted(&self) -> Option<usize> {
        self.listing_tokens.get().copied()
    }

    /// [`listing_tokens`](Self::listing_tokens), or the listing's bytes
    /// when those are within `limit`: a token is at least a byte, so the
    /// bytes bound the tokens, and no tokenizer runs for a listing that
    /// is certainly within the limit.
    pub fn listing_tokens_within(&self, limit: usize) -> usize {
        let bytes = *self.listing_bytes.get_or_init(|| {
            self.tools
                .iter()
                .filter(|t| !self.lazy_only.contains(t.name.as_ref()))
                .map(|t| {
                    devboy_pipeline::definition_json(
                        &t.name,
                        t.description.as_deref(),
                        &t.input_schema,
                    )
                    .len()
                })
                .sum()
        });
        if bytes <= limit {
            bytes
        } else {
            self.listing_tokens()
        }
    }

    /// The search over the upstream tools' names, descriptions and
    /// argument names.
    pub fn index(&self) -> &ToolIndex {
        self.index.get_or_init(|| {
            ToolIndex::new(
                self.tools.iter().filter(|t| {
                    matches!(self.tool_route(&t.name), Some(ToolRoute::Upstream { .. }))
                }),
            )
        })
    }

    /// Whether `name` is an upstream tool of this catalog.
    pub fn is_upstream_tool(&self, name: &str) -> bool {
        matches!(self.tool_route(name), Some(ToolRoute::Upstream { .. }))
    }

    /// Where a tool call by its exposed name goes.
    pub fn tool_route(&self, name: &str) -> Option<&ToolRoute> {
        self.tool_routes.get(name)
    }

    /// Which upstream serves a resource URI: a listed resource, else the
    /// most specific template whose fixed head matches.
    pub fn resource_route(&self, uri: &str) -> Option<&str> {
        self.resource_routes
            .get(uri)
            .or_else(|| {
                self.template_routes
                    .iter()
                    .find(|(head, _)| !head.is_empty() && uri.starts_with(head.as_str()))
                    .map(|(_, upstream)| upstream)
            })
            .map(String::as_str)
    }

    /// Which upstream serves a prompt (by name), and its original name.
    pub fn prompt_route(&self, name: &str) -> Option<&(String, String)> {
        self.prompt_routes.get(name)
    }

    /// How many tools the upstream `name` has exposed.
    pub fn tools_of(&self, name: &str) -> usize {
        self.tool_routes
            .values()
            .filter(|r| matches!(r, ToolRoute::Upstream { upstream, .. } if upstream == name))
            .count()
    }
}

/// Makes `name` unique among `taken` by a numeric suffix, keeping the
/// client's length limit. Deterministic: the order of upstreams and tools
/// decides who keeps the plain name.
fn unique(name: String, taken: &mut HashSet<String>, server_name: &str) -> String {
    if taken.insert(name.clone()) {
        return name;
    }
    let budget = CLIENT_TOOL_NAME_MAX.saturating_sub("mcp__".len() + server_name.len() + 2);
    for n in 2.. {
        let suffix = format!("_{n}");
        let mut head = name.clone();
        while head.len() + suffix.len() > budget && !head.is_empty() {
            head.pop();
        }
        let candidate = format!("{head}{suffix}");
        if taken.insert(candidate.clone()) {
            tracing::warn!(name = %name, exposed = %candidate, "tool name collision; renamed");
            return candidate;
        }
    }
    unreachable!("the suffix counter is unbounded")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_suffixes_within_budget() {
        let mut taken = HashSet::new();
        let long = "x".repeat(51);
        assert_eq!(unique(long.clone(), &mut taken, "devboy"), long);
        let second = unique(long.clone(), &mut taken, "devboy");
        assert_eq!(second, format!("{}_2", "x".repeat(49)));
        assert!("mcp__devboy__".len() + second.len() <= CLIENT_TOOL_NAME_MAX);
        assert_eq!(
            unique(long, &mut taken, "devboy"),
            format!("{}_3", "x".repeat(49))
        );
    }

    fn tool(name: &str) -> Tool {
        Tool::new(
            name.to_owned(),
            "",
            Arc::new(serde_json::Map::from_iter([(
                "type".to_owned(),
                serde_json::json!("object"),
            )])),
        )
    }

    #[test]
    fn a_server_that_keeps_its_names_is_listed_under_them_and_a_builtins_name_is_refused() {
        let builtins = [BuiltinListing {
            tool: tool("devboy_expand"),
            lazy_only: false,
        }];
        let own = UpstreamCatalog {
            tools: vec![tool("test_simple_text"), tool("devboy_expand")],
            prompts: vec![Prompt::new("test_simple_prompt", None::<String>, None)],
            ..Default::default()
        };
        let git = UpstreamCatalog {
            tools: vec![tool("log")],
            ..Default::default()
        };
        let filter = ToolFilter::default();
        let listing = |name, prefix, listing| UpstreamListing {
            name,
            prefix,
            filter: &filter,
            listing,
            always_load: false,
        };
        let catalog = Catalog::build(
            "devboy",
            &builtins,
            &[listing("remote", "", &own), listing("git", "git", &git)],
            false,
        );
        let names: Vec<&str> = catalog.tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["devboy_expand", "test_simple_text", "git__log"]);
        assert_eq!(
            catalog.tool_route("test_simple_text"),
            Some(&ToolRoute::Upstream {
                upstream: "remote".into(),
                tool: "test_simple_text".into(),
                side_effect: SideEffectClass::Unknown,
                shipped: None,
            })
        );
        assert!(matches!(
            catalog.tool_route("devboy_expand"),
            Some(ToolRoute::Builtin { .. })
        ));
        assert_eq!(catalog.prompts[0].name, "test_simple_prompt");
        assert_eq!(
            catalog.clashes,
            ["tool `devboy_expand` of server `remote` (prefix \"\") is not exposed: devboy's built-in `devboy_expand` has that name; give `remote` a prefix"]
        );
        assert!(catalog.renamed.is_empty(), "{:?}", catalog.renamed);
    }
}
