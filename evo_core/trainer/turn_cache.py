"""Batched episodes without re-encoding the transcript: each episode's KV cache is kept from
one turn to the next, so a turn's forward pass covers only what is new (the last reply's final
token and the environment's observation), not the whole conversation again.

Profiled on ``generate://tinyrepo`` with an SFT'd tiny policy (docs/swe.md, "Measured
figures"), re-encoding the transcript was 44% of a step's generation and growing the cache
token by token another 21%; this removes the first.

One :class:`TurnCache` serves one ``run_episode_batches`` call (``HFPolicy.open_turns``). Its
rows are the step's episodes; a turn samples the live ones:

- the first turn encodes each prompt (BOS included), left-padded, as ``HFPolicy.sample`` does;
- a later turn appends, right-padded, each episode's *pending* tokens (the last token of its
  reply, which is sampled but never fed) and the encoding of the prompt's new text (the
  prompt must extend the last prompt plus the reply as sampled, which the driver guarantees);
- padding stays in the cache as masked columns (holes); every real token keeps its position
  (``position_ids`` = tokens before it), so the model sees the same sequence as a re-encoded
  prompt. The feed is the layout ``episodes.episode_sample`` trains on (the reply's sampled
  token ids, the observation encoded alone); with a character tokenizer it equals re-encoding.

Rows are dropped between turns (finished episodes), never within one: an episode must keep its
cache. The sampler draws for every live row each step, like ``HFPolicy.sample``, so a seed
gives the same draws; the logits agree with the re-encoding path up to float rounding (a
token's keys are computed in a one-token step instead of a prompt-wide pass), so a greedy
episode's replies are the same (tested) and a sampled one's may differ only where two tokens'
probabilities tie to the last bits.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from evo_core.trainer.policy import _cache_kwarg, _first_len_reaching, _out_cache, _select_rows, draw_step
from evo_core.trainer.protocols import Sample, SamplingParams


def _torch() -> Any:
    import torch

    return torch


class TurnCache:
    """The KV caches of a batch of growing transcripts (one per episode), between turns."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.rows: list[int] = []  # the episode id of each cache row
        self.past: Any = None
        self.attn: Any = None  # [rows, columns]: 1 where a column holds a real token of the row
        self.next_pos: Any = None  # [rows]: the real tokens of each row so far
        self.known: dict[int, str] = {}  # episode -> the text its cache (plus pending) holds
        self.pending: dict[int, list[int]] = {}  # episode -> sampled tokens not yet fed
        self.first_ids: dict[int, tuple[int, ...]] = {}

    def generate(self, episodes: Sequence[int], prompts: Sequence[str], params: SamplingParams, *,
                 generator: Any = None) -> list[list[Sample]]:
        """One reply per episode (``params.n`` must be 1), as ``engine.generate`` returns it."""
        if params.n != 1:
            raise ValueError("TurnCache.generate samples one reply per episode (params.n == 1)")
        if params.max_new_tokens < 1:
            raise ValueError("TurnCache.generate needs max_new_tokens >= 1")
        torch = _torch()
        pol = self.policy
        if generator is None and params.seed is not None:
            generator = torch.Generator(device="cpu").manual_seed(params.seed)
        was_training = pol.model.training
        pol.model.eval()
        try:
            with torch.no_grad():
                if self.past is None:
                    logits = self._first(episodes, prompts)
                else:
                    logits = self._extend(episodes, prompts)
                toks, lps, finish, stop_at, fed = self._decode(logits, params, generator)
        finally:
            if was_training:
                pol.model.train()
        return [[s] for s in self._finish(episodes, prompts, toks, lps, finish, stop_at, fed)]

    # -- feeding the prompts -----------------------------------------------------------------
    def _first(self, episodes: Sequence[int], prompts: Sequence[str]) -> Any:
        pol = self.policy
        enc, ids, attn, pos = pol.left_padded(prompts)
        past, logits = pol._prefill(ids, attn, pos, enc)
        self.past = _growing(past)
        self.attn, self.next_pos, self.rows = attn, pos[:, -1] + 1, list(episodes)
        for e, p, x in zip(episodes, prompts, enc):
            self.known[e], self.pending[e], self.first_ids[e] = p, [], tuple(x)
        return logits

    def _extend(self, episodes: Sequence[int], prompts: Sequence[str]) -> Any:
        pol = self.policy
        torch = _torch()
        tok = pol.tokenizer
        where = {e: r for r, e in enumerate(self.rows)}
        missing = [e for e in episodes if e not in where]
        if missing:
            raise ValueError(f"TurnCache: episodes {missing[:5]} have no cache (a turn may only drop episodes)")
        if [e for e in self.rows if e in set(episodes)] != list(episodes) or len(episodes) != len(self.rows):
            idx = torch.tensor([where[e] for e in episodes], device=pol.device)
            self.past = _select_rows(self.past, idx)
            self.attn, self.next_pos, self.rows = self.attn[idx], self.next_pos[idx], list(episodes)
        chunks = []
        for e, p in zip(episodes, prompts):
            known = self.known[e]
            if not p.startswith(known):
                raise ValueError(f"TurnCache: episode {e}'s prompt does not extend its last prompt and reply")
            chunk = self.pending[e] + tok.encode(p[len(known):])
            if not chunk:
                raise ValueError(f"TurnCache: episode {e} has nothing new to feed")
            chunks.append(chunk)
            self.known[e], self.pending[e] = p, []
        B, C = len(chunks), max(len(c) for c in chunks)
        ids = torch.full((B, C), tok.pad_id, dtype=torch.long)
        mask = torch.zeros((B, C), dtype=self.attn.dtype)
        for r, c in enumerate(chunks):
            ids[r, :len(c)] = torch.tensor(c)
            mask[r, :len(c)] = 1
        ids, mask = ids.to(pol.device), mask.to(pol.device)
        lens = mask.sum(-1)
        pos = self.next_pos[:, None] + (mask.cumsum(-1) - 1).clamp(min=0)
        self.attn = torch.cat([self.attn, mask], dim=1)
        out = pol.model(input_ids=ids, attention_mask=self.attn, position_ids=pos, use_cache=True,
                        **{_cache_kwarg(pol.model): self.past})
        self.past = _out_cache(out)
        self.next_pos = self.next_pos + lens
        return out.logits[torch.arange(B, device=pol.device), lens - 1, :]

    # -- sampling ----------------------------------------------------------------------------
    def _decode(self, logits: Any, params: SamplingParams, generator: Any
                ) -> tuple[list[list[int]], list[list[float]], list[str], list[Optional[int]], list[int]]:
        """Sampling as ``HFPolicy._sample_batch`` does it (the same draws), except that a row's
        newest token is fed only while the row goes on: its last token stays pending."""
        pol = self.policy
        torch = _torch()
        tok = pol.tokenizer
        B = logits.shape[0]
        done = torch.zeros(B, dtype=torch.bool, device=pol.device)
        finish = ["length"] * B
        stop_at: list[Optional[int]] = [None] * B
        new_tokens: list[Any] = []
        new_lps: list[Any] = []
        fed = [0] * B  # reply tokens fed into the cache, per row
        ckw = _cache_kwarg(pol.model)
        for t in range(params.max_new_tokens):
            nxt, done = draw_step(logits.float(), params, generator, tok, done, new_tokens, new_lps, finish, stop_at)
            if bool(done.all()) or t == params.max_new_tokens - 1:
                break
            feed = ~done  # a row that just ended keeps its last token for the next turn
            for r in feed.nonzero().flatten().tolist():
                fed[r] += 1
            self.attn = torch.cat([self.attn, feed.to(self.attn.dtype)[:, None]], dim=1)
            out = pol.model(input_ids=nxt[:, None], attention_mask=self.attn, position_ids=self.next_pos[:, None],
                            use_cache=True, **{ckw: self.past})
            self.past, logits = _out_cache(out), out.logits[:, -1, :]
            self.next_pos = self.next_pos + feed.to(self.next_pos.dtype)
        toks = torch.stack(new_tokens, 1).tolist()
        lps = torch.stack(new_lps, 1).tolist()
        return toks, lps, finish, stop_at, fed

    def _finish(self, episodes: Sequence[int], prompts: Sequence[str], toks: list[list[int]], lps: list[list[float]],
                finish: list[str], stop_at: list[Optional[int]], fed: list[int]) -> list[Sample]:
        tok = self.policy.tokenizer
        out = []
        for r, (e, p) in enumerate(zip(episodes, prompts)):
            row = toks[r]
            n = len(row)
            if finish[r] == "stop" and tok.eos_id in row and stop_at[r] is None:
                n = row.index(tok.eos_id) + 1
            elif stop_at[r] is not None:
                n = _first_len_reaching(row, tok, stop_at[r])
            ids = tuple(row[:n])
            if fed[r] >= n and n:  # a multi-token stop ended inside a fed token: unfeed the rest
                self._unfeed(r, fed[r] - n + 1)
                fed[r] = n - 1
            self.pending[e] = list(ids[fed[r]:])
            self.known[e] = p + tok.decode(ids)
            text = tok.decode(ids)
            if stop_at[r] is not None:
                text = text[:stop_at[r]]
            out.append(Sample(prompt=p, text=text, prompt_ids=self.first_ids[e], token_ids=ids,
                              logprobs=tuple(float(x) for x in lps[r][:n]), truncated=finish[r] == "length",
                              finish_reason=finish[r]))
        return out

    def _unfeed(self, r: int, k: int) -> None:
        """Mask row ``r``'s last ``k`` fed columns (they hold tokens its reply does not keep)."""
        cols = self.attn[r].nonzero().flatten()[-k:]
        self.attn[r, cols] = 0
        self.next_pos[r] -= k



def _growing(cache: Any) -> Any:
    """The cache with its layers' keys and values in buffers that grow by doubling: a
    ``DynamicCache`` concatenates at every token, copying the whole cache (the cost that
    dominated decoding once the transcript was no longer re-encoded). Other caches are kept."""
    layers = getattr(cache, "layers", None)
    if not layers or not all(type(x).__name__ == "DynamicLayer" for x in layers):
        return cache
    cache.layers = [_GrowingLayer.of(x) for x in layers]
    return cache


def _growing_layer_class() -> Any:
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A ``DynamicLayer`` whose ``keys`` / ``values`` are views of the first n columns of
        larger buffers: appending writes into the spare columns (no copy of the cache)."""

        @classmethod
        def of(cls, layer: Any) -> Any:
            new = cls()
            for k, v in vars(layer).items():
                setattr(new, k, v)
            new._bk = new._bv = None
            if getattr(layer, "is_initialized", False) and layer.keys.numel():
                new._reserve(layer.keys, layer.values, layer.keys.shape[-2])
            return new

        def _reserve(self, keys: Any, values: Any, need: int) -> None:
            torch = _torch()
            cap = max(need + 64, 2 * need)
            n = keys.shape[-2]
            shape_k = (*keys.shape[:-2], cap, keys.shape[-1])
            shape_v = (*values.shape[:-2], cap, values.shape[-1])
            self._bk = torch.empty(shape_k, dtype=keys.dtype, device=keys.device)
            self._bv = torch.empty(shape_v, dtype=values.dtype, device=values.device)
            self._bk[..., :n, :] = keys
            self._bv[..., :n, :] = values
            self.keys, self.values = self._bk[..., :n, :], self._bv[..., :n, :]

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized or self._bk is None:
                if not self.is_initialized:
                    self.lazy_initialization(key_states, value_states)
                self._reserve(key_states, value_states, key_states.shape[-2])
                return self.keys, self.values
            n, m = self.keys.shape[-2], self.keys.shape[-2] + key_states.shape[-2]
            if m > self._bk.shape[-2]:
                self._reserve(self.keys, self.values, m)
            self._bk[..., n:m, :] = key_states
            self._bv[..., n:m, :] = value_states
            self.keys, self.values = self._bk[..., :m, :], self._bv[..., :m, :]
            return self.keys, self.values

        def batch_select_indices(self, indices: Any) -> None:
            if self._bk is not None:
                n = self.keys.shape[-2]
                self._bk, self._bv = self._bk[indices, ...], self._bv[indices, ...]
                self.keys, self.values = self._bk[..., :n, :], self._bv[..., :n, :]

    return GrowingLayer


class _GrowingLayerProxy:
    _cls: Any = None

    def of(self, layer: Any) -> Any:
        if self._cls is None:
            type(self)._cls = _growing_layer_class()
        return self._cls.of(layer)


_GrowingLayer = _GrowingLayerProxy()
