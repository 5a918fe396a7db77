import attrs

from evo_core.api import TaskSource
from evo_core.config import SFTSection
from evo_core.trainer.policy import HFPolicy
from evo_core.trainer.sft import lr_at, warm_start
from evo_core.trainer.tiny import TinyModelConfig
from evo_arithmetic.domain import ArithmeticDomain
from .testlib import SOURCE, TINY_MODEL


def test_sft_learns_and_is_cached_by_key(tmp_path):
    dom = ArithmeticDomain()
    tasks = dom.load_tasks(TaskSource(path=SOURCE))
    cfg = SFTSection(enabled=True, steps=30, batch_size=16, lr=3e-3, warmup_steps=3, cache_dir=str(tmp_path),
                     options={"plant_rate": 0.1})
    first = HFPolicy.tiny(TinyModelConfig(**TINY_MODEL), seed=0)
    start = first.digest()
    a = warm_start(first, dom, tasks, cfg, seed=0, key_parts={"m": 1})
    assert not a["cached"] and first.digest() != start and a["sft_loss"] < 2.5
    second = HFPolicy.tiny(TinyModelConfig(**TINY_MODEL), seed=0)
    b = warm_start(second, dom, tasks, cfg, seed=0, key_parts={"m": 1})
    assert b["cached"] and b["key"] == a["key"] and second.digest() == first.digest()
    # anything that changes the weights changes the key; the cache location does not
    assert warm_start(HFPolicy.tiny(TinyModelConfig(**TINY_MODEL)), dom, tasks, attrs.evolve(cfg, steps=1),
                      seed=0, key_parts={"m": 1})["key"] != a["key"]
    moved = warm_start(HFPolicy.tiny(TinyModelConfig(**TINY_MODEL)), dom, tasks,
                       attrs.evolve(cfg, cache_dir=str(tmp_path / "elsewhere")), seed=0, key_parts={"m": 1})
    assert moved["key"] == a["key"] and not moved["cached"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]  # no half-written entries


def test_sft_schedule_warms_up_then_decays_to_min():
    cfg = SFTSection(steps=100, lr=1e-3, warmup_steps=10, min_lr=1e-4)
    assert lr_at(1, cfg) == 1e-4 and lr_at(10, cfg) == 1e-3
    assert lr_at(55, cfg) < 1e-3 and abs(lr_at(100, cfg) - 1e-4) < 1e-12


def test_a_domain_whose_targets_change_gets_a_new_warm_start(tmp_path):
    """The config does not pin what ``sft_target`` returns (a domain's plant can change with
    its code): the cache key carries a digest of the targets, so the old weights are not reused."""

    class ChangedPlant(ArithmeticDomain):
        def sft_target(self, task, rng, *, plant_rate=0.0):
            out = super().sft_target(task, rng, plant_rate=plant_rate)
            return out if out == task.gold else out + "!"

    tasks = ArithmeticDomain().load_tasks(TaskSource(path=SOURCE))
    cfg = SFTSection(enabled=True, steps=2, batch_size=16, cache_dir=str(tmp_path), options={"plant_rate": 0.5})
    a = warm_start(HFPolicy.tiny(TinyModelConfig(**TINY_MODEL)), ArithmeticDomain(), tasks, cfg, seed=0, key_parts={"m": 1})
    b = warm_start(HFPolicy.tiny(TinyModelConfig(**TINY_MODEL)), ChangedPlant(), tasks, cfg, seed=0, key_parts={"m": 1})
    assert not b["cached"] and b["key"] != a["key"]
    same = warm_start(HFPolicy.tiny(TinyModelConfig(**TINY_MODEL)), ArithmeticDomain(), tasks, cfg, seed=0,
                      key_parts={"m": 1})
    assert same["cached"] and same["key"] == a["key"]


def test_run_seeds_share_a_warm_start_with_its_own_seed(tiny_cfg, tmp_path):
    """sft.seed set: every run seed loads one warm start (renamed signals do not split it);
    unset: each run seed trains its own."""
    from evo_core.plugins import PluginManager
    from evo_core.run_setup import build_session

    sft = {"enabled": True, "steps": 3, "batch_size": 8, "cache_dir": str(tmp_path / "sft")}

    def start(run_seed, **sft_over):
        cfg = tiny_cfg(run={"seed": run_seed}, sft={**sft, **sft_over},
                       task={"options": {"signal_names": "hashed", "signal_seed": run_seed}})
        session, info = build_session(cfg, PluginManager())
        return info, session.policy.digest()

    a, wa = start(0, seed=0)
    b, wb = start(1, seed=0)
    assert not a["cached"] and b["cached"] and b["key"] == a["key"] and wb == wa
    c, wc = start(1)  # no sft.seed: the run seed is the warm start's
    assert not c["cached"] and c["key"] != a["key"] and wc != wa
    d, _ = start(1, seed=1)  # the same warm start, named by its own seed
    assert d["cached"] and d["key"] == c["key"]


def test_segment_targets_train_the_policy_turns_only():
    from evo_core.trainer.sft import target_ids
    from evo_core.trainer.tokenizer import CharTokenizer

    tok = CharTokenizer("0123456789+-=, ")
    ids, mask = target_ids(tok, "12")
    assert ids == tok.encode("12") + [tok.eos_id] and mask == [1, 1, 1]
    # an episode transcript: the environment's text (the observation) gets no loss, EOS does
    ids, mask = target_ids(tok, [("1+", True), ("=3, ", False), ("4", True)])
    assert ids == tok.encode("1+=3, 4") + [tok.eos_id]
    assert mask == [1, 1, 0, 0, 0, 0, 1, 1]
