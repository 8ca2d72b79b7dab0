//! What one source file declares and calls, read from its tree-sitter
//! syntax tree: types and functions with their line spans, signature
//! lines and doc comments; the supertypes a type names; the names each
//! function calls.
//!
//! One walker serves every language; what differs is which node kinds
//! declare a type or a function and which call something, and where a
//! declaration keeps its name and its supertypes ([`Rules`]).

use serde::{Deserialize, Serialize};
use tree_sitter::{Node, Parser};

use crate::lang::Lang;

/// What a symbol is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A class, struct, enum or object.
    Type,
    /// An interface, trait or protocol: a contract others implement.
    Interface,
    /// A free function.
    Function,
    /// A function declared inside a type (or an `impl` of one).
    Method,
}

impl Kind {
    /// A type or an interface.
    pub fn is_type(self) -> bool {
        matches!(self, Kind::Type | Kind::Interface)
    }
}

/// One declared symbol.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Symbol {
    pub name: String,
    pub kind: Kind,
    /// First and last line, 0-based, inclusive (decorators and annotations
    /// included).
    pub start: u32,
    pub end: u32,
    /// The line that names the symbol (past decorators and annotations).
    pub sig: u32,
    /// The enclosing type in this file, by index.
    pub parent: Option<u32>,
    /// The type a method belongs to when it is declared apart from it (a
    /// Rust `impl`, a Go receiver).
    pub owner: Option<String>,
    /// Supertypes the declaration names (extends, implements, `impl Trait
    /// for`, base classes, delegation specifiers), last name segment only;
    /// for a Go function, its named result type.
    pub supers: Vec<String>,
    /// The first lines of its doc comment or docstring.
    pub doc: String,
    /// Its decorators (Python), by last name segment (`@app.route(…)` →
    /// `route`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decorators: Vec<String>,
}

/// A call made inside a symbol's body, by the callee's last name segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    /// The calling symbol, by index.
    pub from: u32,
    pub name: String,
    /// Called on a receiver (`a.b()`, `self.b()`), not by a bare name.
    pub member: bool,
    /// Called on the caller's own object (`self.b()`, `this.b()`,
    /// `super().b()`): the caller's type or its supertypes, where a call
    /// on another receiver (`adapter.send()`) may reach any type's method.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub on_self: bool,
}

/// What one file declares and calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileFacts {
    pub lang: Lang,
    pub lines: u32,
    pub symbols: Vec<Symbol>,
    pub calls: Vec<Call>,
    /// Names gathered in one collection literal (a list, a dict's values,
    /// a Go slice or map), at least [`MIN_GROUP`] of them: a registry of
    /// handlers or plugins, members of one family.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<Vec<String>>,
}

/// The fewest names a collection literal needs to be a registry.
pub const MIN_GROUP: usize = 3;

/// Collection literals, by language, whose elements may name members.
fn is_collection(lang: Lang, kind: &str) -> bool {
    match lang {
        Lang::Python => matches!(kind, "list" | "tuple" | "set" | "dictionary"),
        Lang::TypeScript | Lang::Tsx | Lang::JavaScript => matches!(kind, "array" | "object"),
        Lang::Go => kind == "literal_value",
        Lang::Java => kind == "array_initializer",
        Lang::Rust => kind == "array_expression",
        Lang::Kotlin => false,
    }
}

/// The names a collection literal's elements are: bare names or member
/// accesses (`handlers.json`), and the values of its pairs.
fn group_names(node: Node<'_>, src: &[u8]) -> Vec<String> {
    let mut names = Vec::new();
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        let element = match child.kind() {
            "pair" | "keyed_element" => child
                .child_by_field_name("value")
                .or_else(|| child.named_child(child.named_child_count().saturating_sub(1))),
            "literal_element" => child.named_child(0),
            _ => Some(child),
        };
        let Some(element) = element else { continue };
        let element = if element.kind() == "literal_element" {
            match element.named_child(0) {
                Some(e) => e,
                None => continue,
            }
        } else {
            element
        };
        let member = matches!(
            element.kind(),
            "attribute"
                | "member_expression"
                | "selector_expression"
                | "field_expression"
                | "scoped_identifier"
        );
        if is_name(element.kind()) || member || element.kind() == "shorthand_property_identifier" {
            if let Some(name) = last_name(element, src) {
                names.push(name);
            }
        }
    }
    names
}

/// The longest doc kept per symbol.
const MAX_DOC: usize = 200;

/// The longest name kept (longer ones are not identifiers worth indexing).
const MAX_NAME: usize = 120;

/// Where a language keeps what the walker needs.
struct Rules {
    /// Node kinds that declare a type, and whether it is an interface.
    types: &'static [(&'static str, Kind)],
    /// Node kinds that declare a function.
    functions: &'static [&'static str],
    /// Node kinds that call something, and the field holding the callee
    /// (`""`: the first named child).
    calls: &'static [(&'static str, &'static str)],
    /// Node kinds (children of a type declaration) that name supertypes.
    heritage: &'static [&'static str],
}

fn rules(lang: Lang) -> Rules {
    match lang {
        Lang::Rust => Rules {
            types: &[
                ("struct_item", Kind::Type),
                ("enum_item", Kind::Type),
                ("union_item", Kind::Type),
                ("trait_item", Kind::Interface),
            ],
            functions: &["function_item", "function_signature_item"],
            calls: &[("call_expression", "function")],
            heritage: &[],
        },
        Lang::Python => Rules {
            types: &[("class_definition", Kind::Type)],
            functions: &["function_definition"],
            calls: &[("call", "function")],
            heritage: &["superclasses"],
        },
        Lang::TypeScript | Lang::Tsx | Lang::JavaScript => Rules {
            types: &[
                ("class_declaration", Kind::Type),
                ("abstract_class_declaration", Kind::Type),
                ("interface_declaration", Kind::Interface),
                ("enum_declaration", Kind::Type),
            ],
            functions: &[
                "function_declaration",
                "generator_function_declaration",
                "method_definition",
                "method_signature",
                "abstract_method_signature",
            ],
            calls: &[
                ("call_expression", "function"),
                ("new_expression", "constructor"),
            ],
            heritage: &["class_heritage", "extends_type_clause"],
        },
        Lang::Go => Rules {
            types: &[("type_spec", Kind::Type)],
            functions: &["function_declaration", "method_declaration"],
            calls: &[("call_expression", "function")],
            heritage: &[],
        },
        Lang::Java => Rules {
            types: &[
                ("class_declaration", Kind::Type),
                ("interface_declaration", Kind::Interface),
                ("enum_declaration", Kind::Type),
                ("record_declaration", Kind::Type),
            ],
            functions: &["method_declaration", "constructor_declaration"],
            calls: &[
                ("method_invocation", "name"),
                ("object_creation_expression", "type"),
            ],
            heritage: &["superclass", "super_interfaces", "extends_interfaces"],
        },
        Lang::Kotlin => Rules {
            types: &[
                ("class_declaration", Kind::Type),
                ("object_declaration", Kind::Type),
            ],
            functions: &["function_declaration"],
            calls: &[("call_expression", "")],
            heritage: &["delegation_specifiers"],
        },
    }
}

/// Kinds whose text is a name.
fn is_name(kind: &str) -> bool {
    matches!(
        kind,
        "identifier"
            | "type_identifier"
            | "field_identifier"
            | "property_identifier"
            | "simple_identifier"
            | "constant"
            | "private_property_identifier"
            | "shorthand_property_identifier"
    )
}

/// Subtrees that never name a supertype or a callee.
fn is_arguments(kind: &str) -> bool {
    matches!(
        kind,
        "type_arguments" | "value_arguments" | "arguments" | "argument_list" | "type_parameters"
    )
}

/// The last name segment of a type or callee expression (`a.b.C` → `C`,
/// `List<T>` → `List`, `obj.method` → `method`).
fn last_name(node: Node<'_>, src: &[u8]) -> Option<String> {
    let mut node = node;
    for _ in 0..16 {
        if is_name(node.kind()) {
            let text = node.utf8_text(src).ok()?;
            return (text.len() <= MAX_NAME).then(|| text.to_owned());
        }
        // A member access names its member last; a generic type its name first.
        let next = ["property", "field", "attribute", "name", "type"]
            .iter()
            .find_map(|f| node.child_by_field_name(f))
            .or_else(|| match node.kind() {
                "generic_type" | "constructor_invocation" | "delegation_specifier" => {
                    node.named_child(0)
                }
                _ => {
                    let mut cursor = node.walk();
                    let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
                    children.into_iter().rev().find(|c| !is_arguments(c.kind()))
                }
            })?;
        node = next;
    }
    None
}

/// The supertypes named under a heritage node.
fn heritage_names(node: Node<'_>, src: &[u8], out: &mut Vec<String>) {
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        match child.kind() {
            // Lists of supertypes: look inside.
            "delegation_specifiers"
            | "super_interfaces"
            | "extends_interfaces"
            | "type_list"
            | "implements_clause"
            | "extends_clause"
            | "extends_type_clause"
            | "interface_type_list"
            | "class_heritage" => heritage_names(child, src, out),
            "keyword_argument" | "comment" => {}
            kind if is_arguments(kind) => {}
            _ => {
                if let Some(name) = last_name(child, src) {
                    if !out.contains(&name) {
                        out.push(name);
                    }
                }
            }
        }
    }
}

/// The doc comment just above `node`, or a Python docstring first in its
/// body.
fn doc_of(node: Node<'_>, src: &[u8], lang: Lang) -> String {
    let mut lines: Vec<String> = Vec::new();
    if lang == Lang::Python {
        if let Some(first) = node
            .child_by_field_name("body")
            .and_then(|b| b.named_child(0))
            .filter(|s| s.kind() == "expression_statement")
            .and_then(|s| s.named_child(0))
            .filter(|s| s.kind() == "string")
        {
            lines.extend(
                first
                    .utf8_text(src)
                    .unwrap_or_default()
                    .trim_matches(|c| c == '"' || c == '\'')
                    .lines()
                    .map(str::to_owned),
            );
        }
    } else {
        let mut prev = node.prev_sibling();
        let mut above = Vec::new();
        while let Some(p) = prev {
            if !p.kind().contains("comment") {
                break;
            }
            above.push(p.utf8_text(src).unwrap_or_default().to_owned());
            prev = p.prev_sibling();
        }
        above.reverse();
        for comment in above {
            lines.extend(comment.lines().map(|l| {
                l.trim()
                    .trim_start_matches("///")
                    .trim_start_matches("//!")
                    .trim_start_matches("//")
                    .trim_start_matches("/**")
                    .trim_start_matches("/*")
                    .trim_end_matches("*/")
                    .trim_start_matches('*')
                    .trim()
                    .to_owned()
            }));
        }
    }
    let mut doc = String::new();
    for line in lines.iter().map(|l| l.trim()).filter(|l| !l.is_empty()) {
        if doc.len() + line.len() > MAX_DOC {
            break;
        }
        if !doc.is_empty() {
            doc.push(' ');
        }
        doc.push_str(line);
    }
    doc
}

/// Whether a type declaration is an interface by its keyword (Kotlin's
/// `interface` and `fun interface` share `class_declaration`).
fn declares_interface(node: Node<'_>) -> bool {
    let mut cursor = node.walk();
    let found = node
        .children(&mut cursor)
        .take(8)
        .any(|c| c.kind() == "interface");
    found
}

/// The decorators of a Python definition (its parent
/// `decorated_definition`'s), by last name segment.
fn decorators_of(node: Node<'_>, src: &[u8]) -> Vec<String> {
    let Some(parent) = node.parent().filter(|p| p.kind() == "decorated_definition") else {
        return Vec::new();
    };
    let mut cursor = parent.walk();
    parent
        .named_children(&mut cursor)
        .filter(|c| c.kind() == "decorator")
        .filter_map(|d| {
            let expr = d.named_child(0)?;
            let callee = if expr.kind() == "call" {
                expr.child_by_field_name("function")?
            } else {
                expr
            };
            last_name(callee, src)
        })
        .collect()
}

/// The type a Go method's receiver names.
fn go_receiver(node: Node<'_>, src: &[u8]) -> Option<String> {
    let receiver = node.child_by_field_name("receiver")?;
    let param = receiver.named_child(0)?;
    last_name(param.child_by_field_name("type")?, src)
}

/// Reads one file. `None` when the grammar cannot be loaded or the parse
/// gives up (never on ordinary bad syntax: tree-sitter recovers).
pub fn extract(lang: Lang, text: &str) -> Option<FileFacts> {
    let mut parser = Parser::new();
    parser.set_language(&lang.grammar()).ok()?;
    let tree = parser.parse(text, None)?;
    let src = text.as_bytes();
    let rules = rules(lang);
    let mut facts = FileFacts {
        lang,
        lines: text.lines().count() as u32,
        symbols: Vec::new(),
        calls: Vec::new(),
        groups: Vec::new(),
    };
    // (node, enclosing type, enclosing function, impl owner and trait)
    type Frame<'t> = (
        Node<'t>,
        Option<u32>,
        Option<u32>,
        Option<(String, Option<String>)>,
    );
    let mut stack: Vec<Frame<'_>> = vec![(tree.root_node(), None, None, None)];
    while let Some((node, in_type, in_fn, in_impl)) = stack.pop() {
        let kind = node.kind();
        let (mut in_type, mut in_fn, mut in_impl) = (in_type, in_fn, in_impl);
        let line = |n: Node<'_>| n.start_position().row as u32;
        let span = (line(node), node.end_position().row as u32);

        if lang == Lang::Rust && kind == "impl_item" {
            let owner = node
                .child_by_field_name("type")
                .and_then(|t| last_name(t, src));
            let trait_name = node
                .child_by_field_name("trait")
                .and_then(|t| last_name(t, src));
            if let Some(owner) = owner {
                if let Some(t) = &trait_name {
                    // Recorded on the type where it is declared; the graph
                    // joins `impl` blocks of other files by name.
                    facts.symbols.push(Symbol {
                        name: owner.clone(),
                        kind: Kind::Type,
                        start: span.0,
                        end: span.1,
                        sig: span.0,
                        parent: None,
                        owner: Some(owner.clone()),
                        supers: vec![t.clone()],
                        doc: String::new(),
                        decorators: Vec::new(),
                    });
                }
                in_impl = Some((owner, trait_name));
            }
        } else if let Some((_, declared)) = rules.types.iter().find(|(k, _)| *k == kind) {
            let name_node = node.child_by_field_name("name");
            if let Some(name) = name_node.and_then(|n| last_name(n, src)) {
                let mut kind = *declared;
                if lang == Lang::Kotlin && declares_interface(node) {
                    kind = Kind::Interface;
                }
                // A Go interface, or a named func type (`type HandlerFunc
                // func(*Context)`): a contract functions fulfil.
                if lang == Lang::Go
                    && node
                        .child_by_field_name("type")
                        .is_some_and(|t| matches!(t.kind(), "interface_type" | "function_type"))
                {
                    kind = Kind::Interface;
                }
                let mut supers = Vec::new();
                let mut cursor = node.walk();
                let mut heritage: Vec<Node<'_>> = node
                    .children(&mut cursor)
                    .filter(|c| rules.heritage.contains(&c.kind()))
                    .collect();
                // Python keeps its bases in the field `superclasses`.
                heritage.extend(
                    rules
                        .heritage
                        .iter()
                        .filter_map(|f| node.child_by_field_name(f))
                        .filter(|f| !rules.heritage.contains(&f.kind())),
                );
                for child in heritage {
                    if child.kind() == "superclass" {
                        if let Some(n) = child.named_child(0).and_then(|c| last_name(c, src)) {
                            supers.push(n);
                        }
                    } else {
                        heritage_names(child, src, &mut supers);
                    }
                }
                supers.retain(|s| s != "object" && s != "Object");
                // A Python abstract base class or protocol is a contract.
                if lang == Lang::Python
                    && supers
                        .iter()
                        .any(|s| matches!(s.as_str(), "ABC" | "Protocol" | "ABCMeta"))
                {
                    kind = Kind::Interface;
                }
                facts.symbols.push(Symbol {
                    name,
                    kind,
                    start: span.0,
                    end: span.1,
                    sig: name_node.map_or(span.0, line),
                    parent: in_type,
                    owner: None,
                    supers,
                    doc: doc_of(node, src, lang),
                    decorators: decorators_of(node, src),
                });
                in_type = Some(facts.symbols.len() as u32 - 1);
                in_fn = None;
            }
        } else if rules.functions.contains(&kind) {
            let name_node = node.child_by_field_name("name");
            if let Some(name) = name_node.and_then(|n| last_name(n, src)) {
                let owner = match (&in_impl, lang) {
                    (Some((owner, _)), _) => Some(owner.clone()),
                    (None, Lang::Go) => go_receiver(node, src),
                    _ => None,
                };
                let method = in_type.is_some() || owner.is_some();
                // A Go function's named result type: what it produces
                // (middleware constructors all return `HandlerFunc`).
                let produces: Vec<String> = if lang == Lang::Go && !method {
                    node.child_by_field_name("result")
                        .filter(|r| matches!(r.kind(), "type_identifier" | "qualified_type"))
                        .and_then(|r| last_name(r, src))
                        .into_iter()
                        .collect()
                } else {
                    Vec::new()
                };
                facts.symbols.push(Symbol {
                    name,
                    kind: if method { Kind::Method } else { Kind::Function },
                    start: span.0,
                    end: span.1,
                    sig: name_node.map_or(span.0, line),
                    parent: in_type,
                    owner,
                    supers: produces,
                    doc: doc_of(node, src, lang),
                    decorators: decorators_of(node, src),
                });
                in_fn = Some(facts.symbols.len() as u32 - 1);
            }
        } else if matches!(lang, Lang::TypeScript | Lang::Tsx | Lang::JavaScript)
            && kind == "variable_declarator"
            && node.child_by_field_name("value").is_some_and(|v| {
                matches!(
                    v.kind(),
                    "arrow_function" | "function_expression" | "function"
                )
            })
        {
            let name_node = node.child_by_field_name("name");
            if let Some(name) = name_node
                .filter(|n| is_name(n.kind()))
                .and_then(|n| last_name(n, src))
            {
                let decl = node.parent().unwrap_or(node);
                facts.symbols.push(Symbol {
                    name,
                    kind: if in_type.is_some() {
                        Kind::Method
                    } else {
                        Kind::Function
                    },
                    start: line(decl),
                    end: decl.end_position().row as u32,
                    sig: line(node),
                    parent: in_type,
                    owner: None,
                    supers: Vec::new(),
                    doc: doc_of(decl, src, lang),
                    decorators: Vec::new(),
                });
                in_fn = Some(facts.symbols.len() as u32 - 1);
            }
        } else if is_collection(lang, kind) {
            let names = group_names(node, src);
            if names.len() >= MIN_GROUP {
                facts.groups.push(names);
            }
        } else if let Some((_, field)) = rules.calls.iter().find(|(k, _)| *k == kind) {
            if let Some(from) = in_fn.or(in_type) {
                let callee = if field.is_empty() {
                    node.named_child(0)
                } else {
                    node.child_by_field_name(field)
                };
                if let Some(callee) = callee {
                    if let Some(name) = last_name(callee, src) {
                        let member = !is_name(callee.kind());
                        let on_self = member && {
                            let text = callee.utf8_text(src).unwrap_or_default();
                            ["self.", "this.", "cls.", "super.", "super()."]
                                .iter()
                                .any(|p| text.starts_with(p))
                        };
                        facts.calls.push(Call {
                            from,
                            name,
                            member,
                            on_self,
                        });
                    }
                }
            }
        }

        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
        for child in children.into_iter().rev() {
            stack.push((child, in_type, in_fn, in_impl.clone()));
        }
    }
    facts.calls.sort_by(|a, b| {
        (a.from, &a.name, a.member, a.on_self).cmp(&(b.from, &b.name, b.member, b.on_self))
    });
    facts.calls.dedup();
    Some(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(facts: &FileFacts) -> Vec<(String, Kind, Vec<String>)> {
        facts
            .symbols
            .iter()
            .map(|s| (s.name.clone(), s.kind, s.supers.clone()))
            .collect()
    }

    fn calls(facts: &FileFacts, from: &str) -> Vec<String> {
        let i = facts.symbols.iter().position(|s| s.name == from).unwrap() as u32;
        facts
            .calls
            .iter()
            .filter(|c| c.from == i)
            .map(|c| c.name.clone())
            .collect()
    }

    #[test]
    fn kotlin_interfaces_objects_and_delegation() {
        let src = r#"
package okhttp3

/** Observes, modifies, and potentially short-circuits requests. */
fun interface Interceptor {
  @Throws(IOException::class)
  fun intercept(chain: Chain): Response

  interface Chain {
    fun proceed(request: Request): Response
  }
}

object CallServerInterceptor : Interceptor {
  @Throws(IOException::class)
  override fun intercept(chain: Interceptor.Chain): Response {
    val exchange = chain.exchange()
    return chain.proceed(chain.request())
  }
}

class BridgeInterceptor(private val cookieJar: CookieJar) : Interceptor, Closeable {
  override fun intercept(chain: Interceptor.Chain): Response = chain.proceed(build())
}
"#;
        let facts = extract(Lang::Kotlin, src).unwrap();
        let got = names(&facts);
        assert_eq!(got[0], ("Interceptor".into(), Kind::Interface, vec![]));
        assert!(
            got.contains(&("Chain".into(), Kind::Interface, vec![])),
            "{got:?}"
        );
        assert!(got.contains(&(
            "CallServerInterceptor".into(),
            Kind::Type,
            vec!["Interceptor".into()]
        )));
        assert!(got.contains(&(
            "BridgeInterceptor".into(),
            Kind::Type,
            vec!["Interceptor".into(), "Closeable".into()]
        )));
        let intercept = facts
            .symbols
            .iter()
            .find(|s| s.name == "intercept")
            .unwrap();
        assert_eq!(intercept.kind, Kind::Method);
        // The signature line is past the annotation.
        assert_eq!(
            src.lines().nth(intercept.sig as usize).unwrap().trim(),
            "fun intercept(chain: Chain): Response"
        );
        assert_eq!(intercept.start + 1, intercept.sig);
        assert!(
            facts.symbols[0].doc.starts_with("Observes, modifies"),
            "{:?}",
            facts.symbols[0].doc
        );
        let server_calls: Vec<String> = facts
            .calls
            .iter()
            .filter(|c| {
                facts.symbols[c.from as usize]
                    .parent
                    .is_some_and(|p| facts.symbols[p as usize].name == "CallServerInterceptor")
            })
            .map(|c| c.name.clone())
            .collect();
        assert!(
            server_calls.contains(&"proceed".to_string()),
            "{server_calls:?}"
        );
        assert!(
            server_calls.contains(&"exchange".to_string()),
            "{server_calls:?}"
        );
    }

    #[test]
    fn java_rust_python_typescript_go() {
        let java = extract(
            Lang::Java,
            "class A extends Base implements Runnable, Comparable<A> {\n  void run() { helper(); new B(); }\n}\ninterface I extends J {}\n",
        )
        .unwrap();
        assert_eq!(
            names(&java)[0],
            (
                "A".into(),
                Kind::Type,
                vec!["Base".into(), "Runnable".into(), "Comparable".into()]
            )
        );
        assert_eq!(calls(&java, "run"), vec!["B", "helper"]);
        assert!(names(&java).contains(&("I".into(), Kind::Interface, vec!["J".into()])));

        let rust = extract(
            Lang::Rust,
            "/// A thing.\npub struct S;\ntrait T { fn f(&self); }\nimpl T for S {\n    fn f(&self) { self.g(); crate::h(1); }\n}\n",
        )
        .unwrap();
        let got = names(&rust);
        assert_eq!(got[0], ("S".into(), Kind::Type, vec![]));
        assert_eq!(rust.symbols[0].doc, "A thing.");
        assert!(got.contains(&("T".into(), Kind::Interface, vec![])));
        assert!(
            got.contains(&("S".into(), Kind::Type, vec!["T".into()])),
            "impl T for S: {got:?}"
        );
        let f = rust.symbols.iter().rfind(|s| s.name == "f").unwrap();
        assert_eq!((f.kind, f.owner.as_deref()), (Kind::Method, Some("S")));

        let py = extract(
            Lang::Python,
            "class Session(base.SessionRedirectMixin, metaclass=M):\n    \"\"\"A session.\"\"\"\n    @property\n    def send(self, r):\n        return self.adapter.send(r)\n",
        )
        .unwrap();
        assert_eq!(
            names(&py)[0],
            (
                "Session".into(),
                Kind::Type,
                vec!["SessionRedirectMixin".into()]
            )
        );
        assert_eq!(py.symbols[0].doc, "A session.");
        let send = &py.symbols[1];
        assert_eq!(
            (send.name.as_str(), send.kind, send.sig),
            ("send", Kind::Method, 3)
        );
        assert_eq!(calls(&py, "send"), vec!["send"]);

        let ts = extract(
            Lang::TypeScript,
            "export class Router extends Base implements IRouter {\n  handle(req: Req) { return this.stack.dispatch(req); }\n}\nexport const make = (x: number) => new Router();\ninterface IRouter extends Handler<Req> {}\n",
        )
        .unwrap();
        let got = names(&ts);
        assert_eq!(
            got[0],
            (
                "Router".into(),
                Kind::Type,
                vec!["Base".into(), "IRouter".into()]
            )
        );
        assert!(got.contains(&("make".into(), Kind::Function, vec![])));
        assert!(
            got.contains(&("IRouter".into(), Kind::Interface, vec!["Handler".into()])),
            "{got:?}"
        );
        assert_eq!(calls(&ts, "handle"), vec!["dispatch"]);
        assert_eq!(calls(&ts, "make"), vec!["Router"]);

        let go = extract(
            Lang::Go,
            "package gin\ntype Engine struct{}\ntype Handler interface{ Serve() }\nfunc (e *Engine) ServeHTTP() { e.handle(); fmt.Println() }\n",
        )
        .unwrap();
        let got = names(&go);
        assert!(got.contains(&("Handler".into(), Kind::Interface, vec![])));
        let serve = go.symbols.iter().find(|s| s.name == "ServeHTTP").unwrap();
        assert_eq!(
            (serve.kind, serve.owner.as_deref()),
            (Kind::Method, Some("Engine"))
        );
        assert_eq!(calls(&go, "ServeHTTP"), vec!["Println", "handle"]);
    }

    #[test]
    fn broken_syntax_still_gives_what_parses() {
        let facts = extract(Lang::Python, "def ok():\n    pass\n\ndef broken(:\n").unwrap();
        assert_eq!(facts.symbols[0].name, "ok");
    }
}
