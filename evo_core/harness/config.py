"""``[harness]`` config: the typed, validated settings of the harness engine.

The trainer's run config embeds this table as ``[harness]``; ``HarnessConfig.from_dict``
merges the tables of named plugins with the defaults and validates it through the one config
schema (``evo_core.config_schema``). An unknown key, a wrong type, NaN or a value out of range
is a clear one-line error naming the key (a typo must never silently fall back to a default);
the plugin tables' parameters are checked against each plugin's declared ``parameters`` when the
config is loaded (``evo_core.config_checks``).

    [harness]
    mode = "evolving"                 # set by the run arm; "fixed": diagnoses and logs, never changes itself
    window_steps = 10                 # evidence window (steps of rollouts) a diagnostic reads
    diagnose_every = 5
    skills_from = []                  # store URLs ("sqlite:///x.sqlite") or skill files (.json)
    [harness.diagnostics.truncation_rate]
    max_rate = 0.15
    [harness.gates.policy]
    metric = "strict_accuracy"
    [harness.proposers.rules]
    [harness.backtest]
    online = true
    k_steps = 10
    [harness.ablations]
    no_revision = false
    [harness.audit]
    rate = 0.05
    [harness.oracle]
    budget = 1.5                      # decision-relevant oracle labels per run, a share of training rollouts (unset: no cap)
    [harness.interventions.cap_length]   # active from step 1, with these params
    max_chars = 40

Tables of named plugins merge with the defaults: ``[harness.diagnostics.X]`` (or ``.gates.X``,
``.proposers.X``) tunes or adds one and leaves the others on; ``enabled = false`` switches one
off; and ``replace_diagnostics = true`` makes the configured diagnostics the whole set.
``[harness.interventions.X]`` switches the installed intervention ``X`` on from the first step
(its table: the params, over its defaults): the one way to change training by hand, folded
into the harness state at ``RunStarted`` like a promotion, so it is logged and replayable.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import attrs

from evo_core.config_base import ConfigError
from evo_core.config_schema import FieldError, PluginTables, count, number, one_of, structure

MODES = ("fixed", "evolving")
F = attrs.field


class HarnessConfigError(ConfigError):
    """The ``[harness]`` table is malformed (message names the offending key)."""


def _names(_inst: Any, attribute: attrs.Attribute, v: tuple[str, ...]) -> None:
    for i, n in enumerate(v):
        if not n:
            raise FieldError(f"{attribute.name}[{i}]", "must be a non-empty name")


@attrs.frozen(kw_only=True)
class BacktestConfig:
    """Offline replay and the online control/treatment fork.

    The online A/B runs ``replicates`` pairs of branches (control and treatment of a pair
    share their sampling seed) for ``k_steps`` each, and decides on the spread *between
    pairs*, so training noise is in the interval, not only item noise: a t-interval over
    the pairs' differences at ``confidence``. It passes when the targeted statistic falls
    (the interval of its change lies below 0) and validation strict accuracy does not
    fall by more than ``-min_effect`` (``min_effect = 0`` asks for an improvement)."""

    offline: bool = True
    online: bool = True
    plan: tuple[str, ...] = F(default=(), validator=_names)  # backtesters in order; empty: every installed one, offline first
    k_steps: int = F(default=10, validator=count(1))  # RL steps per branch in the online A/B
    replicates: int = F(default=3, validator=count(1))  # pairs of branches (>= 2 puts training noise in the interval)
    eval_limit: Optional[int] = F(default=None, validator=count(1))  # validation items per branch (None: all)
    min_n: int = F(default=30, validator=count(1))  # paired items below which no decision is possible
    confidence: float = F(default=0.9, validator=number(0, 1))  # two-sided CI level
    n_boot: int = F(default=2000, validator=count(1))
    regression_cap: float = F(default=0.15, validator=number(0, 1))  # max fraction of paired items that may get worse…
    worse_margin: float = F(default=0.25, validator=number(0, 1))  # …by more than this (item scores averaged over samples are noisy)
    min_effect: float = F(default=-0.03, validator=number(-1, 1))  # the accuracy CI's lower bound must exceed this (non-inferiority)
    fingerprint_check: bool = True  # the targeted diagnosis must fall in treatment
    min_precision: float = F(default=0.7, validator=number(0, 1))  # offline: a diagnostic/penalty must hit invalid rollouts…
    min_recall: float = F(default=0.5, validator=number(0, 1))
    max_false_positive: float = F(default=0.2, validator=number(0, 1))  # …without flagging genuine correct ones
    seed: int = F(default=0, validator=count(0))

    @classmethod
    def from_dict(cls, data: Any) -> "BacktestConfig":
        return _structure(cls, data or {}, "harness.backtest")


@attrs.frozen(kw_only=True)
class Ablations:
    no_revision: bool = False  # proposers may not add or revise diagnostics
    no_skill_reuse: bool = False  # skill retrieval is off, skills_from ignored
    no_online_backtest: bool = False  # offline replay only

    @classmethod
    def from_dict(cls, data: Any) -> "Ablations":
        return _structure(cls, data or {}, "harness.ablations")


@attrs.frozen(kw_only=True)
class AuditConfig:
    """How much evidence the strict oracle labels (``strict_correct``) for the harness.

    The trainer reads ``rate`` to decide which training rollouts to audit; the harness
    only uses the labels that are there."""

    rate: float = F(default=0.05, validator=number(0, 1))  # an oracle budget of a few percent of training rollouts
    min_per_step: int = F(default=0, validator=count(0))
    regrade_rate: float = F(default=0.05, validator=number(0, 1))  # oracle re-grades an oracle_regrade repair may ask for, per step
    seed: int = F(default=0, validator=count(0))

    @classmethod
    def from_dict(cls, data: Any) -> "AuditConfig":
        return _structure(cls, data or {}, "harness.audit")


@attrs.frozen(kw_only=True)
class OracleConfig:
    """The cap on decision-relevant strict-oracle labels per run (``evo_core.trainer.oracle``):
    the audit, re-grades and validation evaluations, of the main line and of every A/B branch
    together, as a share of the run's nominal training rollouts (prompts_per_step x group_size
    x steps). ``train`` labels (the reference's reward) and ``test`` labels (report only) are
    never capped. Unset (the default): no cap. A share of training rollouts means nothing for a
    short run whose evaluations outnumber its rollouts (a 4-step test run draws several times
    its rollouts in validation labels), so the cap is opt-in; the flaw suite sets 1.5
    (configs/suite/suite.toml), above what its evolving runs drew without a cap."""

    budget: Optional[float] = F(default=None, validator=number(0))

    @classmethod
    def from_dict(cls, data: Any) -> "OracleConfig":
        return _structure(cls, data or {}, "harness.oracle")


def _structure(cls: type, data: Any, where: str) -> Any:
    try:
        return structure(cls, data, where)
    except ConfigError as exc:
        raise HarnessConfigError(str(exc)) from None


# The generic diagnostics of the standard library. Flaw- and domain-specific ones are priors:
# their plugins mark them ``prior = True`` and they join only with ``harness.priors = true``.
DEFAULT_DIAGNOSTICS: dict[str, dict[str, Any]] = {
    "zero_variance_groups": {},
    "truncation_rate": {},
    "length_inflation": {},
    "entropy_collapse": {},
    "repetition_loops": {},
    "reward_oracle_gap": {},
    "reward_oracle_underpay": {},
    "reward_heldout_divergence": {},
}

DEFAULT_PROPOSERS: dict[str, dict[str, Any]] = {"skills": {}, "contrast": {}, "rules": {}}

DEFAULT_GATES: dict[str, dict[str, Any]] = {
    "validity": {},
    "statistical": {},
    "policy": {},
}


@attrs.frozen(kw_only=True)
class HarnessConfig:
    # "fixed" or "evolving"; "" (unset) in a config until its run arm sets it (``RunConfig.for_arm``)
    mode: str = F(default="", validator=one_of("", *MODES))
    window_steps: int = F(default=10, validator=count(1))
    diagnose_every: int = F(default=5, validator=count(1))  # steps between diagnostic passes (and proposal rounds)
    policy_gate_every: int = F(default=0, validator=count(0))  # steps between policy gates; 0: at every held-out eval
    max_proposals_per_round: int = F(default=1, validator=count(1))
    cooldown_steps: int = F(default=0, validator=count(0))  # after a promotion, wait before proposing again
    # a rejected proposal returns only if its diagnosis grew by this fraction
    ledger_new_evidence: float = F(default=0.25, validator=number(0))
    diagnostics: PluginTables = attrs.Factory(lambda: {k: dict(v) for k, v in DEFAULT_DIAGNOSTICS.items()})
    gates: PluginTables = attrs.Factory(lambda: {k: dict(v) for k, v in DEFAULT_GATES.items()})
    proposers: PluginTables = attrs.Factory(lambda: {k: dict(v) for k, v in DEFAULT_PROPOSERS.items()})
    interventions: PluginTables = attrs.Factory(dict)  # active from step 1 (name -> params), folded like a promotion
    backtest: BacktestConfig = attrs.Factory(BacktestConfig)
    skills_from: tuple[str, ...] = F(default=(), validator=_names)
    ablations: Ablations = attrs.Factory(Ablations)
    audit: AuditConfig = attrs.Factory(AuditConfig)
    oracle: OracleConfig = attrs.Factory(OracleConfig)
    priors: bool = False  # warm priors: flaw-/domain-specific diagnostics and proposers join (cold: off)
    replace_diagnostics: bool = False  # the configured diagnostics are the whole set (no defaults)

    @property
    def evolving(self) -> bool:
        return self.mode != "fixed"

    @classmethod
    def from_dict(cls, data: Any) -> "HarnessConfig":
        """The ``[harness]`` table through the one config schema (``evo_core.config_schema``),
        after the tables of named plugins are merged with the defaults."""
        if isinstance(data, HarnessConfig):
            return data
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise HarnessConfigError(f"config key 'harness' must be a table, got {data!r}")
        data = dict(data)
        if isinstance(data.get("skills_from"), str):  # one source may be given as a string
            data["skills_from"] = [data["skills_from"]]
        # tuning one diagnostic must not switch off the others (`enabled = false` does that), and
        # the standard gates and proposers are always there: validity vetoes must not vanish because
        # a config tuned one gate
        defaults = {"gates": DEFAULT_GATES, "proposers": DEFAULT_PROPOSERS}
        if not data.get("replace_diagnostics", False):
            defaults["diagnostics"] = DEFAULT_DIAGNOSTICS
        for key, table in defaults.items():
            if key in data and isinstance(data[key], Mapping):
                data[key] = {**{n: {} for n in table}, **data[key]}
        return _structure(cls, data, "harness")

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as it goes into ``RunStarted.config["harness"]`` (round-trips)."""
        d = attrs.asdict(self, recurse=True)
        d["skills_from"] = list(self.skills_from)
        d["backtest"]["plan"] = list(self.backtest.plan)
        return d
