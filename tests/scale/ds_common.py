"""The tiny model, batch and loss shared by the DeepSpeed test and its worker."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import Qwen2Config, Qwen2ForCausalLM

VOCAB, SEQ, BATCH = 32, 12, 8


def make_model() -> Qwen2ForCausalLM:
    torch.manual_seed(1234)
    cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      tie_word_embeddings=True)
    model = Qwen2ForCausalLM(cfg)
    model.config._attn_implementation = "eager"
    return model


def make_batch() -> torch.Tensor:
    g = torch.Generator().manual_seed(99)
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)


def token_loss(model, ids: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy; every row has the same length, so the mean of
    per-rank means equals the full-batch mean (what data parallelism must reproduce)."""
    logits = model(input_ids=ids).logits[:, :-1]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1))
