"""Does this run fit its model and its device? Two checks a real model needs before any
training, each failing with one line that says what to change:

- ``check_context``: ``max_new_tokens`` plus the longest prompt of the task files must fit the
  model's context window (``max_position_embeddings``), or the run would fail (or silently
  truncate) hours in, at the first long prompt;
- ``check_memory``: the weights, gradients and optimizer state the training engine keeps, the
  KV cache of in-process rollouts and the update's activations must fit the device, or the
  run dies of an out-of-memory error after the SFT warm start.

The memory figures are estimates from the model's config (documented per term in
``MemoryPlan``), not measurements: good to a few GiB, which is what deciding a batch size needs.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import attrs

GIB = 2**30
HEADROOM = 0.92  # the share of a device's memory a run may plan for (CUDA context, allocator slack)
SAMPLE_CHUNK_ROWS = 1024  # HFPolicy.sample's chunk_size: the rows sampled at once


class FitError(ValueError):
    """The run does not fit its model's context window or its device (one line)."""


def context_window(model_config: Any) -> Optional[int]:
    """The model's context window from its transformers config (None when it names none)."""
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        v = getattr(model_config, key, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def longest_prompt(policy: Any, tasks: Sequence[Any]) -> tuple[int, str]:
    """(tokens, task id) of the longest prompt as the sampler encodes it (BOS included)."""
    best, which = 0, ""
    for t in tasks:
        n = len(policy.encode_prompt(t.prompt))
        if n > best:
            best, which = n, t.task_id
    return best, which


def check_context(*, window: Optional[int], max_new_tokens: int, prompt_tokens: int, prompt_task: str,
                  model: str, key: str = "rl.max_new_tokens") -> None:
    if window is None or prompt_tokens + max_new_tokens <= window:
        return
    room = window - prompt_tokens
    fix = f"set {key} <= {room}" if room > 0 else "shorten the prompts (they alone fill the window)"
    raise FitError(f"{key} = {max_new_tokens} plus the longest prompt ({prompt_tokens} tokens, task {prompt_task!r}) "
                   f"is {max_new_tokens + prompt_tokens} tokens, more than the context window of {model} "
                   f"({window}, max_position_embeddings): {fix}")


@attrs.frozen(kw_only=True)
class MemoryPlan:
    """Bytes one rank needs, by term.

    - ``weights``: the policy replica every rank keeps (parameters x dtype bytes);
    - ``gradients``: the engine's gradients: the parameter dtype in process / ZeRO-1, fp32 and
      sharded over the ranks from ZeRO-2 (plus a bf16 bucket, counted as the dtype copy);
    - ``optimizer``: AdamW's two moments in the parameter dtype in process; fp32 moments and an
      fp32 master copy, sharded over the ranks, under a DeepSpeed bf16/fp16 configuration;
    - ``kv_cache``: in-process rollouts and evaluation: rows sampled at once x (prompt + new tokens) x layers x
      2 (K, V) x KV heads x head dim x dtype bytes, plus the decode step's fp32 logits;
    - ``activations``: the update's forward/backward for one micro-batch: fp32 logits and their
      log-softmax (2 x 4 bytes x vocab per token), plus ~34 bytes x hidden per token and layer
      (Korthikanti et al. 2022, with fused attention; dtype bytes x hidden with checkpointing);
    - ``reserved``: what another tenant of the device takes (vLLM's ``gpu_memory_utilization``).
    """

    weights: int
    gradients: int
    optimizer: int
    kv_cache: int
    activations: int
    reserved: int = 0
    rows: int = 0
    seq: int = 0
    micro_batch: int = 0

    @property
    def total(self) -> int:
        """The peak: what stays (weights, gradients, optimizer, another tenant's share) plus the
        larger of sampling's KV cache and the update's activations (they never coexist)."""
        return self.weights + self.gradients + self.optimizer + self.reserved + max(self.kv_cache, self.activations)


def plan_memory(model_config: Any, n_params: int, *, dtype_bytes: int, world_size: int, engine: str, zero_stage: int,
                precision: str, rollout: str, rows: int, seq: int, micro_batch: int, gradient_checkpointing: bool,
                vllm_share: float = 0.0, device_bytes: int = 0) -> MemoryPlan:
    W, P, b = max(1, world_size), n_params, dtype_bytes
    c = model_config
    layers = int(getattr(c, "num_hidden_layers", 0) or 0)
    hidden = int(getattr(c, "hidden_size", 0) or 0)
    heads = int(getattr(c, "num_attention_heads", 1) or 1)
    kv_heads = int(getattr(c, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(c, "head_dim", None) or (hidden // heads if heads else 0))
    vocab = int(getattr(c, "vocab_size", 0) or 0)
    if engine == "deepspeed":
        mixed = precision in ("bf16", "fp16")
        optimizer = (12 if mixed else 8) * P // W
        gradients = P * b if zero_stage < 2 else 4 * P // W + (P * b // W if mixed else 0)
        if zero_stage == 3:
            gradients += P * b // W  # the engine's partitioned copy of the trained parameters
    else:
        optimizer, gradients = 2 * P * b, P * b
    kv = 0
    if rollout == "inprocess":
        kv = rows * seq * layers * 2 * kv_heads * head_dim * b + rows * vocab * 4 * 3
    per_token = 2 * 4 * vocab + layers * hidden * (b if gradient_checkpointing else 34)
    activations = micro_batch * seq * per_token
    reserved = int(vllm_share * device_bytes) if rollout == "vllm" else 0
    return MemoryPlan(weights=P * b, gradients=gradients, optimizer=optimizer, kv_cache=kv, activations=activations,
                      reserved=reserved, rows=rows, seq=seq, micro_batch=micro_batch)


def check_memory(plan: MemoryPlan, device_bytes: int, device: str) -> None:
    budget = int(device_bytes * HEADROOM)
    if plan.total <= budget:
        return
    g = lambda x: f"{x / GIB:.1f}"  # noqa: E731
    terms = {"weights": plan.weights, "gradients": plan.gradients, "optimizer": plan.optimizer,
             "kv_cache": plan.kv_cache, "activations": plan.activations, "reserved": plan.reserved}
    biggest = max(terms, key=lambda k: terms[k])
    fix = {
        "kv_cache": f"sample fewer rows at once ({plan.rows} now: rl.prompts_per_step x rl.group_size per rank, "
                    "eval.samples x held-out items) or lower rl.max_new_tokens, or sample on a server ([rollout] engine = \"vllm\" or \"http\")",
        "activations": f"lower rl.micro_batch_size (now {plan.micro_batch} x {plan.seq} tokens) "
                       "or set distributed.gradient_checkpointing = true",
        "optimizer": "shard it: distributed.engine = \"deepspeed\" with zero_stage 2 over more GPUs",
        "gradients": "shard them: distributed.engine = \"deepspeed\" with zero_stage 2 over more GPUs",
        "weights": "use a smaller model or policy.dtype = \"bfloat16\"",
        "reserved": "lower rollout.gpu_memory_utilization",
    }[biggest]
    parts = ", ".join(f"{k.replace('_', ' ')} {g(v)}" for k, v in terms.items() if v)
    raise FitError(f"memory: this run needs about {g(plan.total)} GiB per GPU ({parts}) but {device} has "
                   f"{g(device_bytes)} GiB ({g(budget)} usable): {fix}")


def check_run_fits(cfg: Any, policy: Any, tasks: Sequence[Any], *, eval_items: int = 0, world_size: int = 1,
                   launched: bool = False,
                   device_bytes: Optional[int] = None, device: str = "") -> Optional[MemoryPlan]:
    """Both checks for a run config and its loaded ``policy`` (a transformers model): the
    context window always, the memory when ``device_bytes`` is known (a CUDA device).
    ``eval_items``: the larger held-out split (evaluation samples ``eval.samples`` of each at once);
    ``launched``: started by torchrun/deepspeed (``[distributed]`` applies only then).
    Returns the memory plan it checked, if any."""
    model_config = getattr(policy.model, "config", None)
    if model_config is None:
        return None
    prompt, task_id = longest_prompt(policy, tasks)
    name = getattr(policy, "base_path", None) or getattr(policy, "name", "the model")
    window = context_window(model_config)
    check_context(window=window, max_new_tokens=int(cfg.rl.max_new_tokens), prompt_tokens=prompt,
                  prompt_task=task_id, model=str(name))
    if cfg.eval.max_new_tokens:
        check_context(window=window, max_new_tokens=int(cfg.eval.max_new_tokens), prompt_tokens=prompt,
                      prompt_task=task_id, model=str(name), key="eval.max_new_tokens")
    if not device_bytes:
        return None
    dist: Mapping[str, Any] = cfg.distributed or {}
    rollout: Mapping[str, Any] = cfg.rollout or {}
    engine = str(dist.get("engine", "ddp")) if launched else "ddp"
    per_rank_prompts = max(1, int(cfg.rl.prompts_per_step) // max(1, world_size))
    rows = min(max(per_rank_prompts * int(cfg.rl.group_size), eval_items * int(cfg.eval.samples)), SAMPLE_CHUNK_ROWS)
    seq = prompt + max(int(cfg.rl.max_new_tokens), int(cfg.eval.max_new_tokens or 0))
    mb = int(cfg.rl.micro_batch_size) or per_rank_prompts * int(cfg.rl.group_size) // max(1, int(cfg.rl.updates_per_step))
    n_params = sum(p.numel() for p in policy.model.parameters())
    dtype_bytes = next(iter(policy.model.parameters())).element_size()
    plan = plan_memory(model_config, n_params, dtype_bytes=dtype_bytes, world_size=world_size, engine=engine,
                       zero_stage=int(dist.get("zero_stage", 1)), precision=str(dist.get("precision", "fp32")),
                       rollout=str(rollout.get("engine", "inprocess")), rows=rows, seq=seq, micro_batch=mb,
                       gradient_checkpointing=bool(dist.get("gradient_checkpointing", False)),
                       vllm_share=float(rollout.get("gpu_memory_utilization", 0.9)), device_bytes=device_bytes)
    check_memory(plan, device_bytes, device or "the device")
    return plan


def cuda_device_bytes(device: str) -> Optional[int]:
    """Total memory of the CUDA device ``device`` names (None off CUDA)."""
    if not str(device).startswith("cuda"):
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    idx = torch.device(device).index
    return int(torch.cuda.get_device_properties(torch.cuda.current_device() if idx is None else idx).total_memory)
