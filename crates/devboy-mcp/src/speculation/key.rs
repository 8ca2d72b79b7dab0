//! The canonical identity of a call: the same tool with the same arguments,
//! however the client ordered the keys of its objects.

use rmcp::model::JsonObject;

/// A call's identity: the exposed name and the arguments with object keys
/// sorted at every depth (no arguments and `{}` are the same call).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallKey {
    exposed: String,
    arguments: String,
}

impl CallKey {
    /// The key of a call of `exposed` with `arguments`.
    pub fn new(exposed: &str, arguments: Option<&JsonObject>) -> Self {
        Self {
            exposed: exposed.to_owned(),
            arguments: devboy_enrichment::canonical_arguments(arguments),
        }
    }

    /// The exposed tool name.
    pub fn exposed(&self) -> &str {
        &self.exposed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn key_order_does_not_matter_at_any_depth() {
        let a = object(json!({"b": 1, "a": {"y": [1, {"q": 2, "p": 3}], "x": null}}));
        let b = object(json!({"a": {"x": null, "y": [1, {"p": 3, "q": 2}]}, "b": 1}));
        assert_eq!(CallKey::new("t", Some(&a)), CallKey::new("t", Some(&b)));
    }

    #[test]
    fn names_values_and_array_order_do_matter() {
        let a = object(json!({"path": "/a"}));
        let b = object(json!({"path": "/b"}));
        assert_ne!(CallKey::new("t", Some(&a)), CallKey::new("t", Some(&b)));
        assert_ne!(CallKey::new("t", Some(&a)), CallKey::new("u", Some(&a)));
        let c = object(json!({"p": [1, 2]}));
        let d = object(json!({"p": [2, 1]}));
        assert_ne!(CallKey::new("t", Some(&c)), CallKey::new("t", Some(&d)));
        assert_eq!(
            CallKey::new("t", None),
            CallKey::new("t", Some(&JsonObject::new()))
        );
    }
}
