"""``HTTPEngine``: a ``RolloutEngine`` over any OpenAI-compatible server (vLLM, SGLang,
``evo serve``), on ``httpx``.

- Prompts go out in batches (``prompts_per_request`` per ``/v1/completions`` call, each
  with ``n``), up to ``max_concurrency`` requests in flight.
- Connection errors, 408/429 and 5xx are retried with exponential backoff and jitter;
  other 4xx are the caller's bug and fail at once with the server's message.
- Token ids come from vLLM's ``return_token_ids`` (``prompt_token_ids``/``token_ids`` on
  each choice) or, failing that, from ``token_id:N`` logprob tokens
  (``return_tokens_as_token_ids``); log-probs from the logprobs block.
- ``sync_weights`` pushes new weights: a LoRA adapter through vLLM's
  ``/v1/load_lora_adapter`` (later requests name the adapter), or a full checkpoint
  through a reload endpoint (SGLang's and ``evo serve``'s ``/update_weights_from_disk``).
  The server must see ``sync_dir`` on its filesystem. :func:`sync_and_record` also puts
  the weights in the blob store and appends ``PolicyUpdated`` to the run's log.
"""

from __future__ import annotations

import io
import os
import random
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Optional, Sequence

import attrs
import structlog

from evo_core.retry import Backoff, RetriesExhausted, Retryable, retry_call
from evo_core.trainer.protocols import Sample, SamplingParams

log = structlog.get_logger("evo.http_engine")

_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_SYNC_MODES = ("lora", "checkpoint", "none")


class HTTPEngineError(RuntimeError):
    """A request failed for good (a client error, or retries exhausted)."""


@attrs.frozen(kw_only=True)
class HTTPEngineConfig:
    base_url: str = attrs.field()  # e.g. http://127.0.0.1:8000 (with or without /v1)
    model: str
    api_key: Optional[str] = None
    timeout_s: float = 120.0
    max_concurrency: int = attrs.field(default=16, validator=attrs.validators.ge(1))
    prompts_per_request: int = attrs.field(default=8, validator=attrs.validators.ge(1))
    max_retries: int = attrs.field(default=5, validator=attrs.validators.ge(0))
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 16.0
    chat: bool = False  # send each prompt as one user message to /v1/chat/completions
    logprobs: bool = True
    sync_mode: str = attrs.field(default="checkpoint", validator=attrs.validators.in_(_SYNC_MODES))
    sync_dir: Optional[str] = None  # where weights are written for the server to read
    reload_path: str = "/update_weights_from_disk"
    keep_adapters: int = attrs.field(default=1, validator=attrs.validators.ge(1))

    @base_url.validator
    def _check_url(self, attr: attrs.Attribute, value: str) -> None:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {value!r}")

    @property
    def root(self) -> str:
        url = self.base_url.rstrip("/")
        return url[:-3] if url.endswith("/v1") else url


def backoff(cfg: HTTPEngineConfig) -> Backoff:
    """The retry schedule the engine's requests follow (:mod:`evo_core.retry`)."""
    return Backoff(retries=cfg.max_retries, initial_s=cfg.backoff_initial_s, max_s=cfg.backoff_max_s)


def backoff_delays(cfg: HTTPEngineConfig, rng: Optional[random.Random] = None) -> list[float]:
    """Jittered exponential backoff: attempt k waits U(0.5, 1) * min(max, initial * 2^k)."""
    return backoff(cfg).delays(rng)


class HTTPEngine:
    def __init__(self, config: HTTPEngineConfig, *, transport: Any = None) -> None:
        import httpx

        self.config = config
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        limits = httpx.Limits(max_connections=config.max_concurrency, max_keepalive_connections=config.max_concurrency)
        self._client = httpx.Client(base_url=config.root, headers=headers, timeout=config.timeout_s,
                                    limits=limits, transport=transport)
        self._pool = ThreadPoolExecutor(max_workers=config.max_concurrency, thread_name_prefix="evo-http")
        self.model = config.model  # the name requests use; a LoRA sync points it at the adapter
        self._adapters: list[str] = []
        self.requests_sent = 0
        self.retries = 0

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._client.close()

    def __enter__(self) -> "HTTPEngine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- transport -------------------------------------------------------------------------
    def _post(self, path: str, body: Mapping[str, Any]) -> Any:
        import httpx

        def attempt() -> Any:
            self.requests_sent += 1
            try:
                resp = self._client.post(path, json=dict(body))
            except httpx.TransportError as exc:  # refused, reset, timeout
                raise Retryable(f"{type(exc).__name__}: {exc}") from exc
            if resp.status_code < 300:
                ctype = resp.headers.get("content-type", "")
                return resp.json() if "json" in ctype else resp.text
            why = f"HTTP {resp.status_code}: {_error_message(resp)}"
            if resp.status_code in _RETRY_STATUS:
                raise Retryable(why)
            raise HTTPEngineError(f"{self.config.root}{path} rejected the request: {why}")

        def on_retry(number: int, exc: BaseException, wait_s: float) -> None:
            self.retries += 1
            log.warning("http_retry", path=path, attempt=number, wait_s=round(wait_s, 3), reason=str(exc))

        try:
            return retry_call(attempt, backoff(self.config), on_retry=on_retry)
        except RetriesExhausted as exc:
            raise HTTPEngineError(f"{self.config.root}{path} {exc}") from exc.last

    def health(self) -> bool:
        import httpx

        try:
            return self._client.get("/health").status_code == 200
        except httpx.TransportError:
            return False

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.health():
            if time.monotonic() > deadline:
                raise HTTPEngineError(f"{self.config.root} did not become healthy within {timeout_s:.0f}s")
            time.sleep(0.2)

    # -- generation ------------------------------------------------------------------------
    def generate(self, prompts: Sequence[str], params: SamplingParams, *, generator: Any = None) -> list[list[Sample]]:
        """``generator`` (a torch.Generator, as the trainer passes to every engine) seeds the
        server's sampling when ``params.seed`` is unset, so an HTTP run is as reproducible
        as the server allows (vLLM honours per-request seeds)."""
        prompts = list(prompts)
        if not prompts:
            return []
        params = seeded(params, generator)
        if self.config.chat:
            jobs = [[p] for p in prompts]
            fn = self._chat
        else:
            k = self.config.prompts_per_request
            jobs = [prompts[i:i + k] for i in range(0, len(prompts), k)]
            fn = self._complete
        futures = [self._pool.submit(fn, job, params, i) for i, job in enumerate(jobs)]
        out: list[list[Sample]] = []
        for f in futures:
            out.extend(f.result())
        return out

    def _common(self, params: SamplingParams, job_index: int) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "n": params.n, "temperature": params.temperature,
                                "top_p": params.top_p, "max_tokens": params.max_new_tokens,
                                "return_token_ids": True}
        if params.stop:
            body["stop"] = list(params.stop)
        if params.seed is not None:  # distinct but reproducible per batch
            body["seed"] = params.seed + job_index
        return body

    def _complete(self, prompts: list[str], params: SamplingParams, job_index: int) -> list[list[Sample]]:
        body = self._common(params, job_index) | {"prompt": prompts}
        if self.config.logprobs:
            body |= {"logprobs": 0, "return_tokens_as_token_ids": True}
        data = self._post("/v1/completions", body)
        choices = sorted(data["choices"], key=lambda c: c["index"])
        if len(choices) != len(prompts) * params.n:
            raise HTTPEngineError(f"server returned {len(choices)} choices for {len(prompts)} prompts x n={params.n}")
        rows = []
        for i, prompt in enumerate(prompts):
            row = []
            for c in choices[i * params.n:(i + 1) * params.n]:
                lp = c.get("logprobs") or {}
                row.append(_sample(prompt, c["text"], c, lp.get("tokens"), lp.get("token_logprobs")))
            rows.append(row)
        return rows

    def _chat(self, prompts: list[str], params: SamplingParams, job_index: int) -> list[list[Sample]]:
        (prompt,) = prompts
        body = self._common(params, job_index) | {"messages": [{"role": "user", "content": prompt}]}
        if self.config.logprobs:
            body |= {"logprobs": True, "return_tokens_as_token_ids": True}
        data = self._post("/v1/chat/completions", body)
        choices = sorted(data["choices"], key=lambda c: c["index"])
        row = []
        for c in choices:
            content = ((c.get("logprobs") or {}).get("content")) or []
            c = dict(c)
            c.setdefault("prompt_token_ids", data.get("prompt_token_ids"))
            row.append(_sample(prompt, c["message"].get("content") or "", c,
                               [t["token"] for t in content] or None, [t["logprob"] for t in content] or None))
        return [row]

    # -- weight sync -----------------------------------------------------------------------
    def sync_weights(self, policy: Any, version: int) -> Optional[Mapping[str, Any]]:
        """Write the policy's weights (adapter or full checkpoint) under ``sync_dir`` and
        make the server load them. Returns what was synced: kind, path, name, digest."""
        mode = self.config.sync_mode
        if mode == "none":
            return None
        if not self.config.sync_dir:
            raise HTTPEngineError("sync_weights needs HTTPEngineConfig.sync_dir (a directory the server can read)")
        if mode == "lora":
            if getattr(policy, "lora", None) is None:
                raise HTTPEngineError("sync_mode 'lora' needs a policy trained with a LoRA adapter")
            name = f"{self.config.model}-v{version}"
            path = os.path.join(os.path.abspath(self.config.sync_dir), name)
            policy.model.save_pretrained(path)  # a peft model saves only the adapter
            self._post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": path})
            self.model = name
            self._adapters.append(name)
            while len(self._adapters) > self.config.keep_adapters:  # free server memory
                old = self._adapters.pop(0)
                try:
                    self._post("/v1/unload_lora_adapter", {"lora_name": old})
                except HTTPEngineError as exc:
                    log.warning("lora_unload_failed", name=old, error=str(exc))
            info = {"kind": "lora", "name": name, "path": path, "version": version}
        else:
            path = os.path.join(os.path.abspath(self.config.sync_dir), f"checkpoint-v{version}")
            policy.save(path)
            self._post(self.config.reload_path, {"model_path": path})
            info = {"kind": "checkpoint", "name": self.model, "path": path, "version": version}
        info["digest"] = policy.digest() if hasattr(policy, "digest") else directory_digest(path)
        log.info("weights_synced", **info, server=self.config.root)
        return info


def seeded(params: SamplingParams, generator: Any) -> SamplingParams:
    """``params`` with a seed drawn from ``generator`` when it has none."""
    if generator is None or params.seed is not None:
        return params
    import torch

    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
    return attrs.evolve(params, seed=seed)


def _error_message(resp: Any) -> str:
    try:
        data = resp.json()
        err = data.get("error", data) if isinstance(data, dict) else data
        return str(err.get("message", err) if isinstance(err, dict) else err)[:500]
    except Exception:
        return resp.text[:500]


def _sample(prompt: str, text: str, choice: Mapping[str, Any], tokens: Optional[Sequence[str]],
            logprobs: Optional[Sequence[Optional[float]]]) -> Sample:
    token_ids = choice.get("token_ids")
    if token_ids is None and tokens and all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
        token_ids = [int(t.split(":", 1)[1]) for t in tokens]
    finish = choice.get("finish_reason") or "stop"
    return Sample(prompt=prompt, text=text, prompt_ids=tuple(choice.get("prompt_token_ids") or ()),
                  token_ids=tuple(token_ids or ()),
                  logprobs=tuple(float(x) if x is not None else float("nan") for x in (logprobs or ())),
                  truncated=finish == "length", finish_reason="length" if finish == "length" else "stop")


# -- recording a sync in the run's log -------------------------------------------------------------
def pack_directory(path: str) -> bytes:
    """A byte-for-byte reproducible tar of a directory (sorted names, zeroed metadata), so
    the same weights always give the same blob digest."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for fname in sorted(files):
                full = os.path.join(root, fname)
                info = tarfile.TarInfo(os.path.relpath(full, path))
                info.size = os.path.getsize(full)
                info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname = 0o644, 0, 0, 0, "", ""
                with open(full, "rb") as fh:
                    tar.addfile(info, fh)
    return buf.getvalue()


def directory_digest(path: str) -> str:
    import hashlib

    return hashlib.sha256(pack_directory(path)).hexdigest()


def policy_updated_event(*, run_id: str, step: int, version: int, synced: Mapping[str, Any], blobs: Any,
                         target: str, caused_by: Sequence[str] = (), emitted_by: Any = None) -> Any:
    """The ``PolicyUpdated`` for a sync, with the synced directory stored as a tar blob."""
    from evo_events.types import PolicyUpdated

    ref = blobs.put(pack_directory(synced["path"]), "application/x-tar") if synced.get("path") else None
    kw = {"emitted_by": emitted_by} if emitted_by is not None else {}
    return PolicyUpdated(run_id=run_id, step=step, policy_version=version, digest=synced["digest"],
                         checkpoint=ref, adapter=synced["kind"] == "lora", target=target, caused_by=tuple(caused_by),
                         **kw)


def sync_and_record(engine: Any, policy: Any, *, store: Any, run_id: str, step: int, version: int,
                    caused_by: Sequence[str] = (), append: bool = True, emitted_by: Any = None) -> Optional[Any]:
    """Sync ``policy`` to the engine's server and record it. With ``append`` the event goes
    straight to the run's stream; otherwise it is returned for the caller's step batch."""
    synced = engine.sync_weights(policy, version)
    if synced is None:
        return None
    root = getattr(engine.config, "root", type(engine).__name__)
    event = policy_updated_event(run_id=run_id, step=step, version=version, synced=synced, blobs=store.blobs,
                                 target=f"{root}#{synced['name']}", caused_by=caused_by, emitted_by=emitted_by)
    if append:
        from evo_core.store import run_stream

        store.append(run_stream(run_id), [event])
    return event
