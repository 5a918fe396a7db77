"""``ModelHost``: the policies a server holds (the base model plus LoRA adapters) and
a micro-batcher that merges concurrent requests into one ``Policy.sample`` call.

Why a batcher: the HTTP rollout engine sends many small concurrent requests; sampling
them one by one would waste the batched KV-cached loop the policy already has.
Requests with identical sampling parameters (and no seed) are merged; a seeded request
runs alone so that its output depends on its seed only.
"""

from __future__ import annotations

import asyncio
import copy
import os
import threading
import time
from typing import Any, Callable, Optional, Sequence

import attrs
import structlog

from evo_core.trainer.protocols import Sample, SamplingParams

log = structlog.get_logger("evo.serve")

Loader = Callable[[str], Any]


class HostError(Exception):
    """A request the host cannot serve; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


@attrs.define
class _Pending:
    model: str
    prompts: list[str]
    params: SamplingParams
    future: asyncio.Future


@attrs.define
class ModelEntry:
    name: str
    policy: Any
    parent: Optional[str] = None  # base model name for LoRA adapters
    path: Optional[str] = None
    created: int = attrs.Factory(lambda: int(time.time()))


def load_lora_policy(base: Any, name: str, path: str) -> Any:
    """The base policy with a peft adapter from ``path`` on a private copy of its weights."""
    try:
        from peft import PeftModel
    except ImportError as exc:
        raise HostError("LoRA adapters need the 'lora' extra: pip install 'evotrainer[lora]'", 501) from exc
    if not os.path.isfile(os.path.join(path, "adapter_config.json")):
        raise HostError(f"no adapter_config.json in lora_path {path!r}", 400)
    model = PeftModel.from_pretrained(copy.deepcopy(base.model), path, is_trainable=False)
    model.eval()
    return type(base)(model, base.tokenizer, name=name, device=getattr(base, "device", "cpu"))


class ModelHost:
    def __init__(self, policy: Any, *, name: Optional[str] = None, loader: Optional[Loader] = None,
                 max_batch_prompts: int = 256, batch_window_s: float = 0.005) -> None:
        self.base_name = name or getattr(policy, "name", "policy")
        self.models: dict[str, ModelEntry] = {self.base_name: ModelEntry(self.base_name, policy)}
        self.loader = loader
        self.max_batch_prompts = max_batch_prompts
        self.batch_window_s = batch_window_s
        self.weights_version = 0
        # Sampling runs in a worker thread; swaps of weights take this lock so that a
        # reload never lands in the middle of a batch.
        self._lock = threading.Lock()
        self._queue: Optional[asyncio.Queue] = None
        self._worker: Optional[asyncio.Task] = None

    # -- model registry ------------------------------------------------------------------
    @property
    def base(self) -> Any:
        return self.models[self.base_name].policy

    def get(self, name: Optional[str]) -> ModelEntry:
        entry = self.models.get(name or self.base_name)
        if entry is None:
            raise HostError(f"the model {name!r} does not exist (served: {', '.join(self.models)})", 404,
                            "NotFoundError")
        return entry

    def reload(self, path: str) -> dict[str, Any]:
        """Replace the base weights with the checkpoint at ``path`` (adapters are dropped:
        they were trained against the old base)."""
        if self.loader is None:
            raise HostError("this server cannot reload checkpoints (no loader)", 501)
        if not os.path.isdir(path):
            raise HostError(f"model_path {path!r} is not a directory on the server", 400)
        t0 = time.perf_counter()
        policy = self.loader(path)
        with self._lock:
            self.models = {self.base_name: ModelEntry(self.base_name, policy, path=path)}
            self.weights_version += 1
        log.info("weights_reloaded", path=path, version=self.weights_version, seconds=round(time.perf_counter() - t0, 3))
        return {"path": path, "weights_version": self.weights_version}

    def load_adapter(self, name: str, path: str, *, replace: bool = False) -> None:
        if not name:
            raise HostError("lora_name is empty", 400)
        if name in self.models and not replace:
            raise HostError(f"The lora adapter '{name}' has already been loaded.", 400)
        if name == self.base_name:
            raise HostError(f"lora_name {name!r} is the base model's name", 400)
        if not os.path.isdir(path):
            raise HostError(f"lora_path {path!r} is not a directory on the server", 400)
        policy = load_lora_policy(self.base, name, path)
        with self._lock:
            self.models[name] = ModelEntry(name, policy, parent=self.base_name, path=path)
        log.info("lora_loaded", name=name, path=path)

    def unload_adapter(self, name: str) -> None:
        entry = self.models.get(name)
        if entry is None or entry.parent is None:
            raise HostError(f"The lora adapter '{name}' cannot be found.", 404, "NotFoundError")
        with self._lock:
            del self.models[name]

    # -- sampling --------------------------------------------------------------------------
    async def generate(self, model: Optional[str], prompts: Sequence[str], params: SamplingParams) -> list[list[Sample]]:
        name = self.get(model).name
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._worker = asyncio.create_task(self._run())
        fut = asyncio.get_running_loop().create_future()
        await self._queue.put(_Pending(name, list(prompts), params, fut))
        return await fut

    async def _run(self) -> None:
        assert self._queue is not None
        while True:
            first = await self._queue.get()
            await asyncio.sleep(self.batch_window_s)  # let concurrent requests arrive
            batch = [first]
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            groups: dict[Any, list[_Pending]] = {}
            for p in batch:
                key = (p.model, p.params) if p.params.seed is None else id(p)
                groups.setdefault(key, []).append(p)
            for group in groups.values():
                await self._run_group(group)

    async def _run_group(self, group: list[_Pending]) -> None:
        # split so that no call holds more than max_batch_prompts prompts
        chunks: list[list[_Pending]] = [[]]
        count = 0
        for p in group:
            if chunks[-1] and count + len(p.prompts) > self.max_batch_prompts:
                chunks.append([])
                count = 0
            chunks[-1].append(p)
            count += len(p.prompts)
        for chunk in chunks:
            prompts = [q for p in chunk for q in p.prompts]
            try:
                out = await asyncio.to_thread(self._sample, chunk[0].model, prompts, chunk[0].params)
            except Exception as exc:  # answer every waiter, keep the worker alive
                log.exception("sampling_failed")
                for p in chunk:
                    if not p.future.done():
                        p.future.set_exception(exc)
                continue
            i = 0
            for p in chunk:
                if not p.future.done():
                    p.future.set_result(out[i:i + len(p.prompts)])
                i += len(p.prompts)

    def _sample(self, model: str, prompts: list[str], params: SamplingParams) -> list[list[Sample]]:
        with self._lock:
            entry = self.models.get(model)
            if entry is None:  # unloaded (or reloaded away) while queued
                raise HostError(f"the model {model!r} was unloaded", 404, "NotFoundError")
            t0 = time.perf_counter()
            out = entry.policy.sample(prompts, params)
        n_tok = sum(len(s.token_ids) for row in out for s in row)
        log.debug("batch_sampled", model=model, prompts=len(prompts), n=params.n, tokens=n_tok,
                  seconds=round(time.perf_counter() - t0, 4))
        return out
