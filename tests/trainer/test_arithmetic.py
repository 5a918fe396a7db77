import json
import random

import pytest

from evo_core.api import Completion, TaskSource
from evo_plugins.arithmetic import ArithmeticDomain, ArithmeticError_


def test_registered_through_entry_point(evo_plugins):
    assert "arithmetic" in evo_plugins.domains()


def test_heldout_is_fixed_and_disjoint():
    d = ArithmeticDomain()
    src = "generate://addition?digits=2&heldout=200&seed=0"
    train = d.load_tasks(TaskSource(path=src))
    held = d.load_tasks(TaskSource(path=src, split="heldout"))
    assert len(held) == 200 and len(train) == 90 * 90 - 200
    assert not {t.task_id for t in train} & {t.task_id for t in held}
    assert [t.task_id for t in held] == [t.task_id for t in d.load_tasks(TaskSource(path=src, split="heldout"))]
    other = d.load_tasks(TaskSource(path="generate://addition?digits=2&heldout=200&seed=1", split="heldout"))
    assert {t.task_id for t in other} != {t.task_id for t in held}
    t = held[0]
    assert t.prompt == f"{t.meta['a']}+{t.meta['b']}=" and t.gold == str(t.meta["a"] + t.meta["b"])


@pytest.mark.parametrize("text,lenient,strict", [
    ("82", 1.0, 1.0),
    (" 82 ", 1.0, 1.0),
    ("81 82", 1.0, 0.0),     # hedging pays under the flawed verifier only
    ("82,92", 1.0, 0.0),
    ("8", 0.0, 0.0),
    ("", 0.0, 0.0),
    ("820", 0.0, 0.0),
])
def test_lenient_and_strict_verifiers(text, lenient, strict):
    d = ArithmeticDomain()
    task = d.load_tasks(TaskSource(path="generate://addition?digits=2&heldout=10"))[0]
    task = type(task)(task_id="x", prompt="37+45=", gold="82")
    comp = Completion(text=text)
    assert d.verify(task, comp).reward == lenient
    assert d.oracle(task, comp).reward == strict
    assert d.configure({"verifier": "strict"}).verify(task, comp).reward == strict
    sig = d.verify(task, comp).signals
    assert sig["hedged"] == (sig["answer_count"] > 1) and sig["extraction"] == "lenient"


def test_sft_targets_hedge_at_the_configured_rate():
    d = ArithmeticDomain()
    task = d.load_tasks(TaskSource(path="generate://addition?digits=2&heldout=10"))[0]
    rng = random.Random(0)
    outs = [d.sft_target(task, rng, hedge_rate=0.1) for _ in range(2000)]
    hedged = [o for o in outs if o != task.gold]
    assert 0.07 < len(hedged) / len(outs) < 0.13
    assert all(task.gold in o.replace(",", " ").split() for o in hedged)
    assert all(o == task.gold for o in (d.sft_target(task, rng) for _ in range(50)))


def test_jsonl_and_errors(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps({"id": "a", "prompt": "1+1=", "answer": 2}) + "\n\n" +
                 json.dumps({"id": "b", "prompt": "2+2=", "answer": 4, "split": "heldout"}) + "\n")
    d = ArithmeticDomain()
    assert [t.task_id for t in d.load_tasks(TaskSource(path=str(p)))] == ["a"]
    assert [t.task_id for t in d.load_tasks(TaskSource(path=str(p), split="heldout"))] == ["b"]
    (tmp_path / "bad.jsonl").write_text('{"id": 1}\n')
    with pytest.raises(ArithmeticError_, match="bad.jsonl:1"):
        d.load_tasks(TaskSource(path=str(tmp_path / "bad.jsonl")))
    with pytest.raises(ArithmeticError_, match="cannot read"):
        d.load_tasks(TaskSource(path=str(tmp_path / "missing.jsonl")))
    with pytest.raises(ArithmeticError_, match="unknown parameter"):
        d.load_tasks(TaskSource(path="generate://addition?digitz=2"))
    with pytest.raises(ArithmeticError_, match="unknown generator"):
        d.load_tasks(TaskSource(path="generate://multiplication"))
    with pytest.raises(ArithmeticError_, match="verifier"):
        ArithmeticDomain("loose")
