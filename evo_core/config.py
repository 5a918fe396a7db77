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
from typing import Any, Mapping, Optional

import attrs

from evo_core.config_base import ConfigError, is_suite_definition, tomllib  # noqa: F401 (re-exported)
from evo_core.config_schema import count, matches, non_empty, number, one_of, structure


# --- tables ---------------------------------------------------------------------------------
# Each field's range is its attrs validator (evo_core.config_schema); cattrs structures the TOML.

F = attrs.field
_DEVICE = r"(cpu|cuda|mps|xpu|hpu|npu|meta)(:\d+)?"


@attrs.frozen(kw_only=True)
class RunSection:
    name: str = "run"
    seed: int = F(default=0, validator=count(0))
    steps: int = F(default=100, validator=count(1))
    harnesses: tuple[str, ...] = ("evolving",)  # harness arms (evo_core.arms), one run each, same seed and data
    arm: str = ""  # the arm this resolved config is (set by for_arm)
    eval_every: int = F(default=10, validator=count(1))  # held-out evaluation every N steps (and at the first and last step)
    eval_at_start: bool = True  # evaluate the starting checkpoint (step 0)
    checkpoint_dir: str = ".evo/checkpoints"  # resume checkpoints, one per committed step (older ones GC'd)
    checkpoint_blobs: bool = False  # also put each step's weights in the blob store (PolicyUpdated.checkpoint)
    threads: int = F(default=0, validator=count(0))  # torch intra-op threads; 0 leaves torch's default
    device: str = F(default="cpu", validator=matches(_DEVICE, "a torch device such as 'cpu', 'cuda' or 'cuda:0'"))
    progress: bool = True  # the rich progress display, in a terminal only
    log_every: int = F(default=10, validator=count(1))  # without a terminal (or progress off): one structlog line every N steps
    trajectories: bool = True  # write rollout trajectories to the blob store (one blob per step)


@attrs.frozen(kw_only=True)
class TaskSection:
    domain: str = "arithmetic"
    train: str = "generate://addition?digits=2&validation=200&test=400&seed=0"
    validation: str = ""  # what gates, backtests and diagnostics read; default: the train source, split "validation"
    test: str = ""  # read by nothing but the report; default: the train source, split "test"
    validation_limit: Optional[int] = F(default=None, validator=count(0))
    test_limit: Optional[int] = F(default=None, validator=count(0))
    # > 0: carve validation from train by a stable hash of task ids
    validation_fraction: float = F(default=0.0, validator=number(0, 1, hi_open=True))
    # "verifier" trains on the domain's verifier; "oracle" on its strict oracle (the reference)
    reward: str = F(default="verifier", validator=one_of("verifier", "oracle"))
    format: str = "auto"
    options: dict[str, Any] = attrs.Factory(dict)  # passed to the domain's ``configure`` when it has one


@attrs.frozen(kw_only=True)
class TinySection:
    arch: str = F(default="llama", validator=one_of("llama", "qwen2"))
    hidden_size: int = F(default=128, validator=count(1))
    num_layers: int = F(default=4, validator=count(1))
    num_heads: int = F(default=4, validator=count(1))
    num_kv_heads: int = F(default=4, validator=count(1))
    intermediate_size: int = F(default=512, validator=count(1))
    max_positions: int = F(default=128, validator=count(1))
    tie_embeddings: bool = True
    chars: str = F(default="0123456789+-=, ", validator=non_empty)


@attrs.frozen(kw_only=True)
class LoraSection:
    enabled: bool = False
    r: int = F(default=8, validator=count(1))
    alpha: int = F(default=16, validator=count(1))
    dropout: float = F(default=0.0, validator=number(0, 1, hi_open=True))
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


@attrs.frozen(kw_only=True)
class PolicySection:
    # "tiny" (embedded, built from [policy.tiny]) | "hf" (a local transformers directory)
    kind: str = F(default="tiny", validator=one_of("tiny", "hf"))
    path: str = ""
    dtype: str = F(default="", validator=one_of("", "float32", "float16", "bfloat16"))
    tiny: TinySection = attrs.Factory(TinySection)
    lora: LoraSection = attrs.Factory(LoraSection)


@attrs.frozen(kw_only=True)
class SFTSection:
    enabled: bool = False
    steps: int = F(default=500, validator=count(1))
    batch_size: int = F(default=128, validator=count(1))
    lr: float = F(default=1e-3, validator=number(0))
    warmup_steps: int = F(default=50, validator=count(0))
    min_lr: float = F(default=1e-4, validator=number(0))
    weight_decay: float = F(default=0.0, validator=number(0))
    options: dict[str, Any] = attrs.Factory(dict)  # passed to the domain's ``sft_target`` (e.g. the share of targets that plant the flaw)
    cache_dir: str = ".evo/cache/sft"  # SFT checkpoints keyed by config hash; "" disables the cache
    # the warm start's own seed (its initial weights, batches and plants); unset = run.seed. Set, every
    # run seed RL-trains from one warm start, as runs from one base model do.
    seed: Optional[int] = F(default=None, validator=count(0))


@attrs.frozen(kw_only=True)
class RLSection:
    algorithm: str = F(default="grpo", validator=one_of("grpo", "dr_grpo", "dapo"))
    prompts_per_step: int = F(default=32, validator=count(1))
    group_size: int = F(default=8, validator=count(1))
    temperature: float = F(default=1.0, validator=number(0))
    top_p: float = F(default=1.0, validator=number(0, 1, lo_open=True))
    max_new_tokens: int = F(default=8, validator=count(1))
    stop: tuple[str, ...] = ()
    lr: float = F(default=1e-4, validator=number(0))
    warmup_steps: int = F(default=30, validator=count(0))
    # constant | cosine (to min_lr over run.steps)
    lr_schedule: str = F(default="constant", validator=one_of("constant", "cosine"))
    min_lr: float = F(default=0.0, validator=number(0))
    weight_decay: float = F(default=0.0, validator=number(0))
    grad_clip: float = F(default=1.0, validator=number(0))
    clip_low: float = F(default=0.2, validator=number(0))
    clip_high: Optional[float] = F(default=None, validator=number(0))  # None: clip_low, or 0.28 for dapo (clip-higher)
    kl_coef: float = F(default=0.0, validator=number(0))
    updates_per_step: int = F(default=1, validator=count(1))  # optimizer steps (minibatches) per RL step
    micro_batch_size: int = F(default=0, validator=count(0))  # sequences per forward (gradient accumulation); 0: whole minibatch
    # the update scores a group's prompt once and shares its cache (same function; float sums in
    # another order, so false reproduces runs logged before it bit for bit)
    shared_prompt_forward: bool = True
    scale_rewards: Optional[bool] = None  # divide advantages by the group std; None: by algorithm
    # seq_mean_token_mean | token_mean | seq_mean_token_sum_norm; "": by algorithm
    loss_agg: str = F(default="", validator=one_of("", "seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm"))
    dynamic_sampling: Optional[bool] = None  # drop zero-variance groups; None: by algorithm (dapo: on)
    dynamic_sampling_rounds: int = F(default=0, validator=count(0))  # extra sampling rounds to refill the batch with informative groups
    overlong: str = F(default="none", validator=one_of("none", "filter", "soft"))  # none | filter (mask truncated) | soft (DAPO soft penalty)
    overlong_buffer: int = F(default=2, validator=count(0))  # tokens before the limit where the soft penalty ramps in
    overlong_penalty: float = F(default=1.0, validator=number(0))
    # single (one sampled completion) | episode (the domain's run_episode, multi-turn)
    rollout: str = F(default="single", validator=one_of("single", "episode"))
    episode_max_turns: int = F(default=0, validator=count(0))  # episode: at most this many policy replies; 0: the domain's own budget


@attrs.frozen(kw_only=True)
class EvalSection:
    samples: int = F(default=4, validator=count(0))  # sampled completions per held-out item (item score = fraction strictly correct)
    temperature: float = F(default=1.0, validator=number(0))
    greedy: bool = True  # also score the greedy completion
    max_new_tokens: int = F(default=0, validator=count(0))  # 0: the RL setting
    test_every: int = F(default=0, validator=count(0))  # test-split evaluation every N steps for the report (0: with every validation eval)


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
        """The harness mode: set by the run's arm (``for_arm``); an unresolved config is evolving."""
        return str(self.harness.get("mode") or "evolving")

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

MODES = ("fixed", "evolving")  # what an arm's [harness] mode is


def _check_mode(mode: Any, arms: tuple[str, ...]) -> None:
    """The run arm sets ``[harness] mode``; a config may leave it out, or name the same mode
    as every arm it runs. A conflict is an error, not a silent overwrite."""
    if not mode:
        return
    from evo_core.arms import ArmError, mode_of

    for arm in arms:
        try:
            arm_mode = mode_of(arm)
        except ArmError as exc:
            raise ConfigError(str(exc)) from None
        if arm_mode and arm_mode != mode:
            raise ConfigError(f"config key 'harness.mode' is {mode!r}, but run arm {arm!r} runs {arm_mode!r}: "
                              f"the arm sets the mode, so leave harness.mode out of the config")


def _validate_harness(h: Mapping[str, Any]) -> dict[str, Any]:
    """``[harness]`` through the same schema (its tables of named plugins merged with the defaults)."""
    from evo_core.harness.config import HarnessConfig

    try:
        return HarnessConfig.from_dict(dict(h)).to_dict()
    except ConfigError as exc:
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
    cfg = structure(RunConfig, data)
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
    checked = _validate_harness(harness)
    _check_mode(checked.get("mode"), cfg.run.harnesses)
    return attrs.evolve(cfg, harness=checked)


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
