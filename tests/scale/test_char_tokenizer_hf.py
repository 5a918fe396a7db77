"""The character tokenizer as a transformers tokenizer directory: ``AutoTokenizer`` loads
it offline (no custom code) and gives exactly the ids and text of ``CharTokenizer``."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evo_core.trainer.tokenizer import SPECIALS, CharTokenizer, HFTokenizer, load_tokenizer

CHARS = "0123456789+-=, "


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    from transformers import AutoTokenizer

    path = tmp_path_factory.mktemp("chartok")
    tok = CharTokenizer(CHARS)
    tok.save(str(path))
    return tok, AutoTokenizer.from_pretrained(str(path), local_files_only=True), path


def test_directory_is_a_standard_fast_tokenizer(saved):
    tok, hf, path = saved
    cfg = json.loads((path / "tokenizer_config.json").read_text())
    assert cfg["tokenizer_class"] == "PreTrainedTokenizerFast" and "auto_map" not in cfg  # no remote code
    assert (hf.pad_token_id, hf.bos_token_id, hf.eos_token_id, hf.unk_token_id) == (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id)
    assert len(hf) == tok.vocab_size
    assert isinstance(load_tokenizer(str(path)), CharTokenizer)  # our own file still wins: exact reload


# any text: the characters, unknown ones (letters, newlines, astral code points) and the
# special tokens' spellings, which are plain characters to the character tokenizer. Lone
# surrogates (category Cs) are left out: they are not encodable text, and the Rust tokenizer
# refuses the str before any id is computed.
pieces = st.sampled_from(CHARS) | st.characters(blacklist_categories=("Cs",)) | st.sampled_from(SPECIALS)
texts = st.lists(pieces, max_size=30).map("".join)


@settings(max_examples=200, deadline=None)
@given(texts)
def test_ids_match_the_character_tokenizer(saved, text):
    tok, hf, _ = saved
    assert hf(text)["input_ids"] == tok.encode(text, add_bos=True)
    assert hf.encode(text, add_special_tokens=False) == tok.encode(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(len(SPECIALS), len(SPECIALS) + len(CHARS) - 1), max_size=30))
def test_text_matches_the_character_tokenizer(saved, ids):
    tok, hf, _ = saved
    assert hf.decode(ids) == tok.decode(ids)
    with_specials = [tok.bos_id, *ids, tok.eos_id]
    assert hf.decode(with_specials, skip_special_tokens=True) == tok.decode(with_specials)


def test_hf_adapter_over_the_saved_directory_behaves_the_same(saved):
    tok, hf, _ = saved
    adapter = HFTokenizer(hf)
    for text in ("12+34=", "", "7 , 8", "x9"):
        assert adapter.encode(text, add_bos=True) == tok.encode(text, add_bos=True)
    for text in ("12+34=", "", "7 , 8"):
        assert adapter.decode(tok.encode(text) + [tok.eos_id, 5]) == tok.decode(tok.encode(text))
    # the one difference: transformers drops <unk> as a special token; ours shows U+FFFD
    assert adapter.decode(tok.encode("x9")) == "9" and tok.decode(tok.encode("x9")) == "\ufffd9"
