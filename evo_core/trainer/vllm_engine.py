"""``VLLMEngine``: an in-process vLLM ``LLM`` as a ``RolloutEngine`` (GPU machines).

vLLM is an extra (``pip install 'evotrainer[vllm]'``) that pins its own torch and
transformers, so it is imported only inside this module's functions and never by the
rest of EvoTrainer. Without it, constructing the engine raises ``VLLMMissing`` with the
install line; nothing else changes.

Weight sync in process:
- a LoRA policy saves its adapter and later requests carry a ``LoRARequest`` for it
  (the engine must be built with ``enable_lora=True``);
- a full policy's state dict is streamed into the vLLM model through the model's own
  ``load_weights`` (via ``LLM.apply_model`` where the vLLM version has it).

Log-probs: vLLM reports log-probs of the raw model distribution unless the engine is
built with ``logprobs_mode="processed_logprobs"`` (vLLM >= 0.10.2, pass it in
``llm_kwargs``); the trainer recomputes log-probs for the update either way.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence

import attrs

from evo_core.trainer.protocols import Sample, SamplingParams


class VLLMMissing(ImportError):
    """The ``vllm`` extra is not installed."""


def import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise VLLMMissing(
            "vLLM is not installed: pip install 'evotrainer[vllm]' on a CUDA machine "
            f"(or point HTTPEngine at a running 'vllm serve'); import failed: {exc}"
        ) from exc
    return vllm


@attrs.frozen(kw_only=True)
class VLLMEngineConfig:
    model_path: str  # a local directory: vLLM never downloads here either
    dtype: str = "bfloat16"
    gpu_memory_utilization: float = attrs.field(default=0.5, validator=[attrs.validators.gt(0.0), attrs.validators.le(1.0)])
    tensor_parallel_size: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    enable_lora: bool = False
    max_lora_rank: int = 64
    max_model_len: Optional[int] = None
    seed: int = 0
    sync_dir: Optional[str] = None  # where LoRA adapters are written for the engine to read
    llm_kwargs: Mapping[str, Any] = attrs.Factory(dict)


class VLLMEngine:
    def __init__(self, config: VLLMEngineConfig, *, llm: Any = None) -> None:
        self.config = config
        vllm = import_vllm() if llm is None else None
        if llm is None:
            if not os.path.isdir(config.model_path):
                raise ValueError(f"model_path {config.model_path!r} is not a local directory")
            kw: dict[str, Any] = dict(model=config.model_path, dtype=config.dtype, seed=config.seed,
                                      gpu_memory_utilization=config.gpu_memory_utilization,
                                      tensor_parallel_size=config.tensor_parallel_size, enable_lora=config.enable_lora)
            if config.enable_lora:
                kw["max_lora_rank"] = config.max_lora_rank
            if config.max_model_len:
                kw["max_model_len"] = config.max_model_len
            kw.update(config.llm_kwargs)
            llm = vllm.LLM(**kw)
        self.llm = llm
        self._lora: Any = None  # the current LoRARequest, if any

    def _sampling(self, params: SamplingParams) -> Any:
        from vllm import SamplingParams as VSP

        return VSP(n=params.n, temperature=params.temperature, top_p=params.top_p, max_tokens=params.max_new_tokens,
                   stop=list(params.stop) or None, seed=params.seed, logprobs=0)

    def generate(self, prompts: Sequence[str], params: SamplingParams, *, generator: Any = None) -> list[list[Sample]]:
        from evo_core.trainer.http_engine import seeded

        params = seeded(params, generator)
        outs = self.llm.generate(list(prompts), self._sampling(params), lora_request=self._lora, use_tqdm=False)
        return [[_to_sample(p, o.prompt_token_ids, c) for c in o.outputs] for p, o in zip(prompts, outs)]

    def sync_weights(self, policy: Any, version: int) -> Optional[Mapping[str, Any]]:
        if getattr(policy, "lora", None) is not None:
            if not self.config.enable_lora:
                raise ValueError("the policy trains a LoRA adapter but the vLLM engine was built without enable_lora")
            if not self.config.sync_dir:
                raise ValueError("LoRA sync needs VLLMEngineConfig.sync_dir")
            from vllm.lora.request import LoRARequest

            path = os.path.join(os.path.abspath(self.config.sync_dir), f"adapter-v{version}")
            policy.model.save_pretrained(path)
            # a fresh int id per version: vLLM caches adapters by id
            self._lora = LoRARequest(f"policy-v{version}", version + 1, path)
            return {"kind": "lora", "name": self._lora.lora_name, "path": path, "version": version,
                    "digest": policy.digest()}
        weights = [(k, v.detach()) for k, v in policy.model.state_dict().items()]
        load_state_into(self.llm, weights)
        return {"kind": "weights", "name": "base", "path": None, "version": version, "digest": policy.digest()}


def load_state_into(llm: Any, weights: list[tuple[str, Any]]) -> None:
    """Push (name, tensor) pairs into a live vLLM model with its own ``load_weights``
    (which handles fused QKV/gate-up layouts)."""
    if hasattr(llm, "apply_model"):  # vLLM >= 0.9; needs VLLM_ALLOW_INSECURE_SERIALIZATION=1 with V1 multiproc
        llm.apply_model(lambda model: model.load_weights(weights=weights))
        return
    try:  # older single-process layout
        model = llm.llm_engine.model_executor.driver_worker.model_runner.model
    except AttributeError as exc:
        raise RuntimeError("this vLLM version exposes no way to load weights in process; "
                           "use HTTPEngine with a checkpoint reload instead") from exc
    model.load_weights(weights=weights)


def _to_sample(prompt: str, prompt_ids: Sequence[int], c: Any) -> Sample:
    lps: list[float] = []
    for tid, entry in zip(c.token_ids, c.logprobs or []):
        lp = entry.get(tid) if isinstance(entry, Mapping) else None
        lps.append(float(getattr(lp, "logprob", lp)) if lp is not None else float("nan"))
    finish = "length" if c.finish_reason == "length" else "stop"
    return Sample(prompt=prompt, text=c.text, prompt_ids=tuple(prompt_ids or ()), token_ids=tuple(c.token_ids),
                  logprobs=tuple(lps), truncated=finish == "length", finish_reason=finish)
