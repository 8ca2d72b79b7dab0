//! The words of read-only speculation, shared by the planner, the proxy's
//! engine, telemetry and the tuner: where a result came from, why a
//! candidate was not prefetched, and what became of a prefetch.
//!
//! Each enum has a stable snake_case name ([`Served::name`] and the like):
//! it is what telemetry files and `devboy_status` carry. A call's identity
//! is [`crate::call::CallKey`].

/// Where the result the agent got for a call came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Served {
    /// The upstream answered the agent's own call.
    #[default]
    Upstream,
    /// A prefetch that had landed answered it at once.
    Prefetch,
    /// The call joined a prefetch still in flight and waited for it.
    Joined,
    /// devboy answered without calling (`fail_fast_after_n`: the same
    /// call came back empty that many times in this context).
    FailFast,
    /// Not the agent's call: a prefetch's result appended to the answer
    /// that planned it (`enrichment.mode = "inline"`).
    Inline,
}

/// Why the planner did not prefetch a follow-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeclineReason {
    /// Below `enrichment.min_probability`.
    LowProbability,
    /// Its side-effect class is not `pure` or `read_only` (unknown
    /// included).
    NotReadOnly,
    /// Its name or its annotations say it writes, whatever the config says.
    Writes,
    /// `speculate = false` for the tool.
    SpeculateOff,
    /// It reaches a remote service (an HTTP upstream, `openWorldHint`, a
    /// `rate_limit_host`) and `enrichment.remote` is off.
    Remote,
    /// The same call was already answered in this context, is held or in
    /// flight.
    AlreadyHeld,
    /// The follow-up is the call just answered.
    SelfLoop,
    /// The projection gave no arguments, or arguments the tool's input
    /// schema rejects.
    NoArguments,
    /// The follow-up names no tool devboy serves now.
    UnknownTool,
    /// Its predicted cost does not fit what is left of
    /// `enrichment.budget_tokens`.
    OverBudget,
    /// `enrichment.max_parallel` prefetches are already chosen or in
    /// flight.
    OverParallel,
    /// Its upstream or host already has as many prefetches in flight as
    /// `enrichment.per_host` allows.
    HostBusy,
}

impl DeclineReason {
    /// Every reason, in the order of [`name`](Self::name)s in reports.
    pub const ALL: [DeclineReason; 12] = [
        Self::LowProbability,
        Self::NotReadOnly,
        Self::Writes,
        Self::SpeculateOff,
        Self::Remote,
        Self::AlreadyHeld,
        Self::SelfLoop,
        Self::NoArguments,
        Self::UnknownTool,
        Self::OverBudget,
        Self::OverParallel,
        Self::HostBusy,
    ];

    /// The stable name.
    pub fn name(self) -> &'static str {
        match self {
            Self::LowProbability => "low_probability",
            Self::NotReadOnly => "not_read_only",
            Self::Writes => "writes",
            Self::SpeculateOff => "speculate_off",
            Self::Remote => "remote",
            Self::AlreadyHeld => "already_held",
            Self::SelfLoop => "self_loop",
            Self::NoArguments => "no_arguments",
            Self::UnknownTool => "unknown_tool",
            Self::OverBudget => "over_budget",
            Self::OverParallel => "over_parallel",
            Self::HostBusy => "host_busy",
        }
    }

    /// The reason a name stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Whether the candidate could have been prefetched but for the
    /// moment's limits (budget, parallelism, a busy host): these are the
    /// declines whose later calls count as recall lost.
    pub fn is_capacity(self) -> bool {
        matches!(self, Self::OverBudget | Self::OverParallel | Self::HostBusy)
    }
}

impl Served {
    /// The stable name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Upstream => "upstream",
            Self::Prefetch => "prefetch",
            Self::Joined => "joined",
            Self::FailFast => "fail_fast",
            Self::Inline => "inline",
        }
    }

    /// Whether the agent made the call itself (everything but an inlined
    /// follow-up): what call-order mining may count.
    pub fn agent_called(self) -> bool {
        self != Self::Inline
    }

    /// Whether a prefetch answered the call (landed or joined).
    pub fn from_prefetch(self) -> bool {
        matches!(self, Self::Prefetch | Self::Joined)
    }
}

/// What became of one prefetch that was dispatched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrefetchEnd {
    /// The agent's call was answered from it after it had landed.
    Used,
    /// The agent's call joined it in flight.
    Joined,
    /// It stayed unused past its freshness.
    Expired,
    /// A call that may change what it read came first.
    Invalidated,
    /// The upstream answered with an error (`isError`, a JSON-RPC error, a
    /// rate limit); never shown to the agent.
    Failed,
    /// It ran past `enrichment.prefetch_timeout_ms`.
    TimedOut,
    /// Its upstream restarted while it was in flight.
    UpstreamRestarted,
    /// The session ended first (in flight: cancelled upstream).
    SessionEnded,
    /// The store made room for newer prefetches.
    Evicted,
    /// It was appended to the answer that planned it (inline mode): the
    /// model saw it without a call of its own.
    Inlined,
    /// The agent's call that joined it was cancelled: it was cancelled
    /// upstream too, as the agent's own call would have been.
    Cancelled,
    /// A file it read changed on disk before the agent's call came (or was
    /// written so shortly before it was sent that a change could not be
    /// told): the agent's call went to the server.
    Stale,
}

impl PrefetchEnd {
    /// Every end, in report order.
    pub const ALL: [PrefetchEnd; 12] = [
        Self::Used,
        Self::Joined,
        Self::Expired,
        Self::Invalidated,
        Self::Failed,
        Self::TimedOut,
        Self::UpstreamRestarted,
        Self::SessionEnded,
        Self::Evicted,
        Self::Inlined,
        Self::Cancelled,
        Self::Stale,
    ];

    /// The stable name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Used => "used",
            Self::Joined => "joined",
            Self::Expired => "expired",
            Self::Invalidated => "invalidated",
            Self::Failed => "failed",
            Self::TimedOut => "timed_out",
            Self::UpstreamRestarted => "upstream_restarted",
            Self::SessionEnded => "session_ended",
            Self::Evicted => "evicted",
            Self::Inlined => "inlined",
            Self::Cancelled => "cancelled",
            Self::Stale => "stale",
        }
    }

    /// The end a name stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.name() == name)
    }

    /// Whether the agent's own call got the prefetched result (a hit).
    pub fn is_hit(self) -> bool {
        matches!(self, Self::Used | Self::Joined)
    }

    /// Whether the model saw the prefetched result: a hit, or inlined
    /// into an answer. The others are waste.
    pub fn is_delivered(self) -> bool {
        self.is_hit() || self == Self::Inlined
    }
}

/// One thing speculation did, reported per tool (the follow-up's tool for
/// planner decisions and prefetches).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SpeculationEvent {
    /// A prefetch was sent; the planner predicted its result's cost.
    Dispatched {
        /// Predicted tokens.
        predicted_tokens: usize,
    },
    /// The planner did not prefetch a candidate.
    Declined {
        /// Why.
        reason: DeclineReason,
    },
    /// A dispatched prefetch ended.
    Ended {
        /// How.
        end: PrefetchEnd,
        /// What the planner predicted.
        predicted_tokens: usize,
    },
}
