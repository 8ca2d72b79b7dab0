//! Where a call's facts are decided: a name and arguments in, a
//! [`ResolvedCall`] out, from the catalog's route (which carries the
//! tool's annotated class and the class devboy ships for it), and the
//! pipeline config, by the one rule ([`devboy_core::call::side_effect`]).
//! Pure: the same route and arguments resolve to the same call. The call
//! stack resolves the agent's call here, and speculation each call it
//! makes ahead of the agent, so a prefetch and the call it answers agree
//! on every fact.

use std::sync::Arc;

use devboy_core::call::{side_effect, CallRoute, ResolvedCall, ToolClassFacts};
use devboy_core::pipeline_config::PipelineConfig;
use rmcp::model::JsonObject;

use crate::catalog::ToolRoute;

/// Decides calls' facts for one session.
#[derive(Debug, Clone)]
pub struct Resolver {
    config: Arc<PipelineConfig>,
}

impl Resolver {
    /// Classes by `config`'s `[tools."GLOB"]` tables, then the routes'
    /// annotations and shipped classes.
    pub fn new(config: Arc<PipelineConfig>) -> Self {
        Self { config }
    }

    /// The call of `name` with `arguments` by `route`.
    pub fn resolve(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        route: &ToolRoute,
    ) -> ResolvedCall {
        let (route, facts) = match route {
            ToolRoute::Builtin { side_effect } => (
                CallRoute::Builtin,
                ToolClassFacts {
                    annotated: *side_effect,
                    shipped: None,
                    name,
                },
            ),
            ToolRoute::Upstream {
                upstream,
                tool,
                side_effect,
                shipped,
            } => (
                CallRoute::Upstream {
                    upstream: upstream.clone(),
                    tool: tool.clone(),
                },
                ToolClassFacts {
                    annotated: *side_effect,
                    shipped: *shipped,
                    name: tool,
                },
            ),
        };
        let class = side_effect(&self.config, name, facts);
        ResolvedCall::new(name, route, arguments, class)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devboy_core::call::ClassSource;
    use devboy_core::pipeline_config::SideEffectClass;

    fn upstream(annotated: SideEffectClass, shipped: Option<SideEffectClass>) -> ToolRoute {
        ToolRoute::Upstream {
            upstream: "srv".into(),
            tool: "zap".into(),
            side_effect: annotated,
            shipped,
        }
    }

    #[test]
    fn a_route_alone_decides_the_call() {
        let resolver = Resolver::new(Arc::new(PipelineConfig::embedded_default()));
        let shipped = upstream(SideEffectClass::Unknown, Some(SideEffectClass::ReadOnly));
        let call = resolver.resolve("s__zap", None, &shipped);
        assert_eq!(
            call.route,
            CallRoute::Upstream {
                upstream: "srv".into(),
                tool: "zap".into()
            }
        );
        assert_eq!(call.side_effect.class, SideEffectClass::ReadOnly);
        assert_eq!(call.side_effect.source, ClassSource::Shipped);
        let unknown = resolver.resolve("s__zap", None, &upstream(SideEffectClass::Unknown, None));
        assert_eq!(unknown.side_effect.source, ClassSource::Nothing);
        let annotated = resolver.resolve(
            "s__zap",
            None,
            &upstream(
                SideEffectClass::Destructive,
                Some(SideEffectClass::ReadOnly),
            ),
        );
        assert_eq!(annotated.side_effect.class, SideEffectClass::Destructive);
        let builtin = resolver.resolve(
            "devboy_status",
            None,
            &ToolRoute::Builtin {
                side_effect: SideEffectClass::ReadOnly,
            },
        );
        assert_eq!(builtin.route, CallRoute::Builtin);
        assert_eq!(builtin.side_effect.source, ClassSource::Annotations);
    }

    #[test]
    fn the_config_overrides_the_route() {
        let config = PipelineConfig::from_str(
            "schema_version = 3\n[tools.\"s__*\"]\nside_effect = \"mutating\"\n",
            std::path::Path::new("pipeline_config.toml"),
        )
        .expect("config");
        let resolver = Resolver::new(Arc::new(config));
        let call = resolver.resolve(
            "s__zap",
            None,
            &upstream(SideEffectClass::ReadOnly, Some(SideEffectClass::ReadOnly)),
        );
        assert_eq!(call.side_effect.class, SideEffectClass::Mutating);
        assert_eq!(call.side_effect.source, ClassSource::Config);
    }
}
