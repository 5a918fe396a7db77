"""Run configs: TOML files in ``configs/``, validated into attrs classes.

``load_config(path, overrides)`` reads the TOML, applies ``--set key=value`` overrides
(dotted keys; values parsed as TOML literals, else taken as strings), and validates
every table. An unknown key or a wrong type is a one-line ``ConfigError`` naming the
key. ``RunConfig.to_dict()`` is the resolved config that goes into ``RunStarted`` and
``config_hash()`` its sha256.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import types
import typing
from typing import Any, Mapping, Optional, Union

import attrs

from evo_core.config_base import ConfigError, is_suite_definition, tomllib  # noqa: F401 (re-exported)


# --- tables ---------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class RunSection:
    name: str = "run"
    seed: int = 0
    steps: int = 100
    harnesses: tuple[str, ...] = ("evolving",)  # harness arms (evo_core.arms), one run each, same seed and data
    arm: str = ""  # the arm this resolved config is (set by for_arm)
    eval_every: int = 10  # held-out evaluation every N steps (and at the first and last step)
    eval_at_start: bool = True  # evaluate the starting checkpoint (step 0)
    checkpoint_dir: str = ".evo/checkpoints"  # resume checkpoints, one per committed step (older ones GC'd)
    checkpoint_blobs: bool = False  # also put each step's weights in the blob store (PolicyUpdated.checkpoint)
    threads: int = 0  # torch intra-op threads; 0 leaves torch's default
    device: str = "cpu"
    progress: bool = True  # the rich progress display, in a terminal only
    log_every: int = 10  # without a terminal (or progress off): one structlog line every N steps
    trajectories: bool = True  # write rollout trajectories to the blob store (one blob per step)


@attrs.frozen(kw_only=True)
class TaskSection:
    domain: str = "arithmetic"
    train: str = "generate://addition?digits=2&validation=200&test=400&seed=0"
    validation: str = ""  # what gates, backtests and diagnostics read; default: the train source, split "validation"
    test: str = ""  # read by nothing but the report; default: the train source, split "test"
    validation_limit: Optional[int] = None
    test_limit: Optional[int] = None
    validation_fraction: float = 0.0  # > 0: carve validation from train by a stable hash of task ids
    reward: str = "verifier"  # "verifier" trains on the domain's verifier; "oracle" on its strict oracle (the reference)
    format: str = "auto"
    options: dict[str, Any] = attrs.Factory(dict)  # passed to the domain's ``configure`` when it has one


@attrs.frozen(kw_only=True)
class TinySection:
    arch: str = "llama"
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 4
    intermediate_size: int = 512
    max_positions: int = 128
    tie_embeddings: bool = True
    chars: str = "0123456789+-=, "


@attrs.frozen(kw_only=True)
class LoraSection:
    enabled: bool = False
    r: int = 8
    alpha: int = 16
    dropout: float = 0.0
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


@attrs.frozen(kw_only=True)
class PolicySection:
    kind: str = "tiny"  # "tiny" (embedded, built from [policy.tiny]) | "hf" (a local transformers directory)
    path: str = ""
    dtype: str = ""  # "", "float32", "bfloat16"
    tiny: TinySection = attrs.Factory(TinySection)
    lora: LoraSection = attrs.Factory(LoraSection)


@attrs.frozen(kw_only=True)
class SFTSection:
    enabled: bool = False
    steps: int = 500
    batch_size: int = 128
    lr: float = 1e-3
    warmup_steps: int = 50
    min_lr: float = 1e-4
    weight_decay: float = 0.0
    options: dict[str, Any] = attrs.Factory(dict)  # passed to the domain's ``sft_target`` (e.g. the share of targets that plant the flaw)
    cache_dir: str = ".evo/cache/sft"  # SFT checkpoints keyed by config hash; "" disables the cache
    # the warm start's own seed (its initial weights, batches and plants); unset = run.seed. Set, every
    # run seed RL-trains from one warm start, as runs from one base model do.
    seed: Optional[int] = None


@attrs.frozen(kw_only=True)
class RLSection:
    algorithm: str = "grpo"  # grpo | dr_grpo | dapo
    prompts_per_step: int = 32
    group_size: int = 8
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 8
    stop: tuple[str, ...] = ()
    lr: float = 1e-4
    warmup_steps: int = 30
    lr_schedule: str = "constant"  # constant | cosine (to min_lr over run.steps)
    min_lr: float = 0.0
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    clip_low: float = 0.2
    clip_high: Optional[float] = None  # None: clip_low, or 0.28 for dapo (clip-higher)
    kl_coef: float = 0.0
    updates_per_step: int = 1  # optimizer steps (minibatches) per RL step
    micro_batch_size: int = 0  # sequences per forward (gradient accumulation); 0: whole minibatch
    # the update scores a group's prompt once and shares its cache (same function; float sums in
    # another order, so false reproduces runs logged before it bit for bit)
    shared_prompt_forward: bool = True
    scale_rewards: Optional[bool] = None  # divide advantages by the group std; None: by algorithm
    loss_agg: str = ""  # seq_mean_token_mean | token_mean | seq_mean_token_sum_norm; "": by algorithm
    dynamic_sampling: Optional[bool] = None  # drop zero-variance groups; None: by algorithm (dapo: on)
    dynamic_sampling_rounds: int = 0  # extra sampling rounds to refill the batch with informative groups
    overlong: str = "none"  # none | filter (mask truncated) | soft (DAPO soft penalty)
    overlong_buffer: int = 2  # tokens before the limit where the soft penalty ramps in
    overlong_penalty: float = 1.0
    rollout: str = "single"  # single (one sampled completion) | episode (the domain's run_episode, multi-turn)
    episode_max_turns: int = 0  # episode: at most this many policy replies; 0: the domain's own budget


@attrs.frozen(kw_only=True)
class EvalSection:
    samples: int = 4  # sampled completions per held-out item (item score = fraction strictly correct)
    temperature: float = 1.0
    greedy: bool = True  # also score the greedy completion
    max_new_tokens: int = 0  # 0: the RL setting
    test_every: int = 0  # test-split evaluation every N steps for the report (0: with every validation eval)


@attrs.frozen(kw_only=True)
class RunConfig:
    run: RunSection = attrs.Factory(RunSection)
    task: TaskSection = attrs.Factory(TaskSection)
    policy: PolicySection = attrs.Factory(PolicySection)
    sft: SFTSection = attrs.Factory(SFTSection)
    rl: RLSection = attrs.Factory(RLSection)
    eval: EvalSection = attrs.Factory(EvalSection)
    harness: dict[str, Any] = attrs.Factory(dict)  # validated by evo_core.harness.config when installed
    sinks: dict[str, Any] = attrs.Factory(dict)  # passed to evo_register_sinks
    distributed: dict[str, Any] = attrs.Factory(dict)  # read by evo_core.trainer.distributed
    rollout: dict[str, Any] = attrs.Factory(dict)  # rollout engine settings (e.g. an HTTP server)

    def to_dict(self) -> dict[str, Any]:
        return _unstructure(self)

    @property
    def mode(self) -> str:
        return str(self.harness.get("mode", "evolving"))

    def for_arm(self, arm: str) -> "RunConfig":
        """This config as one run of harness arm ``arm`` (``evo_core.arms``): its overlay
        deep-merged in. The result is the resolved config of that run."""
        from evo_core.arms import ArmError, deep_merge, overlay

        try:
            over = overlay(arm)
        except ArmError as exc:
            raise ConfigError(str(exc)) from None
        data = deep_merge(self.to_dict(), over)
        data["run"] = {**data["run"], "harnesses": [arm], "arm": arm}
        return config_from_dict(data)

    def for_harness(self, mode: str) -> "RunConfig":
        """The plain ``fixed`` or ``evolving`` arm."""
        return self.for_arm(mode)

    def config_hash(self) -> str:
        return config_hash(self.to_dict())


def config_hash(d: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(d, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


# --- validation -----------------------------------------------------------------------------

_ALLOWED = {
    ("rl", "algorithm"): ("grpo", "dr_grpo", "dapo"),
    ("rl", "lr_schedule"): ("constant", "cosine"),
    ("rl", "overlong"): ("none", "filter", "soft"),
    ("rl", "rollout"): ("single", "episode"),
    ("rl", "loss_agg"): ("", "seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm"),
    ("policy", "kind"): ("tiny", "hf"),
    ("policy", "tiny", "arch"): ("llama", "qwen2"),
    ("policy", "dtype"): ("", "float32", "float16", "bfloat16"),
    ("task", "reward"): ("verifier", "oracle"),
}
_POSITIVE = {("run", "steps"), ("rl", "prompts_per_step"), ("rl", "group_size"), ("rl", "max_new_tokens"),
             ("rl", "updates_per_step"), ("run", "eval_every"), ("sft", "batch_size"), ("sft", "steps"),
             ("run", "log_every")}
# Finite and >= 0: a NaN or negative learning rate or temperature trains garbage without an error.
_NON_NEGATIVE = {("rl", "lr"), ("rl", "min_lr"), ("sft", "lr"), ("sft", "min_lr"), ("rl", "temperature"),
                 ("eval", "temperature"), ("rl", "kl_coef"), ("rl", "grad_clip")}
MODES = ("fixed", "evolving")  # what an arm's [harness] mode is


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp)).replace("typing.", "")


def _coerce(value: Any, tp: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], key)
    if attrs.has(tp):
        return _structure(tp, value, key)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"config key {key!r} must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"config key {key!r} must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"config key {key!r} must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"config key {key!r} must be a string, got {value!r}")
        return value
    if origin is tuple:
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise ConfigError(f"config key {key!r} must be a list, got {value!r}")
        (elem, *_rest) = typing.get_args(tp)
        return tuple(_coerce(v, elem, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"config key {key!r} must be a table, got {value!r}")
        return dict(value)
    return value


def _structure(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise ConfigError(f"config key {where!r} must be a table, got {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in attrs.fields(cls)}
    kw = {}
    for key, value in data.items():
        full = f"{where}.{key}" if where else key
        if key not in fields:
            raise ConfigError(f"unknown config key {full!r} (known keys in {where or 'the top level'}: {', '.join(fields)})")
        kw[key] = _coerce(value, hints[key], full)
        path = tuple(full.split("."))
        if path in _ALLOWED and kw[key] not in _ALLOWED[path]:
            raise ConfigError(f"config key {full!r} must be one of {', '.join(map(repr, _ALLOWED[path]))}, got {kw[key]!r}")
        if path in _POSITIVE and kw[key] < 1:
            raise ConfigError(f"config key {full!r} must be >= 1, got {kw[key]!r}")
        if path in _NON_NEGATIVE and not (math.isfinite(kw[key]) and kw[key] >= 0):
            raise ConfigError(f"config key {full!r} must be a finite number >= 0, got {kw[key]!r}")
    return cls(**kw)


def _validate_harness(h: Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``[harness]`` with the harness engine's own schema when it is installed."""
    try:
        from evo_core.harness.config import HarnessConfig
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("evo_core.harness"):
            raise
        return dict(h)
    try:
        return HarnessConfig.from_dict(dict(h)).to_dict()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _unstructure(obj: Any) -> Any:
    if attrs.has(type(obj)):
        return {f.name: _unstructure(getattr(obj, f.name)) for f in attrs.fields(type(obj))}
    if isinstance(obj, (list, tuple)):
        return [_unstructure(v) for v in obj]
    if isinstance(obj, Mapping):
        return {k: _unstructure(v) for k, v in obj.items()}
    return obj


def parse_override(item: str) -> tuple[list[str], Any]:
    """``rl.lr=3e-4`` → (["rl", "lr"], 0.0003). Values are TOML literals; a bare word is a string."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected key=value")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {item!r}: bad key {key!r}")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key.split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    data = json.loads(json.dumps(data))
    for item in overrides:
        path, value = parse_override(item)
        node = data
        for i, part in enumerate(path[:-1]):
            nxt = node.setdefault(part, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"--set {item!r}: {'.'.join(path[:i + 1])!r} is not a table")
            node = nxt
        node[path[-1]] = value
    return data


def config_from_dict(data: Mapping[str, Any]) -> RunConfig:
    data = dict(data)
    harness = data.pop("harness", {}) or {}
    if not isinstance(harness, Mapping):
        raise ConfigError(f"config key 'harness' must be a table, got {harness!r}")
    cfg = _structure(RunConfig, data, "")
    from evo_core.arms import ARMS

    for arm in cfg.run.harnesses:
        if arm not in ARMS:
            raise ConfigError(f"config key 'run.harnesses' entries must be harness arms ({', '.join(ARMS)}), got {arm!r}")
    if not cfg.run.harnesses:
        raise ConfigError("config key 'run.harnesses' must list at least one harness arm")
    if cfg.policy.kind == "hf" and not cfg.policy.path:
        raise ConfigError("config key 'policy.path' is required when policy.kind = 'hf' (a local model directory)")
    from evo_core.trainer.dist_settings import DistributedConfigError, DistributedSettings

    try:  # the [distributed] semantics live with the trainer; a bad key fails here, before anything is built
        DistributedSettings.from_mapping(cfg.distributed)
    except DistributedConfigError as exc:
        raise ConfigError(str(exc)) from None
    return attrs.evolve(cfg, harness=_validate_harness(harness))


def load_config(path: str, overrides: Optional[list[str]] = None, *, plugins: Any = None,
                check: bool = True) -> RunConfig:
    """Read, override and validate a config file. ``check``: also the ``[rollout]`` and
    ``[distributed]`` tables and the installed plugins it names (``evo_core.config_checks``,
    against ``plugins`` or the process-wide manager), so a typo fails before any training."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path!r} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path!r} is not valid TOML: {exc}") from None
    if is_suite_definition(data):
        raise ConfigError(f"{path!r} defines a flaw suite, not a run: run it with "
                          f"'python -m benchmarks.evolution --suite --suite-file {path}'")
    cfg = config_from_dict(apply_overrides(data, list(overrides or [])))
    if check:
        from evo_core.config_checks import check_config

        check_config(cfg, plugins)
    return cfg
