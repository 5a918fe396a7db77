"""Assembling a run from its config: the domain, its three splits, the policy (with the SFT
warm start), the rollout engine and the RL session."""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Optional

import attrs

from evo_core import signal_names
from evo_core.api import TaskSource
from evo_core.config import RunConfig
from evo_core.plugins import PluginError, PluginManager


class RunError(RuntimeError):
    """A run could not start, resume or continue (one-line message)."""


def build_domain(cfg: RunConfig, plugins: PluginManager) -> tuple[Any, str]:
    try:
        domain = plugins.domain(cfg.task.domain)
    except PluginError as exc:
        raise RunError(str(exc)) from None
    if hasattr(domain, "configure"):
        try:
            domain = domain.configure(dict(cfg.task.options))
        except ValueError as exc:
            raise RunError(f"task.options: {exc}") from None
    elif cfg.task.options:
        raise RunError(f"domain {cfg.task.domain!r} takes no [task] options (it has no configure())")
    plugin = plugins.plugin_of("evo_register_domains", cfg.task.domain) or cfg.task.domain
    return domain, plugin


@attrs.frozen
class Splits:
    train: list[Any]
    validation: list[Any]
    test: list[Any]


def _carved(task_id: str, fraction: float) -> bool:
    return int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < fraction


def load_splits(cfg: RunConfig, domain: Any) -> Splits:
    """Three disjoint splits: train, validation (what the harness may read) and test (what
    only the report reads). ``task.validation_fraction`` carves validation out of train by a
    stable hash of task ids. A task id in two splits is an error, not a warning."""
    t = cfg.task

    def load(split: str, path: str, limit: Optional[int]) -> list[Any]:
        return domain.load_tasks(TaskSource(path=path or t.train, format=t.format, split=split, limit=limit))

    try:
        train = load("train", t.train, None)
        if t.validation_fraction > 0 and not t.validation:
            validation = [x for x in train if _carved(x.task_id, t.validation_fraction)][: t.validation_limit]
            train = [x for x in train if not _carved(x.task_id, t.validation_fraction)]
        else:
            validation = load("validation", t.validation, t.validation_limit)
        splits = Splits(train, validation, load("test", t.test, t.test_limit))
    except (OSError, ValueError) as exc:
        raise RunError(f"cannot load tasks: {exc}") from None
    if not splits.train:
        raise RunError(f"task source {t.train!r} gave no training tasks")
    ids = {name: {x.task_id for x in getattr(splits, name)} for name in ("train", "validation", "test")}
    for a, b in (("train", "validation"), ("train", "test"), ("validation", "test")):
        both = ids[a] & ids[b]
        if both:
            hint = " (set task.validation_fraction to carve validation out of train)" if a == "train" else ""
            raise RunError(f"the {a} and {b} splits share {len(both)} task(s), e.g. {sorted(both)[0]!r}: "
                           f"the splits must be disjoint{hint}")
    return splits


def warm_start_seed(cfg: RunConfig) -> int:
    """The seed of the weights RL starts from: ``sft.seed`` where the warm start has its own."""
    return cfg.sft.seed if cfg.sft.enabled and cfg.sft.seed is not None else cfg.run.seed


def build_policy(cfg: RunConfig) -> Any:
    from evo_core.trainer.policy import HFPolicy, LoraSettings, PolicyLoadError
    from evo_core.trainer.tiny import TinyModelConfig

    p = cfg.policy
    if p.kind == "tiny":
        return HFPolicy.tiny(TinyModelConfig(**attrs.asdict(p.tiny)), seed=warm_start_seed(cfg), device=cfg.run.device)
    lora = LoraSettings(r=p.lora.r, alpha=p.lora.alpha, dropout=p.lora.dropout,
                        target_modules=tuple(p.lora.target_modules)) if p.lora.enabled else None
    try:
        return HFPolicy.from_pretrained(p.path, device=cfg.run.device, lora=lora, dtype=p.dtype or None)
    except PolicyLoadError as exc:
        raise RunError(str(exc)) from None


def check_fits(cfg: RunConfig, policy: Any, splits: Splits) -> None:
    """``evo_core.trainer.fit``'s checks: the longest prompt plus ``max_new_tokens`` within the
    model's context window; on a CUDA device, the training and rollout memory within it."""
    from evo_core.trainer.fit import FitError, check_run_fits, cuda_device_bytes
    from evo_core.trainer.ranks import detect

    ranked = detect()
    try:
        check_run_fits(cfg, policy, [*splits.train, *splits.validation, *splits.test],
                       eval_items=max(len(splits.validation), len(splits.test)), world_size=ranked.world_size if ranked else 1, launched=ranked is not None,
                       device_bytes=cuda_device_bytes(cfg.run.device), device=cfg.run.device)
    except FitError as exc:
        raise RunError(str(exc)) from None


def build_session(cfg: RunConfig, plugins: PluginManager, *, sft: bool = True,
                  on_sft_step: Optional[Callable[[int, float], None]] = None) -> tuple[Any, dict[str, Any]]:
    """Domain, splits, policy (with the SFT warm start when configured) and the RL session."""
    from evo_core.harness.config import AuditConfig, OracleConfig
    from evo_core.trainer.oracle import budget_labels
    from evo_core.trainer.session import RLSession
    from evo_core.trainer.sft import warm_start

    if cfg.run.threads:
        import torch

        torch.set_num_threads(cfg.run.threads)
    domain, domain_plugin = build_domain(cfg, plugins)
    splits = load_splits(cfg, domain)
    policy = build_policy(cfg)
    if cfg.policy.kind == "hf":  # a real model: its context window and the device, before any training
        check_fits(cfg, policy, splits)
    sft_info: dict[str, Any] = {}
    if cfg.sft.enabled and sft:
        # renaming signals changes nothing SFT trains on, so the run seeds of a shared warm start share its key
        options = {k: v for k, v in cfg.task.options.items() if k not in signal_names.OPTIONS}
        key_parts = {"policy": attrs.asdict(cfg.policy), "domain": [domain.name, getattr(domain, "version", "")],
                     "task": cfg.task.train, "task_options": options}
        sft_info = warm_start(policy, domain, splits.train, cfg.sft, seed=warm_start_seed(cfg), key_parts=key_parts,
                              on_step=on_sft_step)
    audit = AuditConfig.from_dict(dict(cfg.harness.get("audit") or {}))
    engine = None
    if cfg.rollout:  # an HTTP (vLLM/SGLang/evo serve) or vLLM engine instead of sampling in process
        from evo_core.trainer.engine_factory import build_rollout_engine, with_defaults

        try:
            engine = build_rollout_engine(with_defaults(cfg.rollout, cfg.policy.path), policy)
        except ValueError as exc:
            raise RunError(str(exc)) from None
    session = RLSession(policy=policy, domain=domain, train_tasks=splits.train, validation_tasks=splits.validation,
                        test_tasks=splits.test, rl=cfg.rl, eval_cfg=cfg.eval, seed=cfg.run.seed,
                        total_steps=cfg.run.steps, plugins=plugins, audit_rate=audit.rate, audit_min=audit.min_per_step,
                        regrade_rate=audit.regrade_rate, engine=engine, reward=cfg.task.reward)
    session.domain_plugin = domain_plugin  # type: ignore[attr-defined]
    # the cap on decision-relevant oracle labels ([harness.oracle] budget), shared with every fork
    share = OracleConfig.from_dict(dict(cfg.harness.get("oracle") or {})).budget
    if share is not None:
        session.oracle.counts.limit = budget_labels(share, prompts_per_step=cfg.rl.prompts_per_step,
                                                    group_size=cfg.rl.group_size, steps=cfg.run.steps)
    # the domain's words in trajectory features (tool names, path classes) are renamed like its signals
    session.signal_naming = (str(cfg.task.options.get("signal_names", "plain")),  # type: ignore[attr-defined]
                             int(cfg.task.options.get("signal_seed", 0) or 0))
    return session, sft_info
