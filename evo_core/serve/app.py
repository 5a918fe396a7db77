"""The OpenAI-compatible HTTP API (FastAPI) over a ``ModelHost``.

Request and response shapes follow the OpenAI API as vLLM serves it, including vLLM's
extensions that RL trainers rely on: ``return_token_ids`` (``prompt_token_ids`` and
``token_ids`` on each choice), ``return_tokens_as_token_ids`` (logprob tokens written
``token_id:N``), ``/v1/load_lora_adapter`` and ``/v1/unload_lora_adapter``. Full
checkpoint reload mirrors SGLang's ``/update_weights_from_disk``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Optional, Union

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field

from evo_core.serve.host import HostError, ModelHost
from evo_core.trainer.protocols import Sample, SamplingParams


class _Req(BaseModel):
    # Unknown OpenAI fields (user, presence_penalty, ...) are accepted and ignored, as vLLM does.
    model_config = ConfigDict(extra="allow")


class CompletionRequest(_Req):
    model: Optional[str] = None
    prompt: Union[str, list[str], list[int], list[list[int]]]
    n: int = Field(1, ge=1, le=1024)
    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: Optional[int] = Field(16, ge=0)
    stop: Optional[Union[str, list[str]]] = None
    logprobs: Optional[int] = Field(None, ge=0, le=20)
    seed: Optional[int] = None
    return_token_ids: bool = False
    return_tokens_as_token_ids: bool = False


class ChatMessage(_Req):
    role: str
    content: Optional[Union[str, list[dict[str, Any]]]] = None


class ChatRequest(_Req):
    model: Optional[str] = None
    messages: list[ChatMessage] = Field(min_length=1)
    n: int = Field(1, ge=1, le=1024)
    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: Optional[int] = Field(None, ge=0)
    max_completion_tokens: Optional[int] = Field(None, ge=0)
    stop: Optional[Union[str, list[str]]] = None
    logprobs: bool = False
    top_logprobs: Optional[int] = Field(None, ge=0, le=20)
    seed: Optional[int] = None
    return_token_ids: bool = False
    return_tokens_as_token_ids: bool = False


class LoadLoraRequest(_Req):
    lora_name: str
    lora_path: str
    load_inplace: bool = False


class UnloadLoraRequest(_Req):
    lora_name: str


class ReloadRequest(_Req):
    model_path: str


def _error(message: str, status: int, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


def _stops(stop: Optional[Union[str, list[str]]]) -> tuple[str, ...]:
    if stop is None:
        return ()
    return (stop,) if isinstance(stop, str) else tuple(s for s in stop if s)


def _token_str(tokenizer: Any, tid: int, as_ids: bool) -> str:
    return f"token_id:{tid}" if as_ids else tokenizer.decode([tid])


def render_chat(tokenizer: Any, messages: list[ChatMessage]) -> str:
    """The prompt for a chat request: the tokenizer's chat template when it has one
    (HF tokenizers), else the message contents concatenated (the character tokenizer
    has no roles, and the embedded tiny model was never trained on any)."""
    msgs = []
    for m in messages:
        content = m.content
        if isinstance(content, list):  # OpenAI content parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if p.get("type") == "text")
        msgs.append({"role": m.role, "content": content or ""})
    hf = getattr(tokenizer, "tok", None)
    if hf is not None and getattr(hf, "chat_template", None):
        return hf.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    return "".join(m["content"] for m in msgs)


def build_app(host: ModelHost, *, default_max_tokens: int = 64) -> FastAPI:
    app = FastAPI(title="evo serve", version="1")
    app.state.host = host

    @app.exception_handler(HostError)
    async def _host_error(request: Request, exc: HostError) -> JSONResponse:
        return _error(str(exc), exc.status, exc.kind)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return _error(f"{where}: {first.get('msg', 'invalid request')}", 400)

    @app.get("/health")
    async def health() -> PlainTextResponse:
        return PlainTextResponse("")

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        data = [{"id": e.name, "object": "model", "created": e.created, "owned_by": "evo",
                 "root": e.path or e.name, "parent": e.parent} for e in host.models.values()]
        return {"object": "list", "data": data}

    def params_of(req: Any, max_tokens: Optional[int]) -> SamplingParams:
        return SamplingParams(n=req.n, temperature=req.temperature, top_p=req.top_p,
                              max_new_tokens=default_max_tokens if max_tokens is None else max_tokens,
                              stop=_stops(req.stop), seed=req.seed)

    def usage(rows: list[list[Sample]]) -> dict[str, int]:
        p = sum(len(row[0].prompt_ids) for row in rows if row)
        c = sum(len(s.token_ids) for row in rows for s in row)
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest) -> dict[str, Any]:
        prompts = [req.prompt] if isinstance(req.prompt, str) else req.prompt
        if not prompts or not all(isinstance(p, str) for p in prompts):
            raise HostError("prompt: token-id prompts are not supported by evo serve; send text", 400)
        entry = host.get(req.model)
        rows = await host.generate(entry.name, prompts, params_of(req, req.max_tokens))
        tok = entry.policy.tokenizer
        choices = []
        for i, row in enumerate(rows):
            for j, s in enumerate(row):
                choice: dict[str, Any] = {"index": i * req.n + j, "text": s.text, "logprobs": None,
                                          "finish_reason": s.finish_reason, "stop_reason": None}
                if req.logprobs is not None:
                    toks = [_token_str(tok, t, req.return_tokens_as_token_ids) for t in s.token_ids]
                    offsets, pos = [], len(s.prompt)
                    for t in toks:
                        offsets.append(pos)
                        pos += len(t)
                    choice["logprobs"] = {
                        "tokens": toks, "token_logprobs": list(s.logprobs), "text_offset": offsets,
                        # top-k alternatives are not computed by the in-process sampler
                        "top_logprobs": [{t: lp} for t, lp in zip(toks, s.logprobs)] if req.logprobs else None,
                    }
                if req.return_token_ids:
                    choice["prompt_token_ids"] = list(s.prompt_ids)
                    choice["token_ids"] = list(s.token_ids)
                choices.append(choice)
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
                "model": entry.name, "choices": choices, "usage": usage(rows)}

    @app.post("/v1/chat/completions")
    async def chat(req: ChatRequest) -> dict[str, Any]:
        entry = host.get(req.model)
        tok = entry.policy.tokenizer
        prompt = render_chat(tok, req.messages)
        max_tokens = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
        rows = await host.generate(entry.name, [prompt], params_of(req, max_tokens))
        choices = []
        for j, s in enumerate(rows[0]):
            choice: dict[str, Any] = {"index": j, "message": {"role": "assistant", "content": s.text},
                                      "logprobs": None, "finish_reason": s.finish_reason, "stop_reason": None}
            if req.logprobs:
                content = []
                for t, lp in zip(s.token_ids, s.logprobs):
                    ts = _token_str(tok, t, req.return_tokens_as_token_ids)
                    content.append({"token": ts, "logprob": lp, "bytes": list(ts.encode()),
                                    "top_logprobs": [{"token": ts, "logprob": lp}] if req.top_logprobs else []})
                choice["logprobs"] = {"content": content}
            if req.return_token_ids:
                choice["token_ids"] = list(s.token_ids)
            choices.append(choice)
        body: dict[str, Any] = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion",
                                "created": int(time.time()), "model": entry.name, "choices": choices,
                                "usage": usage(rows)}
        if req.return_token_ids:
            body["prompt_token_ids"] = list(rows[0][0].prompt_ids) if rows[0] else []
        return body

    @app.post("/v1/load_lora_adapter")
    async def load_lora(req: LoadLoraRequest) -> PlainTextResponse:
        import asyncio

        await asyncio.to_thread(host.load_adapter, req.lora_name, req.lora_path, replace=req.load_inplace)
        return PlainTextResponse(f"Success: LoRA adapter '{req.lora_name}' added successfully.")

    @app.post("/v1/unload_lora_adapter")
    async def unload_lora(req: UnloadLoraRequest) -> PlainTextResponse:
        host.unload_adapter(req.lora_name)
        return PlainTextResponse(f"Success: LoRA adapter '{req.lora_name}' removed successfully.")

    @app.post("/update_weights_from_disk")
    async def reload(req: ReloadRequest) -> dict[str, Any]:
        import asyncio

        info = await asyncio.to_thread(host.reload, req.model_path)
        return {"success": True, "message": f"Succeeded to update model weights from {req.model_path}.", **info}

    return app
