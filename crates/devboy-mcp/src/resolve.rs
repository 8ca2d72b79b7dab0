//! Where a call's facts are decided: a name and arguments in, a
//! [`ResolvedCall`] out, from the catalog's route, the tool's
//! annotations, devboy's shipped knowledge and the pipeline config, by
//! the one rule ([`devboy_core::call::side_effect`]). The call path
//! resolves the agent's call here, and speculation each call it makes
//! ahead of the agent, so a prefetch and the call it answers agree on
//! every fact.

use std::sync::Arc;

use devboy_core::call::{side_effect, CallRoute, ResolvedCall, SideEffect, ToolClassFacts};
use devboy_core::pipeline_config::{PipelineConfig, SideEffectClass};
use rmcp::model::JsonObject;

use crate::catalog::ToolRoute;
use crate::proxy::Proxy;
use crate::speculation::PrefetchPlanner;

/// Decides calls' facts for one session.
pub struct Resolver {
    config: Arc<PipelineConfig>,
    /// Knows the shipped classes of well-known servers' tools.
    planner: Option<Arc<dyn PrefetchPlanner>>,
}

impl Resolver {
    /// Classes by `config`'s `[tools."GLOB"]` tables, the annotations and,
    /// when a planner is given, the classes it ships.
    pub fn new(config: Arc<PipelineConfig>, planner: Option<Arc<dyn PrefetchPlanner>>) -> Self {
        Self { config, planner }
    }

    /// The same classes, with what `planner` ships for well-known servers.
    pub fn with_planner(&self, planner: Arc<dyn PrefetchPlanner>) -> Self {
        Self::new(self.config.clone(), Some(planner))
    }

    /// The effective class of the tool exposed as `exposed` (named `tool`
    /// where it is answered) whose annotations say `annotated`.
    pub fn side_effect(&self, exposed: &str, tool: &str, annotated: SideEffectClass) -> SideEffect {
        let shipped = self.planner.as_ref().and_then(|p| p.shipped(exposed));
        side_effect(
            &self.config,
            exposed,
            ToolClassFacts {
                annotated,
                shipped,
                name: tool,
            },
        )
    }

    /// The call of `name` with `arguments` by `route`, as `proxy` serves
    /// it now; `None` when the route names no upstream devboy has.
    pub fn resolve(
        &self,
        proxy: &Proxy,
        name: &str,
        arguments: Option<JsonObject>,
        route: &ToolRoute,
    ) -> Option<ResolvedCall> {
        let (route, class) = match route {
            ToolRoute::Builtin(index) => {
                let tool = proxy.builtins().get(*index)?;
                let annotated = tool
                    .definition()
                    .annotations
                    .as_ref()
                    .map_or(SideEffectClass::Unknown, |a| {
                        SideEffectClass::from_annotations(a.read_only_hint, a.destructive_hint)
                    });
                (CallRoute::Builtin, self.side_effect(name, name, annotated))
            }
            ToolRoute::Upstream {
                upstream,
                tool,
                side_effect,
            } => {
                let upstream = proxy.upstreams().get(*upstream)?.clone();
                (
                    CallRoute::Upstream {
                        upstream: upstream.config().name.clone(),
                        tool: tool.clone(),
                    },
                    self.side_effect(name, tool, *side_effect),
                )
            }
        };
        Some(ResolvedCall::new(name, route, arguments, class))
    }
}
