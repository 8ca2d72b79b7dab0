//! The code graph over an [`Index`]: symbols across files, calls resolved
//! to the symbols they most likely reach, and type families (a supertype
//! and the types that implement or extend it).
//!
//! A bare call (`f()`, `self.f()`) is resolved by name: a definition in
//! the caller's own file wins; otherwise every definition of the name when
//! there are at most [`MAX_TARGETS`]; otherwise, when one of them is
//! declared in a contract (an interface, or a type others extend), that
//! one alone, with the implementation of the type the caller constructs;
//! otherwise none. A call on another object reaches a method only where
//! the code says which ([`Graph::calls`]; see `resolve_on_other`); what
//! only the name ties is kept apart ([`Graph::guessed`]) to rank files by,
//! and is never a flow line.

// Fx: the graph hashes millions of short names per question; no untrusted
// keys reach it from outside the local tree.
type HashMap<K, V> = rustc_hash::FxHashMap<K, V>;

use devboy_core::identifier::{words, Split};

use crate::extract::{Call, Kind, Symbol};
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
    /// Calls on another object that only the method's name ties to these
    /// definitions (`headers.get()` to `Session.get`): likely enough to
    /// rank files by, never a flow line ([`Graph::claims`]).
    pub guessed: HashMap<SymbolId, Vec<SymbolId>>,
    /// Supertype name to the names of the types that implement or extend it.
    pub implementers: HashMap<&'i str, Vec<&'i str>>,
    /// Type name to the supertypes it names (across files and `impl`s).
    pub supers: HashMap<&'i str, Vec<&'i str>>,
    /// Type name to its methods.
    methods: HashMap<&'i str, Vec<SymbolId>>,
    /// Families with no supertype: each member's family key (`@register`
    /// for classes one decorator registers, `@hookimpl pytest_runtest_setup`
    /// for one decorated function name in several files, `registry
    /// path#n` for the names one collection literal gathers).
    pub member_of: HashMap<SymbolId, String>,
    /// Those families' members.
    pub members: HashMap<String, Vec<SymbolId>>,
    /// Each distinct symbol name's words, stemmed as questions are
    /// ([`crate::answer::stem`]): split once per graph, not per question.
    pub name_stems: HashMap<&'i str, Vec<String>>,
    /// How many symbols have a name holding each stemmed word.
    pub stem_df: HashMap<String, usize>,
    /// The project's names ([`crate::project::project_names`]), which say
    /// nothing about where in it to look.
    pub project: Vec<String>,
}

/// Definitions by name, sliced the ways call resolution asks for them;
/// built once per graph.
struct Lookup<'i> {
    /// Definitions that are not methods.
    non_methods: HashMap<&'i str, Vec<SymbolId>>,
    /// Definitions by (name, owner type).
    owned: HashMap<(&'i str, &'i str), Vec<SymbolId>>,
    /// Methods by (name, owner type).
    methods: HashMap<(&'i str, &'i str), Vec<SymbolId>>,
    /// Definitions by (name, file).
    in_file: HashMap<(&'i str, u32), Vec<SymbolId>>,
    /// Methods of contract types, by name.
    contract_methods: HashMap<&'i str, Vec<SymbolId>>,
    /// Methods of types another type extends, by name.
    base_methods: HashMap<&'i str, Vec<SymbolId>>,
}

impl<'i> Lookup<'i> {
    fn new(g: &Graph<'i>) -> Self {
        let mut l = Lookup {
            non_methods: HashMap::default(),
            owned: HashMap::default(),
            methods: HashMap::default(),
            in_file: HashMap::default(),
            contract_methods: HashMap::default(),
            base_methods: HashMap::default(),
        };
        let mut contract: HashMap<&'i str, bool> = HashMap::default();
        for &id in &g.symbols {
            let s = g.symbol(id);
            let name = s.name.as_str();
            let owner = g.owner_name(id);
            l.in_file.entry((name, id.file)).or_default().push(id);
            if let Some(o) = owner {
                l.owned.entry((name, o)).or_default().push(id);
            }
            if s.kind != Kind::Method {
                l.non_methods.entry(name).or_default().push(id);
                continue;
            }
            let Some(o) = owner else { continue };
            l.methods.entry((name, o)).or_default().push(id);
            if *contract.entry(o).or_insert_with(|| g.is_contract(o)) {
                l.contract_methods.entry(name).or_default().push(id);
            }
            if g.implementers.contains_key(o) {
                l.base_methods.entry(name).or_default().push(id);
            }
        }
        l
    }

    fn non_methods(&self, name: &str) -> &[SymbolId] {
        self.non_methods.get(name).map_or(&[], Vec::as_slice)
    }

    fn methods_named(&self, name: &'i str, owner: &'i str) -> &[SymbolId] {
        self.methods.get(&(name, owner)).map_or(&[], Vec::as_slice)
    }

    fn owned_named(&self, name: &'i str, owner: &'i str) -> &[SymbolId] {
        self.owned.get(&(name, owner)).map_or(&[], Vec::as_slice)
    }

    fn in_file(&self, name: &'i str, file: u32) -> &[SymbolId] {
        self.in_file.get(&(name, file)).map_or(&[], Vec::as_slice)
    }

    fn contract_methods(&self, name: &str) -> &[SymbolId] {
        self.contract_methods.get(name).map_or(&[], Vec::as_slice)
    }

    fn base_methods(&self, name: &str) -> &[SymbolId] {
        self.base_methods.get(name).map_or(&[], Vec::as_slice)
    }
}

/// Decorators that say how a function works, not that it is registered.
const PLAIN_DECORATORS: &[&str] = &[
    "property",
    "staticmethod",
    "classmethod",
    "abstractmethod",
    "cached_property",
    "overload",
    "override",
    "wraps",
    "setter",
    "getter",
    "deleter",
    "dataclass",
    "contextmanager",
    "asynccontextmanager",
    "lru_cache",
    "cache",
    "total_ordering",
    "final",
    "fixture",
    "parametrize",
    "mark",
    "skip",
    "skipif",
    "xfail",
    "deprecated",
    "runtime_checkable",
    "s",
    "attrs",
    "define",
    "frozen",
    "mutable",
];

/// The fewest members a family needs.
const MIN_MEMBERS: usize = 3;

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
            by_name: HashMap::default(),
            calls: HashMap::default(),
            callers: HashMap::default(),
            guessed: HashMap::default(),
            implementers: HashMap::default(),
            supers: HashMap::default(),
            methods: HashMap::default(),
            member_of: HashMap::default(),
            members: HashMap::default(),
            name_stems: HashMap::default(),
            stem_df: HashMap::default(),
            project: crate::project::project_names(&index.root),
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
                if sym.is_impl_record() {
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
        let lookup = Lookup::new(&g);
        for (f, file) in index.files.iter().enumerate() {
            for call in &file.facts.calls {
                let from = SymbolId {
                    file: f as u32,
                    symbol: call.from,
                };
                let by_name = g.resolve(&lookup, from, &call.name, call.member, call.on_self);
                let targets = if call.member && !call.on_self {
                    let evident = g.resolve_on_other(&lookup, from, call);
                    for &to in by_name.iter().filter(|t| !evident.contains(t)) {
                        if to != from {
                            g.guessed.entry(from).or_default().push(to);
                        }
                    }
                    evident
                } else {
                    by_name
                };
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
        let calls = &g.calls;
        g.guessed.retain(|from, list| {
            list.sort();
            list.dedup();
            list.retain(|to| !calls.get(from).is_some_and(|c| c.contains(to)));
            !list.is_empty()
        });
        g.find_families();
        g.stem_names();
        g
    }

    /// Fills [`Graph::name_stems`] and [`Graph::stem_df`].
    fn stem_names(&mut self) {
        let index = self.index;
        for &id in &self.symbols {
            let name = index.files[id.file as usize].facts.symbols[id.symbol as usize]
                .name
                .as_str();
            let stems = self.name_stems.entry(name).or_insert_with(|| {
                words(name, Split::Fine)
                    .iter()
                    .map(|w| crate::answer::stem(w))
                    .collect()
            });
            for (i, s) in stems.iter().enumerate() {
                if !stems[..i].contains(s) {
                    *self.stem_df.entry(s.clone()).or_default() += 1;
                }
            }
        }
    }

    /// Families with no supertype (see [`Graph::member_of`]).
    fn find_families(&mut self) {
        let mut found: HashMap<String, Vec<SymbolId>> = HashMap::default();
        for &id in &self.symbols {
            let s = self.symbol(id);
            for d in s
                .decorators
                .iter()
                .filter(|d| !PLAIN_DECORATORS.contains(&d.as_str()))
            {
                let key = if s.kind.is_type() {
                    format!("@{d}")
                } else {
                    format!("@{d} {}", s.name)
                };
                found.entry(key).or_default().push(id);
            }
        }
        // Go functions that produce one func type or interface (middleware
        // constructors returning `HandlerFunc`).
        for &id in &self.symbols {
            let s = self.symbol(id);
            if s.kind == Kind::Function {
                if let Some(produced) = s.supers.first() {
                    if self.is_interface(produced) {
                        found
                            .entry(format!("returns {produced}"))
                            .or_default()
                            .push(id);
                    }
                }
            }
        }
        // One decorated function name counts in different files only (its
        // implementations by several plugins).
        found.retain(|key, ids| {
            if key.starts_with('@') && key.contains(' ') {
                let mut files: Vec<u32> = ids.iter().map(|id| id.file).collect();
                files.dedup();
                files.len() >= MIN_MEMBERS
            } else {
                ids.len() >= MIN_MEMBERS
            }
        });
        for (f, file) in self.index.files.iter().enumerate() {
            for (n, group) in file.facts.groups.iter().enumerate() {
                let mut ids: Vec<SymbolId> = Vec::new();
                for name in group {
                    let Some(all) = self.by_name.get(name.as_str()) else {
                        continue;
                    };
                    let defs: Vec<SymbolId> = all
                        .iter()
                        .copied()
                        .filter(|&t| {
                            let k = self.symbol(t).kind;
                            k == Kind::Function || k.is_type()
                        })
                        .collect();
                    let local: Vec<SymbolId> = defs
                        .iter()
                        .copied()
                        .filter(|t| t.file == f as u32)
                        .collect();
                    match (local.as_slice(), defs.as_slice()) {
                        ([one], _) | ([], [one]) => ids.push(*one),
                        _ => {}
                    }
                }
                ids.sort();
                ids.dedup();
                if ids.len() >= MIN_MEMBERS {
                    found.insert(format!("registry {}#{n}", file.path), ids);
                }
            }
        }
        for (key, ids) in &found {
            for &id in ids {
                self.member_of.entry(id).or_insert_with(|| key.clone());
            }
        }
        self.members = found;
    }

    /// The families a file's types and functions belong to: supertypes
    /// with at least `min` implementers, and families with no supertype.
    pub fn families_in_file(&self, file: u32, min: usize) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (i, s) in self.index.files[file as usize]
            .facts
            .symbols
            .iter()
            .enumerate()
        {
            if s.kind.is_type() {
                for fam in self.families_of(&s.name, min) {
                    if !out.iter().any(|o| o == fam) {
                        out.push(fam.to_owned());
                    }
                }
            }
            let id = SymbolId {
                file,
                symbol: i as u32,
            };
            if let Some(key) = self.member_of.get(&id) {
                if !out.contains(key) {
                    out.push(key.clone());
                }
            }
        }
        out
    }

    fn resolve(
        &self,
        lookup: &Lookup<'i>,
        from: SymbolId,
        name: &'i str,
        member: bool,
        on_self: bool,
    ) -> Vec<SymbolId> {
        let Some(all) = self.by_name.get(name) else {
            return Vec::new();
        };
        // A bare name reaches a free function, a type (a constructor) or a
        // method of the caller's own type; only a call on a receiver
        // reaches other types' methods.
        let own = self.owner_name(from);
        let reaches = |t: SymbolId| {
            member
                || self.symbol(t).kind != Kind::Method
                || (own.is_some() && self.owner_name(t) == own)
        };
        // Found through the maps built once per graph (a name can have
        // thousands of definitions, and be called thousands of times).
        let own_methods: &[SymbolId] = match own {
            Some(o) if !member => lookup.methods_named(name, o),
            _ => &[],
        };
        let count = if member {
            all.len()
        } else {
            lookup.non_methods(name).len() + own_methods.len()
        };
        if count == 0 {
            return Vec::new();
        }
        // A call on another object than `self` does not reach the
        // caller's own method of that name, or one its type inherits
        // (`adapter.send()` in `Session.send`).
        let inherited = |t: SymbolId| {
            let (Some(own), Some(owner)) = (own, self.owner_name(t)) else {
                return false;
            };
            owner == own || self.supers.get(own).is_some_and(|s| s.contains(&owner))
        };
        let local: Vec<SymbolId> = lookup
            .in_file(name, from.file)
            .iter()
            .copied()
            .filter(|&t| reaches(t))
            .filter(|&t| !(member && !on_self && inherited(t)))
            .collect();
        // A call on another object (`adapter.send()`) is not the caller's
        // own file's method just because one there has the name: it may
        // reach any of the name's few definitions.
        let elsewhere = member && !on_self && count <= MAX_TARGETS;
        if !local.is_empty() && !elsewhere {
            return local;
        }
        if count <= MAX_TARGETS {
            return if member {
                all.clone()
            } else {
                [lookup.non_methods(name), own_methods].concat()
            };
        }
        // The contract: the method of a type the others' types implement
        // or extend (an interface, a trait, an abstract base class).
        let candidates = |methods: &[SymbolId]| -> Vec<SymbolId> {
            methods
                .iter()
                .copied()
                .filter(|&t| reaches(t) && !(member && !on_self && inherited(t)))
                .collect()
        };
        let mut contract = candidates(lookup.contract_methods(name));
        if contract.is_empty() && member {
            // Else the one base class that declares it (`BaseAdapter.send`,
            // which one adapter extends).
            contract = candidates(lookup.base_methods(name));
        }
        let [contract] = contract[..] else {
            return Vec::new();
        };
        // The contract, and the implementation of the type the caller
        // itself constructs (`val chain = RealChain(…); chain.proceed()`).
        let mut out = vec![contract];
        let Some(interface) = self.owner_name(contract) else {
            return out;
        };
        let mut constructed = self.constructed_by(from);
        constructed.sort_unstable();
        constructed.dedup();
        for owner in constructed {
            if !self
                .supers
                .get(owner)
                .is_some_and(|s| s.contains(&interface))
            {
                continue;
            }
            for &t in lookup.owned_named(name, owner) {
                if t != contract && reaches(t) {
                    out.push(t);
                }
            }
        }
        out
    }

    /// Where a call on another object than the caller's own reaches, by
    /// what the code says of that object, and nothing on a guess:
    /// - its type, from a parameter's annotation, a constructor it was
    ///   assigned from, a declared field, or the object being a type
    ///   (`Foo.bar()`, `Foo::new()`): that type's methods, its supertypes'
    ///   and its implementations' (none when the type is not the
    ///   project's: `headers: dict`);
    /// - else its name: methods of types the name names (`adapter` →
    ///   `HTTPAdapter`, `resp` → `Response`), functions of the module it
    ///   names (`utils.get_netrc_auth()`);
    /// - else the method's name alone, when all its definitions are one
    ///   type's or one family's (a type, its supertypes, the types beside
    ///   it under one supertype).
    ///
    /// A call that none of these places (`headers.get()` where `get` is
    /// also `Session.get`) is no edge: a flow line is a claim.
    fn resolve_on_other(
        &self,
        lookup: &Lookup<'i>,
        from: SymbolId,
        call: &'i Call,
    ) -> Vec<SymbolId> {
        let Some(all) = self.by_name.get(call.name.as_str()) else {
            return Vec::new();
        };
        let own = self.owner_name(from);
        // Not the caller's own method, or one its type inherits: that is
        // a call on `self`.
        let candidates: Vec<SymbolId> = all
            .iter()
            .copied()
            .filter(|&t| {
                let Some(owner) = self.owner_name(t) else {
                    return true;
                };
                !own.is_some_and(|own| {
                    owner == own || self.supers.get(own).is_some_and(|s| s.contains(&owner))
                })
            })
            .collect();
        if candidates.is_empty() {
            return candidates;
        }
        let recv = call.recv.as_deref();
        let typed = call
            .recv_type
            .as_deref()
            .or_else(|| recv.filter(|r| self.is_type_name(r)));
        let evident: Vec<SymbolId> = if let Some(ty) = typed {
            candidates
                .iter()
                .copied()
                .filter(|&t| {
                    self.symbol(t).kind == Kind::Method
                        && self.owner_name(t).is_some_and(|o| self.extends(o, ty))
                })
                .collect()
        } else {
            let named: Vec<SymbolId> = recv
                .map(|r| {
                    candidates
                        .iter()
                        .copied()
                        .filter(|&t| match self.owner_name(t) {
                            Some(owner) if self.symbol(t).kind == Kind::Method => {
                                names_type(r, owner)
                            }
                            _ => names_module(r, self.path(t)),
                        })
                        .collect()
                })
                .unwrap_or_default();
            if !named.is_empty() {
                named
            } else if !BUILTIN_METHODS.contains(&call.name.as_str()) && self.one_family(&candidates)
            {
                candidates
            } else {
                Vec::new()
            }
        };
        if evident.len() <= MAX_TARGETS {
            return evident;
        }
        // Many implementations: the contract they share, and the one the
        // caller itself constructs (`val chain = RealChain(…);
        // chain.proceed()`).
        let contract: Vec<SymbolId> = evident
            .iter()
            .copied()
            .filter(|t| lookup.contract_methods(&call.name).contains(t))
            .collect();
        let [contract] = contract[..] else {
            return Vec::new();
        };
        let mut out = vec![contract];
        let Some(interface) = self.owner_name(contract) else {
            return out;
        };
        let mut constructed = self.constructed_by(from);
        if let Some(ty) = typed {
            constructed.push(ty);
        }
        constructed.sort_unstable();
        constructed.dedup();
        for owner in constructed {
            if !self
                .supers
                .get(owner)
                .is_some_and(|s| s.contains(&interface))
            {
                continue;
            }
            for &t in lookup.owned_named(&call.name, owner) {
                if t != contract && evident.contains(&t) {
                    out.push(t);
                }
            }
        }
        out
    }

    /// What `at` calls: the calls the code places, then those only a
    /// name ties (see [`Graph::guessed`]).
    pub fn reached(&self, at: SymbolId) -> impl Iterator<Item = SymbolId> + '_ {
        let placed = self.calls.get(&at).map(Vec::as_slice).unwrap_or_default();
        let guessed = self.guessed.get(&at).map(Vec::as_slice).unwrap_or_default();
        placed.iter().chain(guessed).copied()
    }

    /// Whether `from` → `to` is a step the code shows: a call it places,
    /// or a method's override in a type that extends the method's own
    /// (the dispatch a call on the contract makes).
    pub fn claims(&self, from: SymbolId, to: SymbolId) -> bool {
        if self.calls.get(&from).is_some_and(|c| c.contains(&to)) {
            return true;
        }
        let (a, b) = (self.symbol(from), self.symbol(to));
        a.kind == Kind::Method
            && b.kind == Kind::Method
            && a.name == b.name
            && match (self.owner_name(from), self.owner_name(to)) {
                (Some(base), Some(over)) => {
                    self.supers.get(over).is_some_and(|s| s.contains(&base))
                }
                _ => false,
            }
    }

    /// Whether a type of the project is named `name`.
    fn is_type_name(&self, name: &str) -> bool {
        self.by_name
            .get(name)
            .is_some_and(|ids| ids.iter().any(|&id| self.symbol(id).kind.is_type()))
    }

    /// Whether a method of `owner` is reached through an object of type
    /// `ty`: `owner` is `ty`, one of its supertypes, or implements it.
    fn extends(&self, owner: &str, ty: &str) -> bool {
        owner == ty
            || self.supers.get(ty).is_some_and(|s| s.contains(&owner))
            || self.supers.get(owner).is_some_and(|s| s.contains(&ty))
    }

    /// Whether every one of `ids` is a method of one family: the first
    /// one's type, its supertypes and subtypes, and the types beside it
    /// under a supertype.
    fn one_family(&self, ids: &[SymbolId]) -> bool {
        let mut owners = Vec::with_capacity(ids.len());
        for &id in ids {
            if self.symbol(id).kind != Kind::Method {
                // A function or a type: one definition says where it goes.
                return ids.len() == 1;
            }
            match self.owner_name(id) {
                Some(o) => owners.push(o),
                None => return false,
            }
        }
        let first = owners[0];
        let first_supers = self.supers.get(first);
        owners.iter().all(|&o| {
            self.extends(o, first)
                || first_supers.is_some_and(|fs| {
                    self.supers
                        .get(o)
                        .is_some_and(|os| os.iter().any(|s| fs.contains(s)))
                })
        })
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

/// Methods of the languages' own collections, strings and files: on an
/// object the code says nothing of, `x.get()` is a dict's or a map's far
/// more often than the one project method of that name.
const BUILTIN_METHODS: &[&str] = &[
    "get",
    "set",
    "items",
    "keys",
    "values",
    "append",
    "extend",
    "pop",
    "push",
    "update",
    "copy",
    "clear",
    "add",
    "remove",
    "insert",
    "index",
    "count",
    "join",
    "split",
    "strip",
    "format",
    "replace",
    "startswith",
    "endswith",
    "lower",
    "upper",
    "setdefault",
    "sort",
    "read",
    "write",
    "close",
    "flush",
    "encode",
    "decode",
    "put",
    "contains",
    "size",
    "len",
    "length",
    "map",
    "filter",
    "forEach",
    "toString",
    "equals",
    "hashCode",
];

/// Whether a receiver's name names a type: its last word is the type's
/// last word, or the start of it (`adapter` → `HTTPAdapter`, `resp` →
/// `Response`, `chain` → `RealInterceptorChain`, `app` → `app`).
fn names_type(recv: &str, owner: &str) -> bool {
    let last = |name: &str| {
        words(name, Split::Fine)
            .last()
            .map(|w| w.to_ascii_lowercase())
    };
    let (Some(r), Some(o)) = (last(recv), last(owner)) else {
        return false;
    };
    // `hooks_dict` says it is a dict, not which: not `LookupDict`.
    if CONTAINER_WORDS.contains(&r.as_str()) {
        return false;
    }
    r == o || (r.len() >= 3 && o.starts_with(&r))
}

/// Words that name a kind of value, not a type of the project.
const CONTAINER_WORDS: &[&str] = &[
    "dict", "list", "set", "map", "tuple", "str", "string", "array", "bytes", "int", "obj",
    "object", "data", "value", "item", "iter", "seq", "queue", "stack", "buf", "buffer",
];

/// Whether a receiver's name is the module a file is (`utils` →
/// `requests/utils.py`, `sessions` → `pkg/sessions/__init__.py`).
fn names_module(recv: &str, path: &str) -> bool {
    let mut parts = path.rsplit('/');
    let file = parts.next().unwrap_or_default();
    let stem = file.split('.').next().unwrap_or_default();
    if stem == recv {
        return true;
    }
    matches!(stem, "__init__" | "index" | "mod") && parts.next() == Some(recv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index_of(files: &[(&str, &str)]) -> (Index, std::path::PathBuf) {
        crate::testing::indexed(&format!("graph-{}", files.len()), files)
    }

    fn family_names(g: &Graph<'_>) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = g
            .members
            .iter()
            .map(|(k, ids)| {
                let mut names: Vec<String> = ids.iter().map(|&id| g.qualified(id)).collect();
                names.sort();
                (k.clone(), names)
            })
            .collect();
        out.sort();
        out
    }

    /// `adapter.send(request)` in `Session.send` may reach
    /// `HTTPAdapter.send` in another file, though the caller's own file
    /// has a `send`; `self.send()` stays with the caller's own.
    #[test]
    fn a_call_on_another_object_reaches_other_files() {
        let (index, dir) = index_of(&[
            (
                "pkg/sessions.py",
                "class Mixin:\n    def send(self, request):\n        pass\n\nclass Session(Mixin):\n    def send(self, request):\n        adapter = self.get_adapter()\n        return adapter.send(request)\n\n    def resend(self, request):\n        return self.send(request)\n\n    def get_adapter(self):\n        return None\n",
            ),
            (
                "pkg/adapters.py",
                "class HTTPAdapter:\n    def send(self, request):\n        return request\n",
            ),
        ]);
        let graph = Graph::new(&index);
        let callees = |from: &str| callees_of(&graph, from);
        assert!(
            callees("Session.send").contains(&"pkg/adapters.py:HTTPAdapter.send".to_string()),
            "{:?}",
            callees("Session.send")
        );
        assert!(
            !callees("Session.resend")
                .iter()
                .any(|c| c.starts_with("pkg/adapters.py")),
            "{:?}",
            callees("Session.resend")
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    /// `path:Owner.name` of what the symbol `from` (qualified) calls.
    fn callees_of(graph: &Graph<'_>, from: &str) -> Vec<String> {
        let index = graph.index;
        let id = (0..index.files.len() as u32)
            .flat_map(|file| {
                let n = index.files[file as usize].facts.symbols.len() as u32;
                (0..n).map(move |symbol| SymbolId { file, symbol })
            })
            .find(|&s| graph.qualified(s) == from)
            .unwrap_or_else(|| panic!("no {from}"));
        let mut names: Vec<String> = graph
            .calls
            .get(&id)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|&c| format!("{}:{}", graph.path(c), graph.qualified(c)))
            .collect();
        names.sort();
        names
    }

    /// requests, as a new user found it: `headers.get()` and
    /// `hooks.get()` were flow lines to `Session.get`, `resp.close()` one
    /// to `Session.close`. A call on another object reaches a method only
    /// where the code says which: a type, a name, a unique method.
    #[test]
    fn a_call_on_an_object_of_unknown_type_is_no_edge() {
        let (index, dir) = index_of(&[
            (
                "requests/sessions.py",
                "class Session:\n    def get(self, url):\n        return self.request(url)\n\n    def request(self, url):\n        return url\n\n    def close(self):\n        for a in self.adapters:\n            a.close()\n\n    def send(self, request):\n        adapter = self.get_adapter(request.url)\n        r = adapter.send(request)\n        r = dispatch_hook('response', request.hooks, r)\n        return r\n\n    def resolve_redirects(self, resp, req):\n        resp.close()\n        extract_cookies_to_jar(self.cookies, req, resp.raw)\n        return resp\n\n    def prepare(self, request):\n        p = PreparedRequest()\n        p.prepare(request)\n        return p\n",
            ),
            (
                "requests/structures.py",
                "class LookupDict(dict):\n    def get(self, key, default=None):\n        return self.__dict__.get(key, default)\n",
            ),
            (
                "requests/utils.py",
                "def get_encoding_from_headers(headers):\n    content_type = headers.get('content-type')\n    return content_type\n\ndef stream(r):\n    return get_encoding_from_headers(r.headers)\n",
            ),
            (
                "requests/api.py",
                "def request(method, url):\n    return method\n\ndef get(url):\n    return request('get', url)\n",
            ),
            (
                "requests/hooks.py",
                "def dispatch_hook(key, hooks, hook_data):\n    hooks_dict = hooks or {}\n    hook_list = hooks_dict.get(key)\n    return hook_data\n",
            ),
            (
                "requests/cookies.py",
                "def extract_cookies_to_jar(jar, request, response):\n    res = MockResponse(response._original_response.msg)\n    jar.extract_cookies(res, request)\n\nclass MockResponse:\n    def __init__(self, headers):\n        self._headers = headers\n",
            ),
            (
                "requests/models.py",
                "class Response:\n    def close(self):\n        release_conn = getattr(self.raw, 'release_conn', None)\n\nclass PreparedRequest:\n    def prepare(self, url):\n        self.url = url\n",
            ),
            (
                "requests/adapters.py",
                "class BaseAdapter:\n    def send(self, request):\n        raise NotImplementedError\n\n    def close(self):\n        raise NotImplementedError\n\nclass HTTPAdapter(BaseAdapter):\n    def send(self, request):\n        return utils.stream(request)\n\n    def close(self):\n        self.poolmanager.clear()\n",
            ),
        ]);
        let graph = Graph::new(&index);
        let callees = |from: &str| callees_of(&graph, from);
        assert_eq!(callees("get_encoding_from_headers"), Vec::<String>::new());
        assert_eq!(callees("dispatch_hook"), Vec::<String>::new());
        assert_eq!(
            callees("Session.resolve_redirects"),
            [
                "requests/cookies.py:extract_cookies_to_jar",
                "requests/models.py:Response.close"
            ]
        );
        assert_eq!(
            callees("Session.send"),
            [
                "requests/adapters.py:BaseAdapter.send",
                "requests/adapters.py:HTTPAdapter.send",
                "requests/hooks.py:dispatch_hook"
            ]
        );
        // Its type, from the constructor it was made by.
        assert_eq!(
            callees("Session.prepare"),
            [
                "requests/models.py:PreparedRequest",
                "requests/models.py:PreparedRequest.prepare"
            ]
        );
        // The module a receiver names.
        assert_eq!(callees("HTTPAdapter.send"), ["requests/utils.py:stream"]);
        // `a` names nothing, and `close` is also `Response.close`.
        assert_eq!(callees("Session.close"), Vec::<String>::new());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn families_without_a_supertype() {
        let handler = |name: &str| format!("def {name}(request):\n    return request\n\n");
        let (index, dir) = index_of(&[
            (
                "app/handlers.py",
                &format!(
                    "{}{}{}HANDLERS = {{\"json\": json_handler, \"html\": html_handler, \"text\": text_handler, \"n\": 3}}\n",
                    handler("json_handler"),
                    handler("html_handler"),
                    handler("text_handler")
                ),
            ),
            (
                "app/backends.py",
                "@register\nclass Redis:\n    pass\n\n@register\nclass Memory:\n    pass\n\n@register\nclass Disk:\n    pass\n\n@property\ndef plain(): pass\n",
            ),
            ("plugins/a.py", "@hookimpl\ndef pytest_configure(config):\n    pass\n"),
            ("plugins/b.py", "@hookimpl(tryfirst=True)\ndef pytest_configure(config):\n    pass\n"),
            ("plugins/c.py", "class P:\n    @hookimpl\n    def pytest_configure(self, config):\n        pass\n"),
            (
                "gin/middleware.go",
                "package gin\ntype HandlerFunc func(*Context)\nfunc Logger() HandlerFunc { return nil }\nfunc Recovery() HandlerFunc { return nil }\nfunc BasicAuth(a string) HandlerFunc { return nil }\nfunc Other() int { return 1 }\n",
            ),
        ]);
        let graph = Graph::new(&index);
        assert_eq!(
            family_names(&graph),
            [
                (
                    "@hookimpl pytest_configure".to_string(),
                    vec![
                        "P.pytest_configure".to_string(),
                        "pytest_configure".into(),
                        "pytest_configure".into()
                    ]
                ),
                (
                    "@register".to_string(),
                    vec!["Disk".into(), "Memory".into(), "Redis".into()]
                ),
                (
                    "registry app/handlers.py#0".to_string(),
                    vec![
                        "html_handler".into(),
                        "json_handler".into(),
                        "text_handler".into()
                    ]
                ),
                (
                    "returns HandlerFunc".to_string(),
                    vec!["BasicAuth".into(), "Logger".into(), "Recovery".into()]
                ),
            ]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
