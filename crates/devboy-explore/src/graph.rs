//! The code graph over an [`Index`]: symbols across files, calls resolved
//! to the symbols they most likely reach, and type families (a supertype
//! and the types that implement or extend it).
//!
//! Calls are resolved by name, best effort: a definition in the caller's
//! own file wins; otherwise every definition of the name when there are
//! at most [`MAX_TARGETS`]; otherwise, when one of them is declared in a
//! contract (an interface, or a type others extend), that one alone, with
//! the implementation of the type the caller constructs; otherwise
//! none — a call that could reach anything says nothing about the flow.

use std::collections::HashMap;

use crate::extract::{Kind, Symbol};
use crate::index::Index;

/// A symbol of the graph: file and symbol index in the [`Index`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SymbolId {
    pub file: u32,
    pub symbol: u32,
}

/// The most definitions a call is taken to reach.
pub const MAX_TARGETS: usize = 3;

/// The graph.
pub struct Graph<'i> {
    pub index: &'i Index,
    /// Every declared symbol (`impl Trait for Type` records excluded).
    pub symbols: Vec<SymbolId>,
    /// Symbols by name.
    pub by_name: HashMap<&'i str, Vec<SymbolId>>,
    /// Resolved calls, caller to callees.
    pub calls: HashMap<SymbolId, Vec<SymbolId>>,
    /// Resolved calls, callee to callers.
    pub callers: HashMap<SymbolId, Vec<SymbolId>>,
    /// Supertype name to the names of the types that implement or extend it.
    pub implementers: HashMap<&'i str, Vec<&'i str>>,
    /// Type name to the supertypes it names (across files and `impl`s).
    pub supers: HashMap<&'i str, Vec<&'i str>>,
    /// Type name to its methods.
    methods: HashMap<&'i str, Vec<SymbolId>>,
}

impl<'i> Graph<'i> {
    pub fn symbol(&self, id: SymbolId) -> &'i Symbol {
        &self.index.files[id.file as usize].facts.symbols[id.symbol as usize]
    }

    pub fn path(&self, id: SymbolId) -> &'i str {
        &self.index.files[id.file as usize].path
    }

    /// The type a method belongs to: its enclosing type, or the owner its
    /// `impl` or receiver names.
    pub fn owner_name(&self, id: SymbolId) -> Option<&'i str> {
        let s = self.symbol(id);
        if let Some(owner) = &s.owner {
            return Some(owner);
        }
        let parent = s.parent?;
        Some(&self.index.files[id.file as usize].facts.symbols[parent as usize].name)
    }

    /// The type a symbol is or belongs to.
    pub fn type_of(&self, id: SymbolId) -> Option<&'i str> {
        let s = self.symbol(id);
        if s.kind.is_type() {
            Some(&s.name)
        } else {
            self.owner_name(id)
        }
    }

    /// `Owner.name` for a method, `name` otherwise.
    pub fn qualified(&self, id: SymbolId) -> String {
        let s = self.symbol(id);
        match (s.kind, self.owner_name(id)) {
            (Kind::Method, Some(owner)) => format!("{owner}.{}", s.name),
            _ => s.name.clone(),
        }
    }

    /// The methods of the types named `name`.
    pub fn methods_of(&self, name: &str) -> Vec<SymbolId> {
        self.methods.get(name).cloned().unwrap_or_default()
    }

    /// Whether `name` is a contract others implement: an interface, or a
    /// type at least two others extend.
    pub fn is_contract(&self, name: &str) -> bool {
        self.is_interface(name) || self.implementers.get(name).is_some_and(|i| i.len() >= 2)
    }

    /// Whether `name` is a type declared as an interface somewhere.
    pub fn is_interface(&self, name: &str) -> bool {
        self.by_name.get(name).is_some_and(|ids| {
            ids.iter()
                .any(|&id| self.symbol(id).kind == Kind::Interface)
        })
    }

    /// The supertypes of type `name` that have at least `min` implementers.
    pub fn families_of(&self, name: &str, min: usize) -> Vec<&'i str> {
        self.supers
            .get(name)
            .map(|supers| {
                supers
                    .iter()
                    .copied()
                    .filter(|s| self.implementers.get(s).is_some_and(|i| i.len() >= min))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn new(index: &'i Index) -> Self {
        let mut g = Graph {
            index,
            symbols: Vec::new(),
            by_name: HashMap::new(),
            calls: HashMap::new(),
            callers: HashMap::new(),
            implementers: HashMap::new(),
            supers: HashMap::new(),
            methods: HashMap::new(),
        };
        for (f, file) in index.files.iter().enumerate() {
            for (s, sym) in file.facts.symbols.iter().enumerate() {
                let id = SymbolId {
                    file: f as u32,
                    symbol: s as u32,
                };
                if sym.kind.is_type() {
                    for sup in &sym.supers {
                        let list = g.supers.entry(sym.name.as_str()).or_default();
                        if !list.contains(&sup.as_str()) {
                            list.push(sup);
                        }
                        let list = g.implementers.entry(sup.as_str()).or_default();
                        if !list.contains(&sym.name.as_str()) {
                            list.push(&sym.name);
                        }
                    }
                }
                // An `impl Trait for Type` record only carries the edge.
                if sym.kind == Kind::Type && sym.owner.is_some() {
                    continue;
                }
                g.symbols.push(id);
                g.by_name.entry(sym.name.as_str()).or_default().push(id);
            }
        }
        for &id in &g.symbols {
            if g.symbol(id).kind == Kind::Method {
                if let Some(owner) = g.owner_name(id) {
                    g.methods.entry(owner).or_default().push(id);
                }
            }
        }
        for (f, file) in index.files.iter().enumerate() {
            for call in &file.facts.calls {
                let from = SymbolId {
                    file: f as u32,
                    symbol: call.from,
                };
                let targets = g.resolve(from, &call.name, call.member);
                for to in targets {
                    if to == from {
                        continue;
                    }
                    g.calls.entry(from).or_default().push(to);
                    g.callers.entry(to).or_default().push(from);
                }
            }
        }
        for list in g.calls.values_mut().chain(g.callers.values_mut()) {
            list.sort();
            list.dedup();
        }
        g
    }

    fn resolve(&self, from: SymbolId, name: &str, member: bool) -> Vec<SymbolId> {
        let Some(all) = self.by_name.get(name) else {
            return Vec::new();
        };
        // A bare name reaches a free function, a type (a constructor) or a
        // method of the caller's own type; only a call on a receiver
        // reaches other types' methods.
        let own = self.owner_name(from);
        let filtered: Vec<SymbolId>;
        let all = if member {
            all
        } else {
            filtered = all
                .iter()
                .copied()
                .filter(|&t| {
                    self.symbol(t).kind != Kind::Method
                        || (own.is_some() && self.owner_name(t) == own)
                })
                .collect();
            &filtered
        };
        if all.is_empty() {
            return Vec::new();
        }
        let local: Vec<SymbolId> = all
            .iter()
            .copied()
            .filter(|t| t.file == from.file)
            .collect();
        if !local.is_empty() {
            return local;
        }
        if all.len() <= MAX_TARGETS {
            return all.clone();
        }
        // The contract: the method of a type the others' types implement
        // or extend (an interface, a trait, an abstract base class).
        let contract: Vec<SymbolId> = all
            .iter()
            .copied()
            .filter(|&t| {
                self.symbol(t).kind == Kind::Method
                    && self.owner_name(t).is_some_and(|o| self.is_contract(o))
            })
            .collect();
        let [contract] = contract[..] else {
            return Vec::new();
        };
        // The contract, and the implementation of the type the caller
        // itself constructs (`val chain = RealChain(…); chain.proceed()`).
        let mut out = vec![contract];
        let Some(interface) = self.owner_name(contract) else {
            return out;
        };
        let constructed = self.constructed_by(from);
        for &t in all.iter() {
            let Some(owner) = self.owner_name(t) else {
                continue;
            };
            if t != contract
                && constructed.contains(&owner)
                && self
                    .supers
                    .get(owner)
                    .is_some_and(|s| s.contains(&interface))
            {
                out.push(t);
            }
        }
        out
    }

    /// The types `from` calls by name (constructs).
    fn constructed_by(&self, from: SymbolId) -> Vec<&'i str> {
        let facts = &self.index.files[from.file as usize].facts;
        facts
            .calls
            .iter()
            .filter(|c| c.from == from.symbol)
            .filter(|c| {
                self.by_name
                    .get(c.name.as_str())
                    .is_some_and(|ids| ids.iter().any(|&id| self.symbol(id).kind.is_type()))
            })
            .map(|c| c.name.as_str())
            .collect()
    }
}
