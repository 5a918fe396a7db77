"""``[harness]`` config: the typed, validated settings of the harness engine.

The trainer's run config embeds this table as ``[harness]``; ``HarnessConfig.from_dict``
validates it. An unknown key is a clear one-line error naming the key (a typo in a
config must never silently fall back to a default).

    [harness]
    mode = "evolving"                 # or "fixed": diagnoses and logs, never changes itself
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

Tables of named plugins merge with the defaults: ``[harness.diagnostics.X]`` (or ``.gates.X``,
``.proposers.X``) tunes or adds one and leaves the others on; ``enabled = false`` switches one
off; and ``replace_diagnostics = true`` makes the configured diagnostics the whole set.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import attrs

MODES = ("fixed", "evolving")


class HarnessConfigError(ValueError):
    """The ``[harness]`` table is malformed (message names the offending key)."""


def _check_keys(cls: type, data: Mapping[str, Any], where: str) -> None:
    known = {f.name for f in attrs.fields(cls)}
    for key in data:
        if key not in known:
            raise HarnessConfigError(
                f"unknown key '{where}.{key}'; known keys: {', '.join(sorted(known))}")


def _table(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise HarnessConfigError(f"{where} must be a table, got {type(value).__name__}")
    return dict(value)


def _num(value: Any, where: str, lo: Optional[float] = None, hi: Optional[float] = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HarnessConfigError(f"{where} must be a number, got {value!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise HarnessConfigError(f"{where} must be in [{lo}, {hi}], got {value!r}")
    return value


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
    plan: tuple[str, ...] = ()  # backtesters in order; empty: every installed one, offline first
    k_steps: int = 10  # RL steps per branch in the online A/B
    replicates: int = 3  # pairs of branches (>= 2 puts training noise in the interval)
    eval_limit: Optional[int] = None  # validation items per branch (None: all)
    min_n: int = 30  # paired items below which no decision is possible
    confidence: float = 0.9  # two-sided CI level
    n_boot: int = 2000
    regression_cap: float = 0.15  # max fraction of paired items that may get worse…
    worse_margin: float = 0.25  # …by more than this (item scores averaged over samples are noisy)
    min_effect: float = -0.03  # the accuracy CI's lower bound must exceed this (non-inferiority)
    fingerprint_check: bool = True  # the targeted diagnosis must fall in treatment
    min_precision: float = 0.7  # offline: a diagnostic/penalty must hit invalid rollouts…
    min_recall: float = 0.5
    max_false_positive: float = 0.2  # …without flagging genuine correct ones
    seed: int = 0

    @classmethod
    def from_dict(cls, data: Any) -> "BacktestConfig":
        data = _table(data, "harness.backtest")
        _check_keys(cls, data, "harness.backtest")
        for k in ("confidence", "regression_cap", "worse_margin", "min_precision", "min_recall", "max_false_positive"):
            if k in data:
                _num(data[k], f"harness.backtest.{k}", 0.0, 1.0)
        for k in ("k_steps", "min_n", "n_boot", "replicates"):
            if k in data and (not isinstance(data[k], int) or isinstance(data[k], bool) or data[k] < 1):
                raise HarnessConfigError(f"harness.backtest.{k} must be a positive integer, got {data[k]!r}")
        if "min_effect" in data:
            _num(data["min_effect"], "harness.backtest.min_effect", -1.0, 1.0)
        if "plan" in data:
            plan = data["plan"]
            if isinstance(plan, str) or not isinstance(plan, (list, tuple)) or not all(isinstance(n, str) and n for n in plan):
                raise HarnessConfigError(f"harness.backtest.plan must be a list of backtester names, got {plan!r}")
            data["plan"] = tuple(plan)
        return cls(**data)


@attrs.frozen(kw_only=True)
class Ablations:
    no_revision: bool = False  # proposers may not add or revise diagnostics
    no_skill_reuse: bool = False  # skill retrieval is off, skills_from ignored
    no_online_backtest: bool = False  # offline replay only

    @classmethod
    def from_dict(cls, data: Any) -> "Ablations":
        data = _table(data, "harness.ablations")
        _check_keys(cls, data, "harness.ablations")
        for k, v in data.items():
            if not isinstance(v, bool):
                raise HarnessConfigError(f"harness.ablations.{k} must be true or false, got {v!r}")
        return cls(**data)


@attrs.frozen(kw_only=True)
class AuditConfig:
    """How much evidence the strict oracle labels (``strict_correct``) for the harness.

    The trainer reads ``rate`` to decide which training rollouts to audit; the harness
    only uses the labels that are there."""

    rate: float = 0.05  # an oracle budget of a few percent of training rollouts
    min_per_step: int = 0
    regrade_rate: float = 0.05  # oracle re-grades an oracle_regrade repair may ask for, per step
    seed: int = 0

    @classmethod
    def from_dict(cls, data: Any) -> "AuditConfig":
        data = _table(data, "harness.audit")
        _check_keys(cls, data, "harness.audit")
        for k in ("rate", "regrade_rate"):
            if k in data:
                data[k] = float(_num(data[k], f"harness.audit.{k}", 0.0, 1.0))
        if "min_per_step" in data and (not isinstance(data["min_per_step"], int) or isinstance(data["min_per_step"], bool)
                                       or data["min_per_step"] < 0):
            raise HarnessConfigError(f"harness.audit.min_per_step must be an integer >= 0, got {data['min_per_step']!r}")
        return cls(**data)


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
    mode: str = "evolving"
    window_steps: int = 10
    diagnose_every: int = 5  # steps between diagnostic passes (and proposal rounds)
    policy_gate_every: int = 0  # steps between policy gates; 0: at every held-out eval
    max_proposals_per_round: int = 1
    cooldown_steps: int = 0  # after a promotion, wait before proposing again
    ledger_new_evidence: float = 0.25  # a rejected proposal returns only if its diagnosis grew by this fraction
    diagnostics: dict[str, dict[str, Any]] = attrs.Factory(lambda: {k: dict(v) for k, v in DEFAULT_DIAGNOSTICS.items()})
    gates: dict[str, dict[str, Any]] = attrs.Factory(lambda: {k: dict(v) for k, v in DEFAULT_GATES.items()})
    proposers: dict[str, dict[str, Any]] = attrs.Factory(lambda: {k: dict(v) for k, v in DEFAULT_PROPOSERS.items()})
    interventions: dict[str, dict[str, Any]] = attrs.Factory(dict)  # per-intervention default overrides
    backtest: BacktestConfig = attrs.Factory(BacktestConfig)
    skills_from: tuple[str, ...] = ()
    ablations: Ablations = attrs.Factory(Ablations)
    audit: AuditConfig = attrs.Factory(AuditConfig)
    priors: bool = False  # warm priors: flaw-/domain-specific diagnostics and proposers join (cold: off)
    replace_diagnostics: bool = False  # the configured diagnostics are the whole set (no defaults)

    @property
    def evolving(self) -> bool:
        return self.mode == "evolving"

    @classmethod
    def from_dict(cls, data: Any) -> "HarnessConfig":
        if isinstance(data, HarnessConfig):
            return data
        data = _table(data, "harness")
        _check_keys(cls, data, "harness")
        out: dict[str, Any] = {}
        mode = data.get("mode", "evolving")
        if mode not in MODES:
            raise HarnessConfigError(f"harness.mode must be one of {', '.join(MODES)}, got {mode!r}")
        out["mode"] = mode
        for k in ("window_steps", "diagnose_every", "policy_gate_every", "max_proposals_per_round", "cooldown_steps"):
            if k in data:
                v = data[k]
                lo = 0 if k in ("policy_gate_every", "cooldown_steps") else 1
                if not isinstance(v, int) or isinstance(v, bool) or v < lo:
                    raise HarnessConfigError(f"harness.{k} must be an integer >= {lo}, got {v!r}")
                out[k] = v
        for k in ("priors", "replace_diagnostics"):
            if k in data:
                if not isinstance(data[k], bool):
                    raise HarnessConfigError(f"harness.{k} must be true or false, got {data[k]!r}")
                out[k] = data[k]
        if "diagnostics" in data and not data.get("replace_diagnostics", False):
            # tuning one diagnostic must not switch off the others; `enabled = false` does that
            data = {**data, "diagnostics": {**{d: {} for d in DEFAULT_DIAGNOSTICS},
                                            **_table(data["diagnostics"], "harness.diagnostics")}}
        for k in ("diagnostics", "gates", "proposers", "interventions"):
            if k in data:
                if k in ("gates", "proposers"):
                    # the standard gates and proposers are always there (validity vetoes must not vanish
                    # because a config tuned one gate); `enabled = false` switches one off explicitly
                    defaults = DEFAULT_GATES if k == "gates" else DEFAULT_PROPOSERS
                    data = {**data, k: {**{g: {} for g in defaults}, **_table(data[k], f"harness.{k}")}}
                table = _table(data[k], f"harness.{k}")
                for name, params in table.items():
                    if params is True:  # `truncation_rate = true` means defaults
                        table[name] = {}
                    elif not isinstance(params, Mapping):
                        raise HarnessConfigError(f"harness.{k}.{name} must be a table of parameters, got {params!r}")
                    else:
                        table[name] = dict(params)
                out[k] = table
        if "backtest" in data:
            out["backtest"] = BacktestConfig.from_dict(data["backtest"])
        if "ablations" in data:
            out["ablations"] = Ablations.from_dict(data["ablations"])
        if "audit" in data:
            out["audit"] = AuditConfig.from_dict(data["audit"])
        if "ledger_new_evidence" in data:
            out["ledger_new_evidence"] = float(_num(data["ledger_new_evidence"], "harness.ledger_new_evidence", 0.0))
        if "skills_from" in data:
            sf = data["skills_from"]
            if isinstance(sf, str):
                sf = [sf]
            if not isinstance(sf, (list, tuple)) or not all(isinstance(s, str) and s for s in sf):
                raise HarnessConfigError(f"harness.skills_from must be a list of store URLs or skill files, got {sf!r}")
            out["skills_from"] = tuple(sf)
        return cls(**out)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as it goes into ``RunStarted.config["harness"]`` (round-trips)."""
        d = attrs.asdict(self, recurse=True)
        d["skills_from"] = list(self.skills_from)
        d["backtest"]["plan"] = list(self.backtest.plan)
        return d
