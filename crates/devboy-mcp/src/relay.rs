//! What an upstream sends back towards the agents besides answers: its
//! requests of the client (sampling, elicitation), its log messages and
//! its resource updates.
//!
//! A server asks the client something while it works on a call, so a
//! request goes to the agent whose call to this upstream started last and
//! is still in flight, else to the agent that last called it. Log messages
//! go to the agents that set a level at least as low (all of devboy's
//! sessions over one upstream share its one level: the lowest any asked
//! for), or, when none set one, to the agent that would be asked. A
//! resource update goes to the agents subscribed to that URI; the upstream
//! is told to subscribe once and to unsubscribe when the last one does.
//!
//! Agents are told apart by their session's number ([`AgentId`]); one whose
//! transport has closed is forgotten the next time the relay looks.

#![allow(deprecated)] // Logging is deprecated by SEP-2577, but still in use.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::LoggingLevel;
use rmcp::service::Peer;
use rmcp::RoleServer;

use crate::sync::lock;

/// One agent session, by number (unique within the process).
pub(crate) type AgentId = u64;

/// A new [`AgentId`].
pub(crate) fn next_agent_id() -> AgentId {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The agents one upstream's requests and notifications go to.
#[derive(Default)]
pub(crate) struct Relay {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next_call: u64,
    /// Agents with a call to this upstream in flight, oldest first.
    calls: Vec<(u64, Peer<RoleServer>)>,
    /// The agent that called last.
    last: Option<Peer<RoleServer>>,
    /// The log level each agent asked for.
    levels: Vec<(AgentId, Peer<RoleServer>, LoggingLevel)>,
    /// Which agent is subscribed to which URI.
    subscriptions: Vec<(String, AgentId, Peer<RoleServer>)>,
}

impl State {
    fn forget_closed(&mut self) {
        self.calls.retain(|(_, p)| !p.is_transport_closed());
        self.levels.retain(|(_, p, _)| !p.is_transport_closed());
        self.subscriptions
            .retain(|(_, _, p)| !p.is_transport_closed());
        if self.last.as_ref().is_some_and(Peer::is_transport_closed) {
            self.last = None;
        }
    }
}

/// Marks a call in flight until dropped.
pub(crate) struct InFlight {
    relay: Arc<Relay>,
    id: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        lock(&self.relay.state)
            .calls
            .retain(|(id, _)| *id != self.id);
    }
}

/// How severe a level is, `debug` lowest.
fn rank(level: LoggingLevel) -> u8 {
    level as u8
}

impl Relay {
    /// `agent` has a call to this upstream in flight until the guard goes.
    pub(crate) fn enter(self: &Arc<Self>, agent: Peer<RoleServer>) -> InFlight {
        let mut state = lock(&self.state);
        state.next_call += 1;
        let id = state.next_call;
        state.calls.push((id, agent.clone()));
        state.last = Some(agent);
        InFlight {
            relay: self.clone(),
            id,
        }
    }

    /// The agent a request of this upstream goes to: the newest call's in
    /// flight, else the last caller's.
    pub(crate) fn asker(&self) -> Option<Peer<RoleServer>> {
        let mut state = lock(&self.state);
        state.forget_closed();
        state
            .calls
            .last()
            .map(|(_, p)| p.clone())
            .or_else(|| state.last.clone())
    }

    /// Records the level `agent` asked for and returns the level the
    /// upstream should now have: the lowest any live agent asked for.
    pub(crate) fn set_level(
        &self,
        agent: AgentId,
        peer: Peer<RoleServer>,
        level: LoggingLevel,
    ) -> LoggingLevel {
        let mut state = lock(&self.state);
        state.forget_closed();
        state.levels.retain(|(id, _, _)| *id != agent);
        state.levels.push((agent, peer, level));
        lowest(&state.levels).unwrap_or(level)
    }

    /// The level the upstream should have, if any agent asked for one.
    pub(crate) fn level(&self) -> Option<LoggingLevel> {
        let mut state = lock(&self.state);
        state.forget_closed();
        lowest(&state.levels)
    }

    /// The agents a message at `level` goes to.
    pub(crate) fn log_targets(&self, level: LoggingLevel) -> Vec<Peer<RoleServer>> {
        let mut state = lock(&self.state);
        state.forget_closed();
        if state.levels.is_empty() {
            drop(state);
            return self.asker().into_iter().collect();
        }
        state
            .levels
            .iter()
            .filter(|(_, _, wanted)| rank(*wanted) <= rank(level))
            .map(|(_, p, _)| p.clone())
            .collect()
    }

    /// Subscribes `agent` to `uri`; true when it is the first, so the
    /// upstream must be told.
    pub(crate) fn subscribe(&self, agent: AgentId, peer: Peer<RoleServer>, uri: &str) -> bool {
        let mut state = lock(&self.state);
        state.forget_closed();
        let first = !state.subscriptions.iter().any(|(u, _, _)| u == uri);
        if !state
            .subscriptions
            .iter()
            .any(|(u, id, _)| u == uri && *id == agent)
        {
            state.subscriptions.push((uri.to_owned(), agent, peer));
        }
        first
    }

    /// Ends `agent`'s subscription to `uri`; true when no agent is left
    /// subscribed, so the upstream must be told.
    pub(crate) fn unsubscribe(&self, agent: AgentId, uri: &str) -> bool {
        let mut state = lock(&self.state);
        state.forget_closed();
        state
            .subscriptions
            .retain(|(u, id, _)| !(u == uri && *id == agent));
        !state.subscriptions.iter().any(|(u, _, _)| u == uri)
    }

    /// The URIs some agent is subscribed to (to renew on a new connection).
    pub(crate) fn subscribed_uris(&self) -> Vec<String> {
        let mut state = lock(&self.state);
        state.forget_closed();
        let mut uris: Vec<String> = state
            .subscriptions
            .iter()
            .map(|(u, _, _)| u.clone())
            .collect();
        uris.sort();
        uris.dedup();
        uris
    }

    /// The agents subscribed to `uri`.
    pub(crate) fn subscribers(&self, uri: &str) -> Vec<Peer<RoleServer>> {
        let mut state = lock(&self.state);
        state.forget_closed();
        state
            .subscriptions
            .iter()
            .filter(|(u, _, _)| u == uri)
            .map(|(_, _, p)| p.clone())
            .collect()
    }
}

fn lowest(levels: &[(AgentId, Peer<RoleServer>, LoggingLevel)]) -> Option<LoggingLevel> {
    levels
        .iter()
        .map(|(_, _, level)| *level)
        .min_by_key(|level| rank(*level))
}
