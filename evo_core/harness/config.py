"""``[harness]`` config: the typed, validated settings of the harness engine.

The trainer's run config embeds this table as ``[harness]``; ``HarnessConfig.from_dict``
validates it. An unknown key is a clear one-line error naming the key (a typo in a
config must never silently fall back to a default).

    [harness]
    mode = "evolving"                 # or "fixed": diagnoses and logs, never changes itself
    window_steps = 10                 # evidence window (steps of rollouts) a diagnostic reads
    diagnose_every = 5
    skills_from = []                  # store URLs ("sqlite:///x.sqlite") or skill files (.json)
    [harness.diagnostics.answer_hedging]
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
    rate = 0.25
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
    """Offline replay and the online control/treatment fork."""

    offline: bool = True
    online: bool = True
    k_steps: int = 10  # RL steps per branch in the online A/B
    eval_limit: Optional[int] = None  # held-out items per branch (None: all)
    min_n: int = 30  # paired items below which no decision is possible
    confidence: float = 0.9  # two-sided bootstrap CI level
    n_boot: int = 2000
    regression_cap: float = 0.15  # max fraction of paired items that may get worse…
    worse_margin: float = 0.0  # …by more than this (item scores averaged over samples are noisy)
    min_effect: float = 0.0  # CI lower bound must exceed this
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
        for k in ("k_steps", "min_n", "n_boot"):
            if k in data and (not isinstance(data[k], int) or isinstance(data[k], bool) or data[k] < 1):
                raise HarnessConfigError(f"harness.backtest.{k} must be a positive integer, got {data[k]!r}")
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

    rate: float = 0.25
    min_per_step: int = 8
    seed: int = 0

    @classmethod
    def from_dict(cls, data: Any) -> "AuditConfig":
        data = _table(data, "harness.audit")
        _check_keys(cls, data, "harness.audit")
        if "rate" in data:
            _num(data["rate"], "harness.audit.rate", 0.0, 1.0)
        return cls(**data)


DEFAULT_DIAGNOSTICS: dict[str, dict[str, Any]] = {
    "zero_variance_groups": {},
    "truncation_rate": {},
    "length_inflation": {},
    "entropy_collapse": {},
    "repetition_loops": {},
    "format_violations": {},
    "answer_hedging": {},
    "reward_oracle_gap": {},
    "reward_heldout_divergence": {},
    "tool_errors": {},
    "swe_test_tampering": {},
    "swe_git_mining": {},
    "code_special_casing": {},
}

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
    proposers: dict[str, dict[str, Any]] = attrs.Factory(lambda: {"skills": {}, "rules": {}})
    interventions: dict[str, dict[str, Any]] = attrs.Factory(dict)  # per-intervention default overrides
    backtest: BacktestConfig = attrs.Factory(BacktestConfig)
    skills_from: tuple[str, ...] = ()
    ablations: Ablations = attrs.Factory(Ablations)
    audit: AuditConfig = attrs.Factory(AuditConfig)

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
        for k in ("diagnostics", "gates", "proposers", "interventions"):
            if k in data:
                if k == "gates":
                    # the standard gates are always there (validity vetoes must not vanish because a
                    # config tuned one gate); `enabled = false` switches one off explicitly
                    data = {**data, "gates": {**{g: {} for g in DEFAULT_GATES}, **_table(data["gates"], "harness.gates")}}
                table = _table(data[k], f"harness.{k}")
                for name, params in table.items():
                    if params is True:  # `answer_hedging = true` means defaults
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
        return d
