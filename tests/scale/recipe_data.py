"""What the recipe runs swap in on a CPU: a tiny local HF-format model built from a config,
and small task files in the public datasets' own formats (BigMath, AIME/CNMO, TACO,
LiveCodeBench, SWE-bench rows with a local git repository)."""

from __future__ import annotations

import base64
import json
import pickle
import subprocess
import zlib
from pathlib import Path

# A small alphabet: prompts are mostly <unk> to the model, and its random replies are short
# runs of digits and symbols, so some rollouts earn reward and groups have variance.
MODEL_CHARS = "0123456789 +-=.,"
# A chat template in the Qwen style (what a real instruct model's tokenizer carries).
CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def build_model(path: Path, *, seed: int = 0) -> Path:
    """A 1-layer Qwen2 built from its config (no download), saved with ``save_pretrained``
    next to a transformers tokenizer directory (no EvoTrainer-specific files)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from evo_core.trainer.tokenizer import CharTokenizer

    path.mkdir(parents=True, exist_ok=True)
    tok = CharTokenizer(MODEL_CHARS)
    tok.save_hf(str(path))
    cfg_path = path / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["chat_template"] = CHAT_TEMPLATE
    cfg_path.write_text(json.dumps(cfg, indent=2))
    config = Qwen2Config(vocab_size=tok.vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=8192,
                         tie_word_embeddings=True, bos_token_id=tok.bos_id, eos_token_id=tok.eos_id,
                         pad_token_id=tok.pad_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        Qwen2ForCausalLM(config).save_pretrained(str(path))
    return path


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def math_files(root: Path) -> tuple[Path, Path]:
    """BigMath-style training rows; a held-out file mixing AIME 2024, AIME 2025 and CNMO 2024
    rows as those datasets spell them."""
    train = [{"problem": f"Compute {a} + {b}.", "answer": str(a + b), "source": "synthetic",
              "domain": ["Mathematics -> Algebra -> Prealgebra"], "llama8b_solve_rate": 0.5}
             for a in range(8) for b in range(5)]
    held = [
        {"ID": "2024-I-1", "Problem": "Find 3 + 4.", "Solution": "Adding gives $\\boxed{7}$.", "Answer": 7},
        {"problem_idx": 1, "problem": "Find 2 + 6.", "answer": "8"},
        {"question": "Find 9 - 8.", "answer": "1", "source": "cnmo24"},
    ]
    return _jsonl(root / "bigmath_hard.jsonl", train), _jsonl(root / "aime24_aime25_cnmo24.jsonl", held)


def _lcb_private(tests: list[dict]) -> str:
    """LiveCodeBench's released private tests: base64(zlib(pickle(json string)))."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()


def code_files(root: Path) -> tuple[Path, Path]:
    """TACO rows (stdin/stdout ``input_output``) and LiveCodeBench rows (public tests as
    JSON, private tests encoded as released)."""
    silent = {"question": "Read nothing. Print nothing.",
              "input_output": json.dumps({"inputs": [""], "outputs": [""]}),
              "solutions": json.dumps(["pass"]), "starter_code": "", "difficulty": "EASY", "source": "synthetic"}
    train = [dict(silent, id=f"taco-{i}") for i in range(39)] + [
        {"id": "taco-sum", "question": "Read two integers and print their sum.",
         "input_output": json.dumps({"inputs": ["1 2\n", "5 7\n"], "outputs": ["3\n", "12\n"]}),
         "solutions": json.dumps(["a, b = map(int, input().split())\nprint(a + b)"]), "starter_code": "",
         "difficulty": "EASY", "source": "synthetic"}]
    held = [{"question_id": "abc001_a", "question_title": "Sum", "platform": "atcoder", "contest_id": "abc001",
             "contest_date": "2025-01-01T00:00:00", "difficulty": "easy", "starter_code": "",
             "question_content": "Read two integers A and B and print A + B.",
             "public_test_cases": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]),
             "private_test_cases": _lcb_private([{"input": "4 4\n", "output": "8\n", "testtype": "stdin"}]),
             "metadata": "{}"}]
    return _jsonl(root / "taco_verified.jsonl", train), _jsonl(root / "lcb_v6_atcoder.jsonl", held)


def _git(args: list[str], cwd: Path) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin:/usr/local/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


HIDDEN_TEST = '''from calc.ops import mean


def test_mean_of_pair():
    assert mean([1, 2]) == 1.5
'''


def swe_files(root: Path) -> tuple[Path, Path]:
    """SWE-bench rows over a local git repository (``repo`` relative to the task file):
    ``mean`` floors its result; the hidden test (``test_patch``) fails before the gold
    ``patch`` and passes after it."""
    repo = root / "repos" / "calc"
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "calc" / "ops.py").write_text("def add(a, b):\n    return a + b\n\n\ndef mean(xs):\n    return sum(xs) // len(xs)\n")
    (repo / "tests" / "test_ops.py").write_text("from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    _git(["init", "-q"], repo)
    _git(["add", "-A"], repo)
    _git(["commit", "-q", "-m", "calc"], repo)
    base = _git(["rev-parse", "HEAD"], repo).strip()
    ops = repo / "calc" / "ops.py"
    ops.write_text(ops.read_text().replace("sum(xs) // len(xs)", "sum(xs) / len(xs)"))
    patch = _git(["diff"], repo)
    _git(["checkout", "-q", "--", "."], repo)
    (repo / "tests" / "test_hidden.py").write_text(HIDDEN_TEST)
    _git(["add", "-N", "tests/test_hidden.py"], repo)
    test_patch = _git(["diff"], repo)
    _git(["rm", "-q", "--cached", "tests/test_hidden.py"], repo)
    (repo / "tests" / "test_hidden.py").unlink()
    row = {"repo": "repos/calc", "base_commit": base, "patch": patch, "test_patch": test_patch,
           "FAIL_TO_PASS": json.dumps(["tests/test_hidden.py::test_mean_of_pair"]),
           "PASS_TO_PASS": json.dumps(["tests/test_ops.py::test_add"]), "version": "0.1",
           "created_at": "2025-01-01T00:00:00Z", "hints_text": "", "environment_setup_commit": base}
    train = [dict(row, instance_id=f"calc__calc-{i}",
                  problem_statement="mean([1, 2]) returns 1; it should return 1.5.") for i in range(8)]
    held = [dict(row, instance_id="calc__calc-heldout", problem_statement="mean() floors: mean([1, 2]) == 1.")]
    return _jsonl(root / "train_tasks.jsonl", train), _jsonl(root / "heldout_tasks.jsonl", held)
