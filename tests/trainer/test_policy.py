
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from evo_core.trainer.engine import InProcessEngine
from evo_core.trainer.policy import HFPolicy, PolicyLoadError
from evo_core.trainer.protocols import Policy, RolloutEngine, SamplingParams
from evo_core.trainer.tiny import TinyModelConfig
from evo_core.trainer.tokenizer import CharTokenizer, HFTokenizer, load_tokenizer

from .testlib import TINY_MODEL
from evo_core.testing import require


@pytest.fixture(scope="module")
def policy():
    return HFPolicy.tiny(TinyModelConfig(**TINY_MODEL), seed=0)


@given(st.text(alphabet="0123456789+-=, ", max_size=30))
def test_char_tokenizer_round_trip(text):
    tok = CharTokenizer()
    ids = tok.encode(text, add_bos=True)
    assert ids[0] == tok.bos_id
    assert tok.decode(ids[1:]) == text
    assert tok.decode(ids[1:] + [tok.eos_id] + tok.encode("99")) == text  # decoding stops at EOS


def test_char_tokenizer_unknown_chars_map_to_unk():
    tok = CharTokenizer()
    assert tok.encode("a1") == [tok.unk_id, tok.encode("1")[0]]
    with pytest.raises(ValueError, match="duplicate"):
        CharTokenizer("11")


def test_policy_satisfies_protocols(policy):
    assert isinstance(policy, Policy)
    assert isinstance(InProcessEngine(policy), RolloutEngine)
    assert policy.num_parameters() > 0


def test_sampling_shapes_logprobs_and_determinism(policy):
    params = SamplingParams(n=3, temperature=1.0, max_new_tokens=5)
    a = policy.sample(["12+34=", "5+6="], params, generator=torch.Generator().manual_seed(1))
    b = policy.sample(["12+34=", "5+6="], params, generator=torch.Generator().manual_seed(1))
    assert [len(g) for g in a] == [3, 3]
    assert [[s.token_ids for s in g] for g in a] == [[s.token_ids for s in g] for g in b]
    for g in a:
        for s in g:
            assert len(s.logprobs) == len(s.token_ids) <= 5
            assert all(lp <= 0 for lp in s.logprobs)
            assert s.truncated == (s.finish_reason == "length")
            if not s.truncated:
                assert s.token_ids[-1] == policy.tokenizer.eos_id
    # the sampler's log-probs equal the scorer's at temperature 1 (what the loss relies on)
    flat = [s for g in a for s in g]
    lp, mask, ent = policy.score([s.prompt_ids for s in flat], [s.token_ids for s in flat], with_entropy=True)
    for r, s in enumerate(flat):
        n = len(s.token_ids)
        assert torch.allclose(lp[r, :n], torch.tensor(s.logprobs), atol=1e-4)
        assert mask[r, :n].sum() == n and mask[r, n:].sum() == 0
    assert (ent >= 0).all()


def test_greedy_is_deterministic_and_batch_independent(policy):
    p = SamplingParams(n=1, temperature=0.0, max_new_tokens=4)
    alone = policy.sample(["7+8="], p)[0][0]
    batched = policy.sample(["123+456=", "7+8="], p)[1][0]  # left padding must not change the result
    assert alone.token_ids == batched.token_ids


def test_stop_strings_cut_text_and_truncation_flag(policy):
    params = SamplingParams(n=4, temperature=1.0, max_new_tokens=6, stop=(",", " "))
    for s in policy.sample(["1+1="], params, generator=torch.Generator().manual_seed(0))[0]:
        assert "," not in s.text and " " not in s.text
        assert len(s.logprobs) == len(s.token_ids)
    long = policy.sample(["1+1="], SamplingParams(n=2, max_new_tokens=1), generator=torch.Generator().manual_seed(3))[0]
    for s in long:
        assert len(s.token_ids) == 1
        assert s.truncated == (s.token_ids[0] != policy.tokenizer.eos_id)


def test_save_and_load_from_local_directory(policy, tmp_path):
    policy.save(str(tmp_path / "p"))
    loaded = HFPolicy.load(str(tmp_path / "p"))
    assert loaded.digest() == policy.digest()
    assert isinstance(loaded.tokenizer, CharTokenizer)
    p = SamplingParams(n=1, temperature=0.0, max_new_tokens=4)
    assert loaded.sample(["3+4="], p)[0][0].token_ids == policy.sample(["3+4="], p)[0][0].token_ids


def test_from_pretrained_refuses_non_local_paths(tmp_path):
    with pytest.raises(PolicyLoadError, match="not a local directory"):
        HFPolicy.from_pretrained("Qwen/Qwen2-0.5B")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PolicyLoadError, match="config.json"):
        HFPolicy.from_pretrained(str(tmp_path / "empty"))


def test_hf_backend_with_a_transformers_tokenizer(tmp_path):
    """A plain transformers checkpoint (Qwen2 shape, fast tokenizer) loads from disk."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    chars = list("0123456789+=")
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, **{c: i + 4 for i, c in enumerate(chars)}}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>")
    cfg = Qwen2Config(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=True)
    torch.manual_seed(0)
    Qwen2ForCausalLM(cfg).save_pretrained(tmp_path / "m")
    fast.save_pretrained(tmp_path / "m")
    pol = HFPolicy.from_pretrained(str(tmp_path / "m"))
    assert isinstance(pol.tokenizer, HFTokenizer)
    assert isinstance(load_tokenizer(str(tmp_path / "m")), HFTokenizer)
    assert pol.tokenizer.encode("12+3") == [vocab[c] for c in "12+3"]
    out = pol.sample(["1+2="], SamplingParams(n=2, max_new_tokens=3), generator=torch.Generator().manual_seed(0))[0]
    assert len(out) == 2 and all(len(s.logprobs) == len(s.token_ids) for s in out)
    lp = pol.logprobs([out[0].prompt_ids], [out[0].token_ids])
    assert lp.requires_grad
    fast.chat_template = "{% for m in messages %}{{ m['content'] }}={% endfor %}"
    pol.tokenizer.tok.chat_template = fast.chat_template
    assert pol.format_chat([{"role": "user", "content": "1+2"}]) == "1+2="
    turns = pol.chat([[{"role": "user", "content": "1+2"}]], SamplingParams(n=2, max_new_tokens=2),
                     generator=torch.Generator().manual_seed(0))
    assert len(turns[0]) == 2 and turns[0][0].prompt == "1+2="
    assert turns[0][0].prompt_ids[0] == 1  # BOS once


def test_lora_adapter_trains_only_adapter_weights(tmp_path):
    require("peft", "the lora extra")
    from evo_core.trainer.policy import LoraSettings

    HFPolicy.tiny(TinyModelConfig(**TINY_MODEL)).save(str(tmp_path / "base"))
    pol = HFPolicy.from_pretrained(str(tmp_path / "base"), lora=LoraSettings(r=2, alpha=4))
    trainable = [n for n, p in pol.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora" in n for n in trainable)
    with torch.no_grad():  # move the adapter away from its zero init so the round trip means something
        for n, p in pol.model.named_parameters():
            if "lora_B" in n:
                p.add_(0.01)
    pol.save(str(tmp_path / "adapter"))
    assert (tmp_path / "adapter" / "adapter_config.json").exists()
    back = HFPolicy.load(str(tmp_path / "adapter"))
    assert back.lora is not None and back.digest() == pol.digest()
