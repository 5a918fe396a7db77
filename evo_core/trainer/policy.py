"""``HFPolicy``: a causal LM (any ``transformers`` model from a LOCAL directory, or the
embedded tiny model) with its tokenizer, behind the ``Policy`` protocol.

Sampling is our own batched, KV-cached loop over the model's forward: on CPU it is
several times faster than ``generate`` for small models, and it gives per-token
log-probs, stop strings and a truncation flag without post-processing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Mapping, Optional, Sequence

import attrs

from evo_core.trainer.protocols import Sample, SamplingParams
from evo_core.trainer.tokenizer import CharTokenizer, HFTokenizer, Tokenizer, load_tokenizer

POLICY_FILE = "evo_policy.json"


class PolicyLoadError(RuntimeError):
    """A policy directory is missing or unusable."""


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


def hub_id_message(path: str, key: str = "policy.path") -> Optional[str]:
    """The one-line error for a model path that is no local directory but reads like a
    Hugging Face hub id (``Qwen/Qwen2.5-Math-1.5B``); None for any other path."""
    if os.path.exists(path) or not _HUB_ID.fullmatch(path) or path.startswith(("./", "../")):
        return None
    local = f"/models/{path.split('/')[-1]}"
    return (f"{key} = {path!r} is not a local directory but reads like a Hugging Face hub id; EvoTrainer runs models "
            f"from a local directory and never downloads one: download it first (huggingface-cli download {path} --local-dir {local}) "
            f"and set {key} to that directory (--set {key}={local})")


@attrs.frozen(kw_only=True)
class LoraSettings:
    r: int = 8
    alpha: int = 16
    dropout: float = 0.0
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


def _torch():
    import torch

    return torch


class HFPolicy:
    """A trainable policy. ``model`` is a ``transformers`` causal LM (optionally wrapped by
    peft); ``tokenizer`` follows ``evo_core.trainer.tokenizer.Tokenizer``."""

    # Sampling shortcuts that leave every number as it was (tests/trainer/test_sampling_shortcuts.py),
    # taken only where ``rows_invariant`` holds for the model on this machine:
    share_prefill = True  # one prompt forward per run of identical prompts (``_prefill``)
    drop_finished = True  # rows that finished leave the decode batch (the sampler still draws for them)
    _rows_invariant: Optional[bool] = None  # ``rows_invariant(self.model)``, probed on first use

    def __init__(self, model: Any, tokenizer: Tokenizer, *, name: str = "policy", device: str = "cpu",
                 lora: Optional[LoraSettings] = None, base_path: Optional[str] = None) -> None:
        self.model = model.to(device)
        self.tokenizer = tokenizer
        self.name = name
        self.device = device
        self.lora = lora
        self.base_path = base_path

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def tiny(cls, cfg=None, *, seed: int = 0, device: str = "cpu", name: str = "tiny") -> "HFPolicy":
        from evo_core.trainer.tiny import TinyModelConfig, build_tiny_model

        model, tok = build_tiny_model(cfg or TinyModelConfig(), seed=seed)
        return cls(model, tok, name=name, device=device)

    @classmethod
    def from_pretrained(cls, path: str, *, device: str = "cpu", lora: Optional[LoraSettings] = None,
                        dtype: Optional[str] = None, name: Optional[str] = None) -> "HFPolicy":
        """Load a causal LM and its tokenizer from a local directory (never a hub)."""
        if not os.path.isdir(path):
            raise PolicyLoadError(hub_id_message(path) or
                                  f"policy path {path!r} is not a local directory (models are never downloaded)")
        if not os.path.exists(os.path.join(path, "config.json")):
            raise PolicyLoadError(f"policy path {path!r} has no config.json: not a transformers model directory")
        torch = _torch()
        from transformers import AutoModelForCausalLM

        kw: dict[str, Any] = {"local_files_only": True}
        if dtype:
            kw["dtype"] = getattr(torch, dtype)
        model = AutoModelForCausalLM.from_pretrained(path, **kw)
        tok = load_tokenizer(path)
        policy = cls(model, tok, name=name or os.path.basename(os.path.normpath(path)), device=device, base_path=path)
        if lora is not None:
            policy.enable_lora(lora)
        return policy

    def enable_lora(self, lora: LoraSettings) -> None:
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError as exc:  # optional extra
            raise PolicyLoadError("LoRA needs the 'lora' extra: pip install 'evotrainer[lora]'") from exc
        cfg = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                         target_modules=list(lora.target_modules), task_type="CAUSAL_LM")
        self.model = get_peft_model(self.model, cfg)
        self.lora = lora

    # -- persistence -----------------------------------------------------------------------
    def save(self, path: str) -> None:
        """A full model directory; with LoRA, the adapter only (``adapter_config.json``, what
        vLLM's ``load_lora_adapter`` takes) plus a pointer to the local base model."""
        os.makedirs(path, exist_ok=True)
        self.model.save_pretrained(path)
        self.tokenizer.save(path)
        with open(os.path.join(path, POLICY_FILE), "w") as fh:
            json.dump({"name": self.name, "lora": attrs.asdict(self.lora) if self.lora else None,
                       "base_path": os.path.abspath(self.base_path) if self.lora and self.base_path else None}, fh)

    @classmethod
    def load(cls, path: str, *, device: str = "cpu") -> "HFPolicy":
        meta: dict[str, Any] = {}
        if os.path.exists(os.path.join(path, POLICY_FILE)):
            with open(os.path.join(path, POLICY_FILE)) as fh:
                meta = json.load(fh)
        if meta.get("lora"):
            base = meta.get("base_path")
            if not base or not os.path.isdir(base):
                raise PolicyLoadError(f"{path}: LoRA adapter whose base model {base!r} is not a local directory")
            try:
                from peft import PeftModel
            except ImportError as exc:
                raise PolicyLoadError("LoRA needs the 'lora' extra: pip install 'evotrainer[lora]'") from exc
            policy = cls.from_pretrained(base, device=device, name=meta.get("name"))
            policy.model = PeftModel.from_pretrained(policy.model, path, is_trainable=True).to(device)
            policy.lora = LoraSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in meta["lora"].items()})
            return policy
        return cls.from_pretrained(path, device=device, name=meta.get("name"))

    def state_dict(self) -> dict[str, Any]:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.model.load_state_dict(sd)

    def digest(self) -> str:
        """sha256 over the weights (sorted names, raw bytes): the checkpoint's identity."""
        torch = _torch()
        h = hashlib.sha256()
        for k, v in sorted(self.model.state_dict().items()):
            h.update(k.encode())
            t = v.detach().to("cpu").contiguous()
            if t.dtype == torch.bfloat16:
                t = t.view(torch.int16)
            h.update(t.numpy().reshape(-1))  # the buffer itself: no copy of the weights
        return h.hexdigest()

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    # -- sampling --------------------------------------------------------------------------
    def encode_prompt(self, prompt: str) -> list[int]:
        return self.tokenizer.encode(prompt, add_bos=True)

    def format_chat(self, messages: Sequence[Mapping[str, str]]) -> str:
        """A conversation as the prompt text: the tokenizer's chat template (with the
        generation prompt) where it has one; plain contents joined by newlines otherwise."""
        tok = getattr(self.tokenizer, "tok", None)
        if tok is not None and getattr(tok, "chat_template", None):
            return tok.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
        return "\n".join(str(m["content"]) for m in messages)

    def chat(self, conversations: Sequence[Sequence[Mapping[str, str]]], params: SamplingParams, *,
             generator: Any = None) -> list[list[Sample]]:
        """The next assistant turn of each conversation (``params.n`` samples each)."""
        return self.sample([self.format_chat(c) for c in conversations], params, generator=generator)

    def sample(self, prompts: Sequence[str], params: SamplingParams, *, generator: Any = None,
               chunk_size: int = 1024) -> list[list[Sample]]:
        """``params.n`` samples per prompt. ``temperature == 0`` is greedy. Log-probs are
        under the distribution sampled from (temperature applied)."""
        torch = _torch()
        if generator is None and params.seed is not None:
            generator = torch.Generator(device="cpu").manual_seed(params.seed)
        flat = [p for p in prompts for _ in range(params.n)]
        samples: list[Sample] = []
        for i in range(0, len(flat), chunk_size):
            samples.extend(self._sample_batch(flat[i:i + chunk_size], params, generator))
        return [samples[i * params.n:(i + 1) * params.n] for i in range(len(prompts))]

    def left_padded(self, prompts: Sequence[str]) -> tuple[list[list[int]], Any, Any, Any]:
        """The prompts encoded and left-padded into one batch, so that every row's next token
        sits at the same column: (token lists, input ids, attention mask, positions)."""
        torch = _torch()
        enc = [self.encode_prompt(p) for p in prompts]
        B, L = len(enc), max(len(e) for e in enc)
        ids = torch.full((B, L), self.tokenizer.pad_id, dtype=torch.long)
        attn = torch.zeros((B, L), dtype=torch.long)
        for r, e in enumerate(enc):
            ids[r, L - len(e):] = torch.tensor(e)
            attn[r, L - len(e):] = 1
        ids, attn = ids.to(self.device), attn.to(self.device)
        return enc, ids, attn, (attn.cumsum(-1) - 1).clamp(min=0)

    def _sample_batch(self, prompts: Sequence[str], params: SamplingParams, generator: Any) -> list[Sample]:
        torch = _torch()
        tok = self.tokenizer
        enc, input_ids, attn, pos = self.left_padded(prompts)
        B = len(enc)
        new_tokens: list[Any] = []
        new_lps: list[Any] = []
        done = torch.zeros(B, dtype=torch.bool, device=self.device)
        finish = ["length"] * B
        stop_at: list[Optional[int]] = [None] * B  # char index where a stop string begins
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad():
            ckw = _cache_kwarg(self.model)
            past, logits = self._prefill(input_ids, attn, pos, enc)
            next_pos = pos[:, -1] + 1
            live = torch.arange(B, device=self.device)  # the rows the model still runs on
            for t in range(params.max_new_tokens):
                logits = logits.float()
                if len(live) < B:  # finished rows get a dummy row: the sampler draws as many numbers
                    full = logits.new_zeros((B, logits.shape[-1]))
                    full[live] = logits
                    logits = full
                nxt, done = draw_step(logits, params, generator, tok, done, new_tokens, new_lps, finish, stop_at)
                if bool(done.all()):
                    break
                keep = ~done[live]
                n_keep = int(keep.sum())
                if (self.drop_finished and len(live) > MIN_SHORTCUT_ROWS and n_keep * 4 <= len(live) * 3
                        and self._shortcuts_exact()):  # a quarter finished: compact
                    if n_keep < MIN_SHORTCUT_ROWS:  # finished rows fill up to the floor
                        keep[(~keep).nonzero().flatten()[:MIN_SHORTCUT_ROWS - n_keep]] = True
                    idx = keep.nonzero().flatten()
                    past, attn, next_pos, live = _select_rows(past, idx), attn[idx], next_pos[idx], live[idx]
                attn = torch.cat([attn, torch.ones((len(live), 1), dtype=attn.dtype, device=self.device)], dim=1)
                out = self.model(input_ids=nxt[live][:, None], attention_mask=attn, position_ids=next_pos[:, None],
                                 use_cache=True, **{ckw: past})
                past, logits = _out_cache(out), out.logits[:, -1, :]
                next_pos = next_pos + 1
        if was_training:
            self.model.train()
        toks = torch.stack(new_tokens, 1).tolist() if new_tokens else [[] for _ in range(B)]
        lps = torch.stack(new_lps, 1).tolist() if new_lps else [[] for _ in range(B)]
        result = []
        for r in range(B):
            row = toks[r]
            n = len(row)
            if finish[r] == "stop" and tok.eos_id in row and stop_at[r] is None:
                n = row.index(tok.eos_id) + 1  # keep EOS: the policy must learn to stop
            elif stop_at[r] is not None:
                n = _first_len_reaching(row, tok, stop_at[r])
            ids = tuple(row[:n])
            text = tok.decode(ids)
            if stop_at[r] is not None:
                text = text[:stop_at[r]]
            result.append(Sample(prompt=prompts[r], text=text, prompt_ids=tuple(enc[r]), token_ids=ids,
                                 logprobs=tuple(float(x) for x in lps[r][:n]),
                                 truncated=finish[r] == "length", finish_reason=finish[r]))
        return result

    def _shortcuts_exact(self) -> bool:
        # once per policy: the probe walks every module, and sampling asks at each decode step
        if self._rows_invariant is None:
            self._rows_invariant = rows_invariant(self.model)
        return self._rows_invariant

    def _prefill(self, input_ids: Any, attn: Any, pos: Any, enc: Sequence[Sequence[int]]) -> tuple[Any, Any]:
        """The prompt's forward pass and cache, run once per run of identical consecutive
        prompts (a GRPO group, an eval item's samples) and copied to its rows: the same
        numbers as a forward over every row (rows do not interact), for 1/n of the work."""
        torch = _torch()
        first = [r for r in range(len(enc)) if r == 0 or enc[r] != enc[r - 1]]
        if (not self.share_prefill or len(first) == len(enc) or len(first) * input_ids.shape[1] < MIN_SHORTCUT_ROWS
                or not self._shortcuts_exact()):
            out = self.model(input_ids=input_ids, attention_mask=attn, position_ids=pos, use_cache=True)
            return _out_cache(out), out.logits[:, -1, :]
        src = torch.tensor(first, device=self.device)
        out = self.model(input_ids=input_ids[src], attention_mask=attn[src], position_ids=pos[src], use_cache=True)
        counts = [b - a for a, b in zip(first, first[1:] + [len(enc)])]
        rows = torch.repeat_interleave(torch.arange(len(first), device=self.device),
                                       torch.tensor(counts, device=self.device))
        return _select_rows(_out_cache(out), rows), out.logits[rows, -1, :]

    # -- scoring ---------------------------------------------------------------------------
    def logprobs(self, prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]]) -> Any:
        """Per-token log-probs of the completions (differentiable, right-padded with 0)."""
        return self.score(prompt_ids, completion_ids)[0]

    def score(self, prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]],
              *, with_entropy: bool = False, share_prompts: bool = False) -> tuple[Any, Any, Any]:
        """(log-probs [B,T], mask [B,T], entropy [B,T] or None) of the completion tokens at
        temperature 1. Sequences are right-padded, so positions need no adjustment.

        ``share_prompts``: where at most half the rows have distinct prompts (a GRPO group's
        rollouts), each distinct prompt's forward pass runs once and its cache is shared by its
        rows (gradients flow through it). The same function, for far less work; the float sums
        run in another order, so the last bits differ from the row-by-row pass."""
        torch = _torch()
        tok = self.tokenizer
        B = len(prompt_ids)
        T = max((len(c) for c in completion_ids), default=0)
        mask = torch.zeros((B, max(T, 1)), dtype=torch.float32)
        target = torch.full((B, max(T, 1)), tok.pad_id, dtype=torch.long)
        for r, c in enumerate(completion_ids):
            if len(c):
                target[r, :len(c)] = torch.tensor(list(c))
                mask[r, :len(c)] = 1.0
        target, mask = target.to(self.device), mask.to(self.device)
        sel = self._shared_prompt_logits(prompt_ids, completion_ids, max(T, 1)) if share_prompts else None
        if sel is None:
            sel = self._row_logits(prompt_ids, completion_ids, max(T, 1))
        logp_all = torch.log_softmax(sel.float(), dim=-1)
        logp = logp_all.gather(-1, target[:, :, None]).squeeze(-1) * mask
        ent = None
        if with_entropy:
            ent = -(logp_all.exp() * logp_all).sum(-1) * mask
        return logp[:, :T], mask[:, :T], (ent[:, :T] if ent is not None else None)

    def _row_logits(self, prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]],
                    T: int) -> Any:
        """Logits [B,T,V] that predict each completion token, from one forward over every
        row's whole sequence."""
        torch = _torch()
        tok = self.tokenizer
        B = len(prompt_ids)
        seqs = [list(p) + list(c) for p, c in zip(prompt_ids, completion_ids)]
        S = max(len(s) for s in seqs)
        ids = torch.full((B, S), tok.pad_id, dtype=torch.long)
        gather_pos = torch.zeros((B, T), dtype=torch.long)
        for r, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
            s = seqs[r]
            ids[r, :len(s)] = torch.tensor(s)
            if len(c):
                gather_pos[r, :len(c)] = torch.arange(len(p) - 1, len(p) - 1 + len(c))
        ids, gather_pos = ids.to(self.device), gather_pos.to(self.device)
        # Right padding + causal attention: no real token ever attends to a pad, so the mask
        # can be left out, which lets SDPA take its causal fast path (same numbers, ~15% faster).
        logits = self.model(input_ids=ids, use_cache=False).logits
        return logits.gather(1, gather_pos[:, :, None].expand(-1, -1, logits.shape[-1]))

    def _shared_prompt_logits(self, prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]],
                              T: int) -> Optional[Any]:
        """Logits [B,T,V] as ``_row_logits`` gives them, from one forward over each distinct
        prompt and one over the completions on top of its (differentiable) cache; None where
        that saves little or the model cannot take it (gradient checkpointing drops caches)."""
        torch = _torch()
        tok = self.tokenizer
        B = len(prompt_ids)
        index: dict[tuple[int, ...], int] = {}
        rows = [index.setdefault(tuple(p), len(index)) for p in prompt_ids]
        distinct = list(index)
        lens = [len(p) for p in distinct]
        if len(distinct) * 2 > B or min(lens) == 0 or _checkpointing(self.model):
            return None
        U, P = len(distinct), max(lens)
        ids = torch.full((U, P), tok.pad_id, dtype=torch.long)
        for u, p in enumerate(distinct):
            ids[u, :len(p)] = torch.tensor(p)
        ragged = min(lens) < P  # right-padded prompts: the pads between prompt and completion are masked
        p_attn = (torch.arange(P)[None, :] < torch.tensor(lens)[:, None]).long().to(self.device) if ragged else None
        out = self.model(input_ids=ids.to(self.device), attention_mask=p_attn, use_cache=True)
        cache = _out_cache(out)
        if cache is None:
            return None
        row_t = torch.tensor(rows, device=self.device)
        last = out.logits[torch.arange(U, device=self.device), torch.tensor(lens, device=self.device) - 1]
        first = last[row_t][:, None, :]  # predicts each row's first completion token
        if T == 1:
            return first
        comp = torch.full((B, T - 1), tok.pad_id, dtype=torch.long)
        for r, c in enumerate(completion_ids):
            if len(c) > 1:
                comp[r, :len(c) - 1] = torch.tensor(list(c[:-1]))
        start = torch.tensor([lens[u] for u in rows])
        pos = (start[:, None] + torch.arange(T - 1)[None, :]).to(self.device)
        attn = None
        if ragged:
            attn = torch.cat([p_attn[row_t], torch.ones((B, T - 1), dtype=torch.long, device=self.device)], 1)
        kw = {_cache_kwarg(self.model): _select_rows(cache, row_t)}
        rest = self.model(input_ids=comp.to(self.device), attention_mask=attn, position_ids=pos, use_cache=True, **kw)
        return torch.cat([first, rest.logits], 1)


_CACHE_KW: dict[type, str] = {}


def _cache_kwarg(model: Any) -> str:
    """transformers 5 renamed ``past_key_values`` to ``cache``; support both."""
    cls = type(model)
    if cls not in _CACHE_KW:
        import inspect

        params = inspect.signature(model.forward).parameters
        _CACHE_KW[cls] = "cache" if "cache" in params else "past_key_values"
    return _CACHE_KW[cls]


def _checkpointing(model: Any) -> bool:
    """Whether activation (gradient) checkpointing is on: under it the model drops caches.
    transformers 5 renamed the flag; asking the old name there warns."""
    on = getattr(model, "is_activation_checkpointing", None)
    return bool(getattr(model, "is_gradient_checkpointing", False) if on is None else on)


def _out_cache(out: Any) -> Any:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


# A BLAS may round a row differently when the batch is tiny (here a product over 1-3 rows differs
# in its last bits from the same row in a larger batch): a shortcut never runs a forward pass on
# fewer rows (tokens) than this.
MIN_SHORTCUT_ROWS = 64
_INVARIANT: dict[tuple, bool] = {}


def rows_invariant(model: Any) -> bool:
    """Whether each linear layer of ``model`` gives a row the same bits in a batch of
    ``MIN_SHORTCUT_ROWS`` or more rows as in a larger one, on this machine (probed once per
    shape): the condition for the sampling shortcuts to leave every number as it was."""
    torch = _torch()
    ok, seen = True, set()
    for m in model.modules():
        w = getattr(m, "weight", None)
        if not isinstance(m, torch.nn.Linear) or w is None or w.dim() != 2:
            continue
        key = (tuple(w.shape), w.dtype, str(w.device))
        if key in seen:
            continue
        seen.add(key)
        if key not in _INVARIANT:
            g = torch.Generator(device="cpu").manual_seed(0)
            x = torch.randn(512, w.shape[1], generator=g).to(dtype=w.dtype, device=w.device)
            with torch.no_grad():
                full = torch.nn.functional.linear(x, w)
                _INVARIANT[key] = all(torch.equal(torch.nn.functional.linear(x[:k], w), full[:k])
                                      for k in (MIN_SHORTCUT_ROWS, MIN_SHORTCUT_ROWS + 1, 100, 257, 511))
        ok = ok and _INVARIANT[key]
    return ok


def _select_rows(cache: Any, rows: Any) -> Any:
    """The cache with batch rows ``rows`` (an index tensor, repeats allowed)."""
    if hasattr(cache, "batch_select_indices"):
        cache.batch_select_indices(rows)
        return cache
    return tuple(tuple(t[rows] for t in layer) for layer in cache)  # legacy (key, value) tuples


def draw(logits: Any, params: SamplingParams, generator: Any) -> tuple[Any, Any]:
    """(next token, its log-prob) per row of float ``logits`` [B, V]: greedy at temperature 0,
    else sampled at the temperature (and top-p), one draw per row from ``generator``."""
    torch = _torch()
    greedy = params.temperature <= 0.0
    if not greedy:
        logits = logits / params.temperature
        if params.top_p < 1.0:
            logits = _top_p_filter(logits, params.top_p)
    logp = torch.log_softmax(logits, dim=-1)
    if greedy:
        nxt = logp.argmax(-1)
    elif logp.device.type == "cpu":
        nxt = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
    else:  # B uniforms go to the device, not B x vocab probabilities to the host
        nxt = sample_inverse_cdf(logp, generator)
    return nxt, logp.gather(-1, nxt[:, None]).squeeze(-1)


def sample_inverse_cdf(logp: Any, generator: Any) -> Any:
    """One token per row of ``logp`` [B, V] by inverse-CDF sampling on ``logp``'s device, with
    one uniform per row drawn from the (CPU) ``generator``: the same seed gives the same tokens,
    and a token of probability 0 (top-p) is never drawn. On a GPU this replaces copying
    B x V probabilities to the host for ``torch.multinomial`` at every token (311 MB a token
    for 512 rows of a 152k vocabulary)."""
    torch = _torch()
    u = torch.rand((logp.shape[0], 1), generator=generator, dtype=torch.float64).to(logp.device)
    cdf = logp.exp().to(torch.float64).cumsum(-1)
    idx = torch.searchsorted(cdf, u * cdf[:, -1:], right=True)
    return idx.squeeze(-1).clamp_(max=logp.shape[-1] - 1)


def _top_p_filter(logits: Any, top_p: float) -> Any:
    torch = _torch()
    sorted_logits, idx = torch.sort(logits, descending=True, dim=-1)
    cum = torch.softmax(sorted_logits, -1).cumsum(-1)
    remove = cum - torch.softmax(sorted_logits, -1) > top_p
    sorted_logits = sorted_logits.masked_fill(remove, float("-inf"))
    return torch.full_like(logits, float("-inf")).scatter(-1, idx, sorted_logits)


def _find_stop(text: str, stops: Sequence[str]) -> Optional[int]:
    found = [text.find(s) for s in stops if s and s in text]
    return min(found) if found else None


def _first_len_reaching(row: Sequence[int], tok: Tokenizer, chars: int) -> int:
    """The fewest tokens whose decoded text covers the stop string's start plus itself."""
    for n in range(1, len(row) + 1):
        if len(tok.decode(row[:n])) > chars:
            return n
    return len(row)


__all__ = ["HFPolicy", "LoraSettings", "PolicyLoadError", "hub_id_message", "CharTokenizer", "HFTokenizer"]


def draw_step(logits: Any, params: Any, generator: Any, tok: Any, done: Any, new_tokens: list, new_lps: list,
              finish: list, stop_at: list) -> tuple[Any, Any]:
    """One decoding draw for a batch: finished rows get padding; the token and its log-prob
    are recorded; a row ends at ``eos`` or at a stop string (``finish``/``stop_at`` per row).
    Returns the drawn tokens and the updated ``done`` mask."""
    torch = _torch()
    nxt, lp = draw(logits, params, generator)
    nxt = torch.where(done, torch.full_like(nxt, tok.pad_id), nxt)
    new_tokens.append(nxt)
    new_lps.append(lp)
    hit_eos = (nxt == tok.eos_id) & ~done
    for r in hit_eos.nonzero().flatten().tolist():
        finish[r] = "stop"
    done = done | hit_eos
    if params.stop:
        toks = torch.stack(new_tokens, 1).tolist()
        for r in (~done).nonzero().flatten().tolist():
            idx = _find_stop(tok.decode(toks[r]), params.stop)
            if idx is not None:
                stop_at[r], finish[r] = idx, "stop"
                done[r] = True
    return nxt, done
