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
    /// Test code in an ordinary source file: declared inside a Rust
    /// `#[cfg(test)]` module (or another test symbol), or a test by its
    /// own marks (`#[test]`, `@Test`, Go's `TestXxx(t *testing.T)`,
    /// pytest's `def test_*`). Test files are told apart by their path.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub test: bool,
}

impl Symbol {
    /// An `impl Trait for Type` record: it carries the supertype edge,
    /// and is no declaration of its own.
    pub fn is_impl_record(&self) -> bool {
        self.kind == Kind::Type && self.owner.is_some()
    }
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
    /// The name the object of a call on another receiver is held by
    /// (`adapter` in `adapter.send()` and in `self.adapter.send()`), when
    /// the object is a name and not a call's result or an element.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv: Option<String>,
    /// The type that name holds, where the code says so: a parameter's
    /// annotation, a local or a field assigned from a constructor, a
    /// declared field (last name segment: `chain: Interceptor.Chain` →
    /// `Chain`). A type outside the project is kept too: it says the call
    /// reaches none of the project's methods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv_type: Option<String>,
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
            // A JS private member (`#dispatch`) is named without its `#`,
            // where it is declared and where it is called alike, so that
            // the words of a question (`dispatch`) find it.
            let text = text.strip_prefix('#').unwrap_or(text);
            return (!text.is_empty() && text.len() <= MAX_NAME).then(|| text.to_owned());
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
            // A Rust item's attributes may sit between it and its doc.
            if p.kind() == "attribute_item" {
                prev = p.prev_sibling();
                continue;
            }
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

/// The attributes of a Rust item: its outer ones (`#[…]` just above it,
/// doc comments between them), and the inner ones (`#![…]`) first in its
/// body or, for a file, first in the file.
fn rust_attributes<'t>(node: Node<'t>) -> Vec<Node<'t>> {
    let mut out = Vec::new();
    let mut prev = node.prev_sibling();
    while let Some(p) = prev {
        match p.kind() {
            "attribute_item" => out.extend(p.named_child(0)),
            kind if kind.contains("comment") => {}
            _ => break,
        }
        prev = p.prev_sibling();
    }
    let body = if node.kind() == "source_file" {
        Some(node)
    } else {
        node.child_by_field_name("body")
    };
    if let Some(body) = body {
        let mut cursor = body.walk();
        for child in body.named_children(&mut cursor) {
            match child.kind() {
                "inner_attribute_item" => out.extend(child.named_child(0)),
                kind if kind.contains("comment") => {}
                _ => break,
            }
        }
    }
    out
}

/// Whether a Rust item is test code by its attributes: `#[cfg(test)]`
/// (or `#[cfg(all(test, …))]`), or a test attribute, whose path ends in
/// `test` (`#[test]`, `#[tokio::test]`, `#[crate::test]`) or names a test
/// framework's (`#[rstest]`, `#[test_case(…)]`, `#[bench]`).
fn rust_is_test(node: Node<'_>, src: &[u8]) -> bool {
    rust_attributes(node).into_iter().any(|attr| {
        let Some(path) = attr.named_child(0) else {
            return false;
        };
        let Some(last) = last_name(path, src) else {
            return false;
        };
        if matches!(last.as_str(), "test" | "rstest" | "test_case" | "bench") {
            return true;
        }
        if path.utf8_text(src).unwrap_or_default() != "cfg" {
            return false;
        }
        let args: String = attr
            .child_by_field_name("arguments")
            .and_then(|a| a.utf8_text(src).ok())
            .unwrap_or_default()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        // Compiled only for tests: `test` alone or among `all(…)`'s
        // conditions (`not(test)` and `any(test, …)` are not).
        args == "(test)"
            || args
                .strip_prefix("(all(")
                .and_then(|a| a.strip_suffix("))"))
                .is_some_and(|a| a.split(',').any(|c| c == "test"))
    })
}

/// Whether a function is a test by its own marks, in the languages that
/// mark tests on the function (Rust's attributes are read for every item,
/// as a `#[cfg(test)]` module makes all it holds test code). `enclosing`
/// is the type it is declared in; `nested`, whether it is declared inside
/// another function.
fn function_is_test(
    lang: Lang,
    node: Node<'_>,
    src: &[u8],
    name: &str,
    enclosing: Option<&Symbol>,
    nested: bool,
) -> bool {
    match lang {
        // pytest collects `test_*` functions of a module and methods of
        // `Test*` classes; unittest, methods of a `TestCase`.
        Lang::Python => {
            name.starts_with("test_")
                && !nested
                && enclosing.is_none_or(|t| {
                    t.name.starts_with("Test") || t.supers.iter().any(|s| s.ends_with("TestCase"))
                })
        }
        // `go test` runs `TestXxx(t *testing.T)`, `BenchmarkXxx(b
        // *testing.B)`, `FuzzXxx(f *testing.F)` (and `TestMain`).
        Lang::Go => {
            node.kind() == "function_declaration"
                && ["Test", "Benchmark", "Fuzz"].iter().any(|p| {
                    name.strip_prefix(p)
                        .is_some_and(|rest| !rest.starts_with(|c: char| c.is_lowercase()))
                })
                && node
                    .child_by_field_name("parameters")
                    .and_then(|p| p.utf8_text(src).ok())
                    .is_some_and(|p| p.contains("testing."))
        }
        // JUnit's `@Test`, `@ParameterizedTest`, `@TestFactory`, ….
        Lang::Java | Lang::Kotlin => {
            let mut cursor = node.walk();
            let modifiers = node.children(&mut cursor).find(|c| c.kind() == "modifiers");
            modifiers.is_some_and(|m| {
                let mut cursor = m.walk();
                let found = m
                    .named_children(&mut cursor)
                    .filter(|a| a.kind().ends_with("annotation"))
                    .filter_map(|a| last_name(a, src))
                    .any(|a| a.ends_with("Test") || a.starts_with("Test"));
                found
            })
        }
        // Rust: see `rust_is_test`; JS and TS tests live in test files.
        Lang::Rust | Lang::TypeScript | Lang::Tsx | Lang::JavaScript => false,
    }
}

/// Whether a node is a function value (what a JS assignment or class
/// field may hold).
fn is_function_value(kind: &str) -> bool {
    matches!(
        kind,
        "arrow_function" | "function_expression" | "function" | "generator_function"
    )
}

/// Whom a JS function assigned to a property belongs to.
enum Assigned {
    /// `this.x = …`: the enclosing class (or constructor function).
    This,
    /// `Route.prototype.x = …` → `Route`; `app.x = …` → `app`.
    Owner(String),
    /// `exports.x = …`, `module.exports.x = …`: a module's free function.
    Module,
}

/// The property a JS assignment's left side names, the node naming it,
/// and whom it belongs to; `None` when it names no property
/// (`module.exports = …`, `this[method] = …`, a plain variable).
fn assigned_property<'t>(left: Node<'t>, src: &[u8]) -> Option<(String, Node<'t>, Assigned)> {
    if left.kind() != "member_expression" {
        return None;
    }
    let property = left
        .child_by_field_name("property")
        .filter(|p| is_name(p.kind()))?;
    let object = left.child_by_field_name("object")?;
    let name = last_name(property, src)?;
    let text = |n: Node<'_>| n.utf8_text(src).unwrap_or_default();
    let assigned = match object.kind() {
        "this" => Assigned::This,
        "identifier" if text(object) == "exports" => Assigned::Module,
        // `module.exports = …` names the module, not a member of it.
        "identifier" if text(object) == "module" => return None,
        "member_expression" => {
            let inner = object.child_by_field_name("object");
            let member = object.child_by_field_name("property").map(text);
            match member {
                Some("exports") if inner.is_some_and(|i| text(i) == "module") => Assigned::Module,
                Some("prototype") => Assigned::Owner(inner.and_then(|i| last_name(i, src))?),
                _ => Assigned::Owner(last_name(object, src)?),
            }
        }
        _ => Assigned::Owner(last_name(object, src)?),
    };
    Some((name, property, assigned))
}

/// A name given a type inside a function, or on a type (its fields).
struct Binding {
    scope: Scope,
    name: String,
    ty: String,
}

enum Scope {
    /// A function's parameter or local, by the function's index.
    Fn(u32),
    /// A type's field or property, by the type's name (methods declared
    /// apart from it, in a Rust `impl` or a Go receiver, find it so).
    Type(String),
}

/// The name of the type a symbol is or belongs to.
fn type_name_of(facts: &FileFacts, symbol: Option<u32>) -> Option<String> {
    let s = facts.symbols.get(symbol? as usize)?;
    if s.kind.is_type() {
        return Some(s.name.clone());
    }
    if let Some(owner) = &s.owner {
        return Some(owner.clone());
    }
    Some(facts.symbols.get(s.parent? as usize)?.name.clone())
}

/// Fills each call's [`Call::recv_type`] from the bindings of its caller,
/// then those of the caller's type.
fn type_receivers(facts: &mut FileFacts, bindings: &[Binding]) {
    if bindings.is_empty() {
        return;
    }
    let types: Vec<Option<String>> = (0..facts.symbols.len() as u32)
        .map(|i| type_name_of(facts, Some(i)))
        .collect();
    for call in &mut facts.calls {
        let Some(recv) = &call.recv else { continue };
        let in_fn = bindings
            .iter()
            .rev()
            .find(|b| matches!(b.scope, Scope::Fn(f) if f == call.from) && &b.name == recv);
        let in_type = || {
            let own = types.get(call.from as usize)?.as_deref()?;
            bindings
                .iter()
                .rev()
                .find(|b| matches!(&b.scope, Scope::Type(t) if t == own) && &b.name == recv)
        };
        call.recv_type = in_fn.or_else(in_type).map(|b| b.ty.clone());
    }
}

/// The object a call on a receiver is made on (`adapter` in
/// `adapter.send()`, `self.adapter` in `self.adapter.send()`, `Foo` in
/// `Foo::new()`); `None` for a call by a bare name.
fn call_object<'t>(call: Node<'t>, callee: Node<'t>) -> Option<Node<'t>> {
    if call.kind() == "method_invocation" {
        return call.child_by_field_name("object");
    }
    if callee.kind() == "navigation_expression" {
        return callee.named_child(0);
    }
    ["object", "operand", "value", "path"]
        .iter()
        .find_map(|f| callee.child_by_field_name(f))
}

/// The name an object is held by: a plain name, or the last name of a
/// member access (`self.adapter` → `adapter`); `None` for a call's
/// result, an element, a literal.
fn receiver_name(object: Node<'_>, src: &[u8]) -> Option<String> {
    if is_name(object.kind()) {
        return last_name(object, src);
    }
    match object.kind() {
        "attribute"
        | "member_expression"
        | "field_expression"
        | "selector_expression"
        | "navigation_expression"
        | "field_access" => {
            let last = ["attribute", "property", "field"]
                .iter()
                .find_map(|f| object.child_by_field_name(f))
                .or_else(|| object.named_child(object.named_child_count().checked_sub(1)?));
            last.filter(|n| is_name(n.kind()))
                .and_then(|n| last_name(n, src))
        }
        _ => None,
    }
}

/// The type a type expression names, by its last segment, past
/// references, pointers, optionals and quotes (`&mut Foo` → `Foo`,
/// `*gin.Context` → `Context`, `Optional["Foo"]` → `Foo`,
/// `Interceptor.Chain?` → `Chain`, `Request<B>` → `Request`).
fn type_named(node: Node<'_>, src: &[u8]) -> Option<String> {
    let mut text = node.utf8_text(src).ok()?.trim();
    loop {
        let before = text;
        for prefix in [
            ":",
            "&",
            "*",
            "mut ",
            "dyn ",
            "impl ",
            "'",
            "\"",
            "Optional[",
            "Option<",
            "?",
        ] {
            text = text.strip_prefix(prefix).unwrap_or(text).trim_start();
        }
        if text == before {
            break;
        }
    }
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.' || c == ':'))
        .unwrap_or(text.len());
    let path = &text[..end];
    let last = path
        .rsplit(['.', ':'])
        .next()
        .filter(|l| !l.is_empty() && l.len() <= MAX_NAME)?;
    last.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        .then(|| last.to_owned())
}

/// The type a value is made as, when it is a construction: `Foo(…)`,
/// `pkg.Foo(…)`, `new Foo(…)`, `Foo{…}`, `&Foo{…}`, `Foo::new(…)`,
/// `Foo { … }`. A call counts only by a capitalized name (the convention
/// that tells a constructor from a function in Python, Kotlin and Rust).
fn constructed(value: Node<'_>, src: &[u8]) -> Option<String> {
    let capitalized = |n: String| n.starts_with(char::is_uppercase).then_some(n);
    match value.kind() {
        "new_expression" => type_named(value.child_by_field_name("constructor")?, src),
        "object_creation_expression" | "composite_literal" => {
            type_named(value.child_by_field_name("type")?, src)
        }
        "struct_expression" => type_named(value.child_by_field_name("name")?, src),
        "unary_expression" => constructed(value.child_by_field_name("operand")?, src),
        // Go's `pool.Get().(*Context)`: what the assertion says it is.
        "type_assertion_expression" => type_named(value.child_by_field_name("type")?, src),
        "call" | "call_expression" => {
            let callee = value
                .child_by_field_name("function")
                .or_else(|| value.named_child(0))?;
            if callee.kind() == "scoped_identifier" {
                return capitalized(last_name(callee.child_by_field_name("path")?, src)?);
            }
            capitalized(last_name(callee, src)?)
        }
        _ => None,
    }
}

/// The names a declaration gives a type it states or constructs, and
/// whether they are the type's (fields, properties, `self.x = Foo()`) or
/// the function's (parameters, locals). `top` is outside any function.
fn bindings_of(lang: Lang, node: Node<'_>, src: &[u8], top: bool) -> Vec<(String, String, bool)> {
    let name_of = |n: Node<'_>| is_name(n.kind()).then(|| last_name(n, src)).flatten();
    let field = |f: &str| node.child_by_field_name(f);
    let mut out = Vec::new();
    let kind = node.kind();
    match (lang, kind) {
        (Lang::Python, "typed_parameter") => {
            if let (Some(name), Some(ty)) = (
                node.named_child(0).and_then(name_of),
                field("type").and_then(|t| type_named(t, src)),
            ) {
                out.push((name, ty, false));
            }
        }
        (Lang::Python, "assignment") => {
            let ty = field("type")
                .and_then(|t| type_named(t, src))
                .or_else(|| field("right").and_then(|r| constructed(r, src)));
            let left = field("left");
            let (name, of_type) = match left {
                Some(l) if l.kind() == "attribute" => {
                    let on_self = l
                        .child_by_field_name("object")
                        .is_some_and(|o| o.utf8_text(src).unwrap_or_default() == "self");
                    (
                        l.child_by_field_name("attribute")
                            .filter(|_| on_self)
                            .and_then(name_of),
                        true,
                    )
                }
                Some(l) => (name_of(l), top),
                None => (None, false),
            };
            if let (Some(name), Some(ty)) = (name, ty) {
                out.push((name, ty, of_type));
            }
        }
        (Lang::Java, "local_variable_declaration" | "field_declaration") => {
            if let Some(ty) = field("type").and_then(|t| type_named(t, src)) {
                let mut cursor = node.walk();
                for d in node.children_by_field_name("declarator", &mut cursor) {
                    if let Some(name) = d.child_by_field_name("name").and_then(name_of) {
                        out.push((name, ty.clone(), kind == "field_declaration"));
                    }
                }
            }
        }
        (Lang::Go, "short_var_declaration") => {
            if let (Some(left), Some(right)) = (field("left"), field("right")) {
                let mut lc = left.walk();
                let mut rc = right.walk();
                for (l, r) in left
                    .named_children(&mut lc)
                    .zip(right.named_children(&mut rc))
                {
                    if let (Some(name), Some(ty)) = (name_of(l), constructed(r, src)) {
                        out.push((name, ty, false));
                    }
                }
            }
        }
        (Lang::Kotlin, "parameter" | "class_parameter" | "variable_declaration") => {
            let mut cursor = node.walk();
            let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
            let name = children
                .iter()
                .find(|c| c.kind() == "identifier")
                .and_then(|&c| name_of(c));
            let ty = children
                .iter()
                .find(|c| matches!(c.kind(), "user_type" | "nullable_type"))
                .and_then(|&t| type_named(t, src));
            if let (Some(name), Some(ty)) = (name, ty) {
                out.push((
                    name,
                    ty,
                    kind == "class_parameter" || (top && kind != "parameter"),
                ));
            }
        }
        (Lang::Kotlin, "property_declaration") => {
            // `val chain = RealInterceptorChain(…)`: the declared type, if
            // any, is read from the `variable_declaration` itself.
            let mut cursor = node.walk();
            let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
            let declared = children.iter().find(|c| c.kind() == "variable_declaration");
            let typed = declared.is_some_and(|d| {
                let mut c = d.walk();
                let typed = d
                    .named_children(&mut c)
                    .any(|t| matches!(t.kind(), "user_type" | "nullable_type"));
                typed
            });
            let name = declared.and_then(|d| {
                let mut c = d.walk();
                let found = d.named_children(&mut c).find(|c| c.kind() == "identifier");
                found.and_then(name_of)
            });
            let ty = children.iter().find_map(|&c| constructed(c, src));
            if let (Some(name), Some(ty), false) = (name, ty, typed) {
                out.push((name, ty, top));
            }
        }
        (
            _,
            "typed_default_parameter"
            | "required_parameter"
            | "optional_parameter"
            | "formal_parameter"
            | "parameter_declaration"
            | "parameter"
            | "field_declaration"
            | "public_field_definition"
            | "var_spec"
            | "let_declaration"
            | "variable_declarator",
        ) => {
            let ty = field("type")
                .and_then(|t| type_named(t, src))
                .or_else(|| field("value").and_then(|v| constructed(v, src)));
            let Some(ty) = ty else { return out };
            let of_type = matches!(kind, "field_declaration" | "public_field_definition")
                || (top && matches!(kind, "variable_declarator" | "var_spec" | "let_declaration"));
            let mut cursor = node.walk();
            let names: Vec<Node<'_>> = node.children_by_field_name("name", &mut cursor).collect();
            let names = if names.is_empty() {
                field("pattern").into_iter().collect()
            } else {
                names
            };
            for n in names {
                if let Some(name) = name_of(n) {
                    out.push((name, ty.clone(), of_type));
                }
            }
        }
        _ => {}
    }
    out
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
    let mut facts = FileFacts {
        lang,
        lines: text.lines().count() as u32,
        symbols: Vec::new(),
        calls: Vec::new(),
        groups: Vec::new(),
    };
    let place = Place {
        offset: 0,
        in_test: false,
        depth: 0,
        metavars: &[],
    };
    let mut bindings = Vec::new();
    walk(
        &mut facts,
        &mut bindings,
        &mut parser,
        tree.root_node(),
        text,
        place,
    );
    type_receivers(&mut facts, &bindings);
    facts.calls.sort_by(|a, b| {
        (a.from, &a.name, a.member, a.on_self, &a.recv, &a.recv_type).cmp(&(
            b.from,
            &b.name,
            b.member,
            b.on_self,
            &b.recv,
            &b.recv_type,
        ))
    });
    facts.calls.dedup();
    Some(facts)
}

/// Where a walked tree sits in its file: the file's own tree, or a Rust
/// macro's body parsed apart.
#[derive(Clone, Copy)]
struct Place<'m> {
    /// The file's line of the tree's first line.
    offset: u32,
    /// Whether the tree is test code (a macro defined in a test module).
    in_test: bool,
    /// How many macro bodies deep the tree is.
    depth: u32,
    /// The metavariables of the macro whose body the tree is: a name one
    /// of them gives (`fn $name()`, `impl Trait for $ty`) is a placeholder,
    /// not a symbol anyone calls by it.
    metavars: &'m [String],
}

/// The deepest macro body read inside macro bodies.
const MAX_MACRO_DEPTH: u32 = 2;

/// What the walker knows of a node's surroundings.
struct Frame<'t> {
    node: Node<'t>,
    /// The enclosing type, by index.
    in_type: Option<u32>,
    /// The enclosing function, by index: whom its calls are made by.
    in_fn: Option<u32>,
    /// The enclosing Rust `impl`: its type and its trait.
    in_impl: Option<(String, Option<String>)>,
    /// Inside test code.
    in_test: bool,
}

/// Reads the symbols, calls and groups of one syntax tree into `facts`.
fn walk(
    facts: &mut FileFacts,
    bindings: &mut Vec<Binding>,
    parser: &mut Parser,
    root: Node<'_>,
    text: &str,
    place: Place<'_>,
) {
    let lang = facts.lang;
    let src = text.as_bytes();
    let rules = rules(lang);
    let line = |n: Node<'_>| n.start_position().row as u32 + place.offset;
    let end_line = |n: Node<'_>| n.end_position().row as u32 + place.offset;
    let js = matches!(lang, Lang::TypeScript | Lang::Tsx | Lang::JavaScript);
    let placeholder = |name: &str| place.metavars.iter().any(|m| m == name);
    let mut stack = vec![Frame {
        node: root,
        in_type: None,
        in_fn: None,
        in_impl: None,
        in_test: place.in_test,
    }];
    while let Some(frame) = stack.pop() {
        let Frame {
            node,
            mut in_type,
            mut in_fn,
            mut in_impl,
            mut in_test,
        } = frame;
        let kind = node.kind();
        let span = (line(node), end_line(node));
        // A `#[cfg(test)]` module (or a `#[test]` function) makes all it
        // holds test code.
        if lang == Lang::Rust
            && !in_test
            && (kind == "source_file" || (kind.ends_with("_item") && !kind.contains("attribute")))
            && rust_is_test(node, src)
        {
            in_test = true;
        }

        for (name, ty, of_type) in bindings_of(lang, node, src, in_fn.is_none()) {
            let scope = match (of_type, in_fn) {
                (false, Some(f)) => Scope::Fn(f),
                _ => match type_name_of(facts, in_fn.or(in_type)) {
                    Some(t) => Scope::Type(t),
                    None => continue,
                },
            };
            bindings.push(Binding { scope, name, ty });
        }

        if lang == Lang::Rust && kind == "macro_definition" {
            if place.depth < MAX_MACRO_DEPTH {
                macro_bodies(facts, bindings, parser, node, text, place, in_test);
            }
        } else if lang == Lang::Rust && kind == "impl_item" {
            let owner = node
                .child_by_field_name("type")
                .and_then(|t| last_name(t, src));
            let trait_name = node
                .child_by_field_name("trait")
                .and_then(|t| last_name(t, src));
            // A macro's `impl … for $name` (or for a tuple of its
            // metavariables, `($($ty,)* R)`): nothing in it is findable by
            // the name it would be recorded under.
            let tuple = node
                .child_by_field_name("type")
                .is_some_and(|t| t.kind() == "tuple_type");
            if owner.as_deref().is_some_and(placeholder) || (place.depth > 0 && tuple) {
                continue;
            }
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
                        test: in_test,
                    });
                }
                in_impl = Some((owner, trait_name));
            }
        } else if let Some((_, declared)) = rules.types.iter().find(|(k, _)| *k == kind) {
            let name_node = node.child_by_field_name("name");
            let name = name_node.and_then(|n| last_name(n, src));
            if name.as_deref().is_some_and(placeholder) {
                continue;
            }
            if let Some(name) = name {
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
                    test: in_test,
                });
                in_type = Some(facts.symbols.len() as u32 - 1);
                in_fn = None;
            }
        } else if rules.functions.contains(&kind) {
            let name_node = node.child_by_field_name("name");
            let name = name_node.and_then(|n| last_name(n, src));
            if name.as_deref().is_some_and(placeholder) {
                continue;
            }
            if let Some(name) = name {
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
                let enclosing = in_type.and_then(|t| facts.symbols.get(t as usize));
                in_test =
                    in_test || function_is_test(lang, node, src, &name, enclosing, in_fn.is_some());
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
                    test: in_test,
                });
                in_fn = Some(facts.symbols.len() as u32 - 1);
            }
        } else if js
            && kind == "variable_declarator"
            && node
                .child_by_field_name("value")
                .and_then(assigned_value)
                .is_some_and(|v| is_function_value(v.kind()))
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
                    end: end_line(decl),
                    sig: line(node),
                    parent: in_type,
                    owner: None,
                    supers: Vec::new(),
                    doc: doc_of(decl, src, lang),
                    decorators: Vec::new(),
                    test: in_test,
                });
                in_fn = Some(facts.symbols.len() as u32 - 1);
            }
        } else if js && kind == "assignment_expression" {
            // `proto.handle = function handle(…) {…}`,
            // `Route.prototype.dispatch = …`, `exports.x = …`,
            // `this.use = (…) => {…}`: how JS without classes (and
            // constructors) declare methods.
            let target = node
                .child_by_field_name("right")
                .filter(|r| is_function_value(r.kind()))
                .and_then(|_| node.child_by_field_name("left"))
                .and_then(|l| assigned_property(l, src));
            if let Some((name, name_node, assigned)) = target {
                let (parent, owner) = match assigned {
                    Assigned::This => match (in_type, in_fn) {
                        (Some(t), _) => (Some(t), None),
                        // An ES5 constructor function's own methods.
                        (None, Some(f)) => {
                            let f = &facts.symbols[f as usize];
                            (
                                None,
                                Some(f.owner.clone().unwrap_or_else(|| f.name.clone())),
                            )
                        }
                        (None, None) => (None, None),
                    },
                    Assigned::Owner(owner) => (None, Some(owner)),
                    Assigned::Module => (None, None),
                };
                let stmt = node
                    .parent()
                    .filter(|p| p.kind() == "expression_statement")
                    .unwrap_or(node);
                facts.symbols.push(Symbol {
                    name,
                    kind: if parent.is_some() || owner.is_some() {
                        Kind::Method
                    } else {
                        Kind::Function
                    },
                    start: line(stmt),
                    end: end_line(stmt),
                    sig: line(name_node),
                    parent,
                    owner,
                    supers: Vec::new(),
                    doc: doc_of(stmt, src, lang),
                    decorators: Vec::new(),
                    test: in_test,
                });
                in_fn = Some(facts.symbols.len() as u32 - 1);
            }
        } else if js
            && matches!(kind, "field_definition" | "public_field_definition")
            && in_type.is_some()
            && node
                .child_by_field_name("value")
                .is_some_and(|v| is_function_value(v.kind()))
        {
            // A class field holding a function (`fetch = (request) =>
            // {…}`): a method bound to its instance.
            let name_node = node
                .child_by_field_name("name")
                .or_else(|| node.child_by_field_name("property"))
                .filter(|n| is_name(n.kind()));
            if let Some((name_node, name)) = name_node.and_then(|n| Some((n, last_name(n, src)?))) {
                facts.symbols.push(Symbol {
                    name,
                    kind: Kind::Method,
                    start: span.0,
                    end: span.1,
                    sig: line(name_node),
                    parent: in_type,
                    owner: None,
                    supers: Vec::new(),
                    doc: doc_of(node, src, lang),
                    decorators: decorators_of(node, src),
                    test: in_test,
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
                // An element called (`c.handlers[c.index](c)`,
                // `handlers[i](x)`) names no callee: its index would be
                // read as one.
                let callee =
                    callee.filter(|c| !matches!(c.kind(), "index_expression" | "subscript"));
                if let Some(callee) = callee {
                    if let Some(name) = last_name(callee, src) {
                        let object = call_object(node, callee);
                        let member = object.is_some() || !is_name(callee.kind());
                        let on_self = object.is_some_and(|o| {
                            matches!(
                                o.utf8_text(src).unwrap_or_default(),
                                "self" | "this" | "cls" | "super" | "super()"
                            )
                        });
                        let recv = object
                            .filter(|_| !on_self)
                            .and_then(|o| receiver_name(o, src));
                        facts.calls.push(Call {
                            from,
                            name,
                            member,
                            on_self,
                            recv,
                            recv_type: None,
                        });
                    }
                }
            }
        }

        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
        for child in children.into_iter().rev() {
            stack.push(Frame {
                node: child,
                in_type,
                in_fn,
                in_impl: in_impl.clone(),
                in_test,
            });
        }
    }
}

/// The value a JS declaration finally holds through chained assignments
/// (`var proto = module.exports = function (options) {…}` → the
/// function).
fn assigned_value(value: Node<'_>) -> Option<Node<'_>> {
    let mut value = value;
    for _ in 0..8 {
        if value.kind() != "assignment_expression" {
            return Some(value);
        }
        value = value.child_by_field_name("right")?;
    }
    None
}

/// Reads a `macro_rules!` definition's rule bodies as Rust: each body with
/// its metavariables made plain names (`$name` → `name`) and its
/// repetitions written once (`$($ty,)*` → `ty,`) parses as the items it
/// expands to, so an `impl` written inside a macro (axum's
/// `impl_service!`) has its methods and calls indexed, on the lines they
/// are written on.
fn macro_bodies(
    facts: &mut FileFacts,
    bindings: &mut Vec<Binding>,
    parser: &mut Parser,
    node: Node<'_>,
    text: &str,
    place: Place<'_>,
    in_test: bool,
) {
    let mut cursor = node.walk();
    let bodies: Vec<Node<'_>> = node
        .named_children(&mut cursor)
        .filter(|r| r.kind() == "macro_rule")
        .filter_map(|r| r.child_by_field_name("right"))
        .collect();
    for body in bodies {
        let Some(raw) = text.get(body.byte_range()) else {
            continue;
        };
        // The body's own delimiters become spaces: what is left keeps the
        // body's lines.
        let mut chars = raw.chars();
        let (Some(_), Some(_)) = (chars.next(), chars.next_back()) else {
            continue;
        };
        let (plain, metavars) = unmacro(chars.as_str());
        let plain = format!(" {plain} ");
        let Some(tree) = parser.parse(&plain, None) else {
            continue;
        };
        let inner = Place {
            offset: place.offset + body.start_position().row as u32,
            in_test,
            depth: place.depth + 1,
            metavars: &metavars,
        };
        walk(facts, bindings, parser, tree.root_node(), &plain, inner);
    }
}

/// A macro body's text as plain Rust: `$name:frag` and `$name` → `name`,
/// `$( … )sep*` (or `+`, `?`) → its contents once. Newlines are kept.
/// Also gives the metavariables' names (`$crate` is none: `crate` is a
/// path like any other).
fn unmacro(body: &str) -> (String, Vec<String>) {
    let chars: Vec<char> = body.chars().collect();
    let mut out = String::with_capacity(body.len());
    let mut metavars: Vec<String> = Vec::new();
    // Parenthesis depth, and the depths at which open repetitions close.
    let mut depth = 0usize;
    let mut repetitions: Vec<usize> = Vec::new();
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            '$' if next == Some('(') => {
                repetitions.push(depth);
                depth += 1;
                i += 2;
                continue;
            }
            '$' if next.is_some_and(is_ident) => {
                i += 1;
                let mut name = String::new();
                while i < chars.len() && is_ident(chars[i]) {
                    name.push(chars[i]);
                    i += 1;
                }
                out.push_str(&name);
                if name != "crate" && !metavars.contains(&name) {
                    metavars.push(name);
                }
                // A fragment specifier (`$name:ident`), not a path (`::`).
                if chars.get(i) == Some(&':')
                    && chars.get(i + 1).is_some_and(|&c| c.is_alphabetic())
                {
                    i += 1;
                    while i < chars.len() && is_ident(chars[i]) {
                        i += 1;
                    }
                }
                continue;
            }
            '(' => depth += 1,
            ')' => {
                depth = depth.saturating_sub(1);
                if repetitions.last() == Some(&depth) {
                    repetitions.pop();
                    i += 1;
                    // The repetition operator, after a separator or not.
                    let op = |c: Option<&char>| matches!(c, Some('*' | '+' | '?'));
                    if op(chars.get(i)) {
                        i += 1;
                    } else if op(chars.get(i + 1))
                        && chars.get(i).is_some_and(|c| !c.is_whitespace())
                    {
                        i += 2;
                    }
                    continue;
                }
            }
            _ => {}
        }
        out.push(c);
        i += 1;
    }
    (out, metavars)
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

    /// The symbol named `name` whose owner (or enclosing type) is `owner`.
    fn symbol<'f>(facts: &'f FileFacts, name: &str, owner: Option<&str>) -> &'f Symbol {
        facts
            .symbols
            .iter()
            .find(|s| {
                let of = s
                    .owner
                    .as_deref()
                    .or_else(|| s.parent.map(|p| facts.symbols[p as usize].name.as_str()));
                s.name == name && of == owner
            })
            .unwrap_or_else(|| panic!("{name} of {owner:?} in {:#?}", facts.symbols))
    }

    /// The calls a symbol makes: name, on a receiver, on its own object.
    fn calls_of(facts: &FileFacts, of: &Symbol) -> Vec<(String, bool, bool)> {
        let i = facts.symbols.iter().position(|s| s == of).unwrap() as u32;
        facts
            .calls
            .iter()
            .filter(|c| c.from == i)
            .map(|c| (c.name.clone(), c.member, c.on_self))
            .collect()
    }

    #[test]
    fn js_functions_assigned_to_properties_are_symbols() {
        // express 4.x: lib/router/index.js, lib/router/route.js,
        // lib/application.js, lib/utils.js.
        let src = r#"
var proto = module.exports = function(options) {
  var opts = options || {};
  return router;
};

/**
 * Dispatch a req, res into the router.
 * @private
 */
proto.handle = function handle(req, res, out) {
  var self = this;
  next();
  function next(err) {
    self.process_params(layer, paramcalled, req, res, function (err) {
      layer.handle_request(req, res, next);
    });
  }
};

Route.prototype.dispatch = function dispatch(req, res, done) {
  this._handles_method(req.method);
};

exports.compileETag = function(val) {
  return createETagGenerator({ weak: false });
};

module.exports.etag = (body) => createETag(body);

app.handle = function handle(req, res, callback) {
  var router = this._router;
  router.handle(req, res, done);
};

this[method] = function () { ignored(); };
"#;
        let facts = extract(Lang::JavaScript, src).unwrap();
        let proto = symbol(&facts, "proto", None);
        assert_eq!((proto.kind, proto.start, proto.end), (Kind::Function, 1, 4));

        let handle = symbol(&facts, "handle", Some("proto"));
        assert_eq!(handle.kind, Kind::Method);
        assert_eq!((handle.start, handle.sig, handle.end), (10, 10, 18));
        assert_eq!(handle.doc, "Dispatch a req, res into the router. @private");
        assert_eq!(
            calls_of(&facts, handle),
            vec![("next".into(), false, false)]
        );
        // A function declared inside keeps its own calls.
        let next = symbol(&facts, "next", None);
        assert!(calls_of(&facts, next).contains(&("handle_request".into(), true, false)));

        let dispatch = symbol(&facts, "dispatch", Some("Route"));
        assert_eq!(dispatch.kind, Kind::Method);
        assert_eq!(
            calls_of(&facts, dispatch),
            vec![("_handles_method".into(), true, true)]
        );

        let etag_gen = symbol(&facts, "compileETag", None);
        assert_eq!(etag_gen.kind, Kind::Function);
        assert_eq!(
            calls_of(&facts, etag_gen),
            vec![("createETagGenerator".into(), false, false)]
        );
        let etag = symbol(&facts, "etag", None);
        assert_eq!(etag.kind, Kind::Function);
        assert_eq!(
            calls_of(&facts, etag),
            vec![("createETag".into(), false, false)]
        );

        let app_handle = symbol(&facts, "handle", Some("app"));
        assert_eq!(
            calls_of(&facts, app_handle),
            vec![("handle".into(), true, false)]
        );
        // `module.exports` itself and computed properties name nothing.
        assert!(!facts
            .symbols
            .iter()
            .any(|s| s.name == "exports" || s.name == "method"));
    }

    #[test]
    fn class_fields_and_constructor_assignments_are_methods() {
        // hono: src/hono-base.ts.
        let src = r#"
class Hono<E extends Env = Env> {
  private errorHandler: ErrorHandler = errorHandler
  match: typeof match = match
  constructor(options: HonoOptions<E> = {}) {
    this.use = (arg1: string | MiddlewareHandler<any>, ...handlers: MiddlewareHandler<any>[]) => {
      this.#addRoute(METHOD_NAME_ALL, this.#path, arg1)
      return this as any
    }
  }
  #addRoute(method: string, path: string, handler: H) {
    this.router.add(method, path, [handler, r])
  }
  /** `.fetch()` will be entry point of your app. */
  fetch: (request: Request, ...rest: any[]) => Response | Promise<Response> = (request, ...rest) => {
    return this.#dispatch(request, rest[1], rest[0], request.method)
  }
  #dispatch(request: Request, env: E['Bindings'], method: string): Response {
    return compose(this.middleware, this.errorHandler)(c)
  }
}
"#;
        let facts = extract(Lang::TypeScript, src).unwrap();
        let hono = Some("Hono");
        let use_ = symbol(&facts, "use", hono);
        assert_eq!((use_.kind, use_.start, use_.end), (Kind::Method, 5, 8));
        assert_eq!(
            calls_of(&facts, use_),
            vec![("addRoute".into(), true, true)]
        );
        let constructor = symbol(&facts, "constructor", hono);
        assert!(calls_of(&facts, constructor).is_empty());

        // A private method is named as its callers call it.
        // `this.router.add()` is a call on the router, not on `this`.
        let add_route = symbol(&facts, "addRoute", hono);
        assert_eq!(
            calls_of(&facts, add_route),
            vec![("add".into(), true, false)]
        );
        let fetch = symbol(&facts, "fetch", hono);
        assert_eq!((fetch.kind, fetch.start, fetch.end), (Kind::Method, 14, 16));
        assert_eq!(fetch.doc, "`.fetch()` will be entry point of your app.");
        assert_eq!(
            calls_of(&facts, fetch),
            vec![("dispatch".into(), true, true)]
        );
        symbol(&facts, "dispatch", hono);
        // Fields holding values, not functions, are not methods.
        assert!(!facts
            .symbols
            .iter()
            .any(|s| s.name == "errorHandler" || s.name == "match"));

        let js = extract(
            Lang::JavaScript,
            "class Router {\n  handle = (req) => { this.route(req) }\n}\n",
        )
        .unwrap();
        let handle = symbol(&js, "handle", Some("Router"));
        assert_eq!(calls_of(&js, handle), vec![("route".into(), true, true)]);
    }

    #[test]
    fn rust_test_code_is_marked() {
        let src = r#"
pub fn serve() {}

/// Documented.
#[inline]
fn documented() {}

#[cfg(not(test))]
fn real() {}

#[cfg(test)]
mod tests {
    use super::*;

    fn helper() -> Router { Router::new() }

    #[tokio::test(flavor = "multi_thread")]
    async fn routes() { helper(); }

    mod nested {
        struct Fixture;
        impl Fixture { fn deep(&self) {} }
    }
}

#[test]
fn top_level() {}

#[crate::test]
#[ignore]
fn via_crate() {
    fn inner() {}
}

#[cfg(all(test, feature = "tokio"))]
fn gated() {}
"#;
        let facts = extract(Lang::Rust, src).unwrap();
        let test_of = |name: &str| {
            facts
                .symbols
                .iter()
                .find(|s| s.name == name)
                .unwrap_or_else(|| panic!("{name}"))
                .test
        };
        for name in ["serve", "documented", "real"] {
            assert!(!test_of(name), "{name}");
        }
        for name in [
            "helper",
            "routes",
            "Fixture",
            "deep",
            "top_level",
            "via_crate",
            "inner",
            "gated",
        ] {
            assert!(test_of(name), "{name}");
        }
        // Attributes between a doc comment and its item keep the doc.
        assert_eq!(symbol(&facts, "documented", None).doc, "Documented.");
        // Only test code says so when serialized.
        let serve = serde_json::to_string(symbol(&facts, "serve", None)).unwrap();
        assert!(!serve.contains("test"), "{serve}");
        let routes = serde_json::to_string(symbol(&facts, "routes", None)).unwrap();
        assert!(routes.contains(r#""test":true"#), "{routes}");
    }

    /// An expectation of [`marked`], owned.
    fn owned(expected: &[(&str, bool)]) -> Vec<(String, bool)> {
        expected.iter().map(|&(n, t)| (n.to_owned(), t)).collect()
    }

    /// Each symbol of `text` with whether it is marked as test code.
    fn marked(lang: Lang, text: &str) -> Vec<(String, bool)> {
        extract(lang, text)
            .unwrap()
            .symbols
            .into_iter()
            .map(|s| (s.name, s.test))
            .collect()
    }

    #[test]
    fn go_python_and_java_tests_are_marked() {
        let go = marked(
            Lang::Go,
            "package gin\nfunc TestServe(t *testing.T) { run() }\nfunc BenchmarkServe(b *testing.B) {}\nfunc Testify() {}\nfunc Testing(t *testing.T) {}\nfunc (s *S) TestThing(t *testing.T) {}\n",
        )
        ;
        assert_eq!(
            go,
            owned(&[
                ("TestServe", true),
                ("BenchmarkServe", true),
                ("Testify", false),
                ("Testing", false),
                ("TestThing", false),
            ])
        );

        let py = marked(
            Lang::Python,
            "def test_a():\n    def test_nested():\n        pass\n\nclass TestClient:\n    def test_b(self):\n        pass\n    def request(self):\n        pass\n\nclass Client:\n    def test_c(self):\n        pass\n\nclass SessionTests(unittest.TestCase):\n    def test_d(self):\n        pass\n\ndef helper():\n    def test_e():\n        pass\n",
        )
        ;
        assert_eq!(
            py,
            owned(&[
                ("test_a", true),
                // Inside a test: test code too.
                ("test_nested", true),
                ("TestClient", false),
                ("test_b", true),
                ("request", false),
                ("Client", false),
                ("test_c", false),
                ("SessionTests", false),
                ("test_d", true),
                ("helper", false),
                ("test_e", false),
            ])
        );

        let java = marked(
            Lang::Java,
            "class RouterTest {\n  @Test void routes() {}\n  @org.junit.Test\n  public void legacy() {}\n  @ParameterizedTest(name = \"x\") void each(int x) {}\n  @Override public String toString() { return \"\"; }\n}\n",
        )
        ;
        assert_eq!(
            java,
            owned(&[
                ("RouterTest", false),
                ("routes", true),
                ("legacy", true),
                ("each", true),
                ("toString", false),
            ])
        );
    }

    #[test]
    fn rust_macro_rules_bodies_are_read() {
        // axum: axum/src/middleware/from_fn.rs.
        let src = r#"
macro_rules! impl_service {
    (
        [$($ty:ident),*], $last:ident
    ) => {
        #[allow(non_snake_case, unused_mut)]
        impl<F, Fut, Out, S, I, $($ty,)* $last> Service<Request> for FromFn<F, S, I, ($($ty,)* $last,)>
        where
            F: FnMut($($ty,)* $last, Next) -> Fut + Clone + Send + 'static,
        {
            type Response = Response;

            fn call(&mut self, req: Request) -> Self::Future {
                let mut f = self.f.clone();
                $(
                    let $ty = match $ty::from_request_parts(&mut parts, &state).await {
                        Ok(value) => value,
                        Err(rejection) => return rejection.into_response(),
                    };
                )*
                $crate::util::boxed(f($($ty,)* $last, next))
            }
        }
    };
}

all_the_tuples!(impl_service);

macro_rules! define_rejection {
    (#[status = $status:ident] pub struct $name:ident;) => {
        pub struct $name;
        impl $crate::response::IntoResponse for $name {
            fn into_response(self) -> $crate::response::Response { self.status() }
        }
    };
}
"#;
        let facts = extract(Lang::Rust, src).unwrap();
        let from_fn = symbol(&facts, "FromFn", Some("FromFn"));
        assert_eq!(from_fn.supers, vec!["Service".to_string()]);
        let call = symbol(&facts, "call", Some("FromFn"));
        assert_eq!(call.kind, Kind::Method);
        let line = |at: u32| src.lines().nth(at as usize).unwrap().trim();
        assert!(
            line(call.start).starts_with("fn call(&mut self"),
            "{}",
            line(call.start)
        );
        assert_eq!(line(call.end), "}");
        assert_eq!(call.end - call.start, 9);
        let names: Vec<String> = calls_of(&facts, call).into_iter().map(|c| c.0).collect();
        for name in ["clone", "from_request_parts", "into_response", "boxed", "f"] {
            assert!(names.contains(&name.to_string()), "{name}: {names:?}");
        }
        // Names a metavariable gives are placeholders, not symbols.
        assert!(
            !facts
                .symbols
                .iter()
                .any(|s| s.name == "name" || s.name == "into_response"),
            "{:#?}",
            facts.symbols
        );
    }

    /// Each call on a receiver, as (callee, receiver name, receiver type).
    fn receivers(facts: &FileFacts, of: &Symbol) -> Vec<(String, Option<String>, Option<String>)> {
        let i = facts.symbols.iter().position(|s| s == of).unwrap() as u32;
        facts
            .calls
            .iter()
            .filter(|c| c.from == i && c.member && !c.on_self && c.recv.is_some())
            .map(|c| (c.name.clone(), c.recv.clone(), c.recv_type.clone()))
            .collect()
    }

    fn typed(name: &str, recv: &str, ty: Option<&str>) -> (String, Option<String>, Option<String>) {
        (name.into(), Some(recv.into()), ty.map(str::to_owned))
    }

    /// What a call's receiver is held by, and the type the code gives
    /// it: a parameter's annotation, a constructor it was assigned from, a
    /// field; nothing where the code says nothing.
    #[test]
    fn receivers_and_the_types_the_code_gives_them() {
        let python = "class Session:\n    def __init__(self):\n        self.adapter = HTTPAdapter()\n\n    def send(self, request: PreparedRequest, hooks: dict):\n        r = self.adapter.send(request)\n        hooks.get('response')\n        p = PreparedRequest()\n        p.prepare()\n        self.get_adapter(url).close()\n        headers.get('a')\n        return self.merge(r)\n";
        let facts = extract(Lang::Python, python).unwrap();
        let send = symbol(&facts, "send", Some("Session"));
        let mut got = receivers(&facts, send);
        got.sort();
        assert_eq!(
            got,
            vec![
                typed("get", "headers", None),
                typed("get", "hooks", Some("dict")),
                typed("prepare", "p", Some("PreparedRequest")),
                typed("send", "adapter", Some("HTTPAdapter")),
            ]
        );
        // `self.merge()` is on self; `….close()` on a call's result has no
        // receiver name.
        assert!(facts.calls.iter().any(|c| c.name == "merge" && c.on_self));
        assert!(facts
            .calls
            .iter()
            .any(|c| c.name == "close" && c.member && c.recv.is_none()));

        let kotlin = "class RetryInterceptor(private val client: OkHttpClient) : Interceptor {\n  override fun intercept(chain: Interceptor.Chain): Response {\n    val realChain = RealInterceptorChain(client)\n    realChain.proceed(chain.request())\n    client.dispatcher()\n    return chain.proceed(chain.request())\n  }\n}\n";
        let facts = extract(Lang::Kotlin, kotlin).unwrap();
        let intercept = symbol(&facts, "intercept", Some("RetryInterceptor"));
        let mut got = receivers(&facts, intercept);
        got.sort();
        got.dedup();
        assert_eq!(
            got,
            vec![
                typed("dispatcher", "client", Some("OkHttpClient")),
                typed("proceed", "chain", Some("Chain")),
                typed("proceed", "realChain", Some("RealInterceptorChain")),
                typed("request", "chain", Some("Chain")),
            ]
        );

        let go = "package gin\nfunc (engine *Engine) ServeHTTP(w http.ResponseWriter, req *http.Request) {\n\tc := &Context{}\n\tc.reset()\n\tengine.handleHTTPRequest(c)\n\tw.Header()\n\tp := engine.pool.Get().(*Pooled)\n\tp.release()\n\tc.handlers[c.index](c)\n}\n";
        let facts = extract(Lang::Go, go).unwrap();
        let serve = symbol(&facts, "ServeHTTP", Some("Engine"));
        let mut got = receivers(&facts, serve);
        got.sort();
        assert_eq!(
            got,
            vec![
                typed("Get", "pool", None),
                typed("Header", "w", Some("ResponseWriter")),
                typed("handleHTTPRequest", "engine", Some("Engine")),
                typed("release", "p", Some("Pooled")),
                typed("reset", "c", Some("Context")),
            ]
        );
        // The element called is no call of `index`.
        assert!(
            !facts.calls.iter().any(|c| c.name == "index"),
            "{:?}",
            facts.calls
        );

        let java = "class Chain {\n  private final Call call;\n  Response proceed(Request request) {\n    Exchange exchange = new Exchange();\n    exchange.finish();\n    call.execute();\n    return request.body();\n  }\n}\n";
        let facts = extract(Lang::Java, java).unwrap();
        let proceed = symbol(&facts, "proceed", Some("Chain"));
        let mut got = receivers(&facts, proceed);
        got.sort();
        assert_eq!(
            got,
            vec![
                typed("body", "request", Some("Request")),
                typed("execute", "call", Some("Call")),
                typed("finish", "exchange", Some("Exchange")),
            ]
        );

        let rust = "struct Router { inner: Arc<Inner> }\nimpl Router {\n    fn call(&mut self, req: Request<Body>) {\n        let route = Route::new(req);\n        route.oneshot();\n        self.inner.dispatch();\n        req.uri();\n    }\n}\n";
        let facts = extract(Lang::Rust, rust).unwrap();
        let call = symbol(&facts, "call", Some("Router"));
        let mut got = receivers(&facts, call);
        got.sort();
        assert_eq!(
            got,
            vec![
                typed("dispatch", "inner", Some("Arc")),
                typed("new", "Route", None),
                typed("oneshot", "route", Some("Route")),
                typed("uri", "req", Some("Request")),
            ]
        );

        let ts = "class App {\n  router: Router\n  handle(req: Request, res) {\n    const layer = new Layer(req)\n    layer.match(req)\n    this.router.route(req)\n    res.send()\n  }\n}\n";
        let facts = extract(Lang::TypeScript, ts).unwrap();
        let handle = symbol(&facts, "handle", Some("App"));
        let mut got = receivers(&facts, handle);
        got.sort();
        assert_eq!(
            got,
            vec![
                typed("match", "layer", Some("Layer")),
                typed("route", "router", Some("Router")),
                typed("send", "res", None),
            ]
        );
    }
}
