"""Tokenizers behind one small interface.

The embedded default is a character tokenizer (digits and arithmetic symbols plus
BOS/EOS/PAD/UNK), so the quickstart needs no downloads. ``HFTokenizer`` adapts any
``transformers`` tokenizer loaded from a local directory to the same interface.

A saved character tokenizer is also a standard transformers tokenizer directory
(``tokenizer.json`` + ``tokenizer_config.json`` naming ``PreTrainedTokenizerFast``), so
``AutoTokenizer.from_pretrained(dir)`` loads it offline with no custom code and no
``trust_remote_code``: a ``tokenizers`` WordLevel model over the characters, a pre-tokenizer
that isolates every character, a ``Fuse`` decoder (no spaces between tokens) and a
post-processor that puts ``<bos>`` first, as the policy's prompts have it.
"""

from __future__ import annotations

import json
import os
from typing import Protocol, Sequence, runtime_checkable

CHAR_TOKENIZER_FILE = "evo_char_tokenizer.json"
HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
DEFAULT_CHARS = "0123456789+-=, "
SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")


@runtime_checkable
class Tokenizer(Protocol):
    pad_id: int
    bos_id: int
    eos_id: int
    vocab_size: int

    def encode(self, text: str, *, add_bos: bool = False) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def save(self, path: str) -> None: ...


class CharTokenizer:
    """One token per character. Unknown characters map to ``<unk>`` rather than fail,
    so a prompt hint with letters never crashes a run (the tiny model just sees UNK)."""

    def __init__(self, chars: str = DEFAULT_CHARS) -> None:
        if len(set(chars)) != len(chars):
            raise ValueError(f"character tokenizer: duplicate characters in {chars!r}")
        self.chars = chars
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = range(len(SPECIALS))
        self._to_id = {c: i + len(SPECIALS) for i, c in enumerate(chars)}
        self.vocab_size = len(SPECIALS) + len(chars)

    def encode(self, text: str, *, add_bos: bool = False) -> list[int]:
        ids = [self._to_id.get(c, self.unk_id) for c in text]
        return [self.bos_id, *ids] if add_bos else ids

    def decode(self, ids: Sequence[int]) -> str:
        out = []
        n = len(SPECIALS)
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if i >= n:
                out.append(self.chars[i - n])
            elif i == self.unk_id:
                out.append("\ufffd")
        return "".join(out)

    def save(self, path: str) -> None:
        """Our own file (exact reload) plus the transformers tokenizer files."""
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, CHAR_TOKENIZER_FILE), "w") as fh:
            json.dump({"type": "char", "chars": self.chars, "specials": list(SPECIALS)}, fh)
        self.save_hf(path)

    def hf_backend(self):
        """The same tokenizer as a ``tokenizers.Tokenizer`` (ids identical to ``encode``)."""
        from tokenizers import Regex, Tokenizer as RustTokenizer, decoders, models, pre_tokenizers, processors

        vocab = {s: i for i, s in enumerate(SPECIALS)}
        vocab.update(self._to_id)
        tk = RustTokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIALS[self.unk_id]))
        tk.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # one piece per character
        tk.decoder = decoders.Fuse()
        bos = SPECIALS[self.bos_id]
        tk.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A $B",
                                                          special_tokens=[(bos, self.bos_id)])
        tk.add_special_tokens(list(SPECIALS))
        return tk

    def save_hf(self, path: str) -> None:
        """``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json``:
        what ``AutoTokenizer.from_pretrained(path)`` needs (no transformers import here)."""
        os.makedirs(path, exist_ok=True)
        self.hf_backend().save(os.path.join(path, "tokenizer.json"))
        pad, bos, eos, unk = (SPECIALS[i] for i in (self.pad_id, self.bos_id, self.eos_id, self.unk_id))
        special = {"bos_token": bos, "eos_token": eos, "pad_token": pad, "unk_token": unk}
        config = {**special, "tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": True,
                  "split_special_tokens": True,  # "<eos>" typed in text is 5 characters, as in encode()
                  "clean_up_tokenization_spaces": False, "model_input_names": ["input_ids", "attention_mask"]}
        for name, data in (("tokenizer_config.json", config), ("special_tokens_map.json", special)):
            with open(os.path.join(path, name), "w") as fh:
                json.dump(data, fh, indent=2, sort_keys=True)

    @classmethod
    def load(cls, path: str) -> "CharTokenizer":
        with open(os.path.join(path, CHAR_TOKENIZER_FILE)) as fh:
            data = json.load(fh)
        if data.get("specials") != list(SPECIALS):
            raise ValueError(f"{path}: character tokenizer with unexpected special tokens {data.get('specials')}")
        return cls(data["chars"])


class HFTokenizer:
    """Adapter over a ``transformers`` tokenizer (loaded from a local directory only)."""

    def __init__(self, tok) -> None:
        self.tok = tok
        if tok.pad_token_id is None:
            # Decoder-only checkpoints often ship without a pad token; EOS is the usual stand-in.
            tok.pad_token = tok.eos_token
        self.pad_id = int(tok.pad_token_id)
        self.eos_id = int(tok.eos_token_id)
        self.bos_id = int(tok.bos_token_id) if tok.bos_token_id is not None else -1
        self.vocab_size = len(tok)

    def encode(self, text: str, *, add_bos: bool = False) -> list[int]:
        ids = list(self.tok.encode(text, add_special_tokens=False))
        if add_bos and self.bos_id >= 0 and (not ids or ids[0] != self.bos_id):  # chat templates often add BOS
            return [self.bos_id, *ids]
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        ids = list(ids)
        if self.eos_id in ids:
            ids = ids[: ids.index(self.eos_id)]
        return self.tok.decode(ids, skip_special_tokens=True)

    def save(self, path: str) -> None:
        self.tok.save_pretrained(path)

    @classmethod
    def load(cls, path: str) -> "HFTokenizer":
        from transformers import AutoTokenizer

        return cls(AutoTokenizer.from_pretrained(path, local_files_only=True))


def load_tokenizer(path: str) -> Tokenizer:
    if os.path.exists(os.path.join(path, CHAR_TOKENIZER_FILE)):
        return CharTokenizer.load(path)
    return HFTokenizer.load(path)
