"""The embedded default policy: a tiny Llama- or Qwen2-shaped model built from a
config, with the character tokenizer. No downloads; ~1M parameters at the defaults."""

from __future__ import annotations

from typing import Any

import attrs

from evo_core.trainer.tokenizer import DEFAULT_CHARS, CharTokenizer


@attrs.frozen(kw_only=True)
class TinyModelConfig:
    arch: str = attrs.field(default="llama", validator=attrs.validators.in_(("llama", "qwen2")))
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 4
    intermediate_size: int = 512
    max_positions: int = 128
    tie_embeddings: bool = True
    chars: str = DEFAULT_CHARS


def build_tiny_model(cfg: TinyModelConfig, *, seed: int = 0) -> tuple[Any, CharTokenizer]:
    """A freshly initialised causal LM and its tokenizer. Initialisation is seeded so the
    same config and seed give the same weights."""
    import torch

    tok = CharTokenizer(cfg.chars)
    common: dict[str, Any] = dict(
        vocab_size=tok.vocab_size,
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        max_position_embeddings=cfg.max_positions,
        tie_word_embeddings=cfg.tie_embeddings,
        bos_token_id=tok.bos_id,
        eos_token_id=tok.eos_id,
        pad_token_id=tok.pad_id,
    )
    if cfg.arch == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM

        model_cls, hf_cfg = LlamaForCausalLM, LlamaConfig(**common)
    else:
        from transformers import Qwen2Config, Qwen2ForCausalLM

        model_cls, hf_cfg = Qwen2ForCausalLM, Qwen2Config(**common)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(hf_cfg)
    model.eval()
    return model, tok
