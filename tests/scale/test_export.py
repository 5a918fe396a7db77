"""``evo export``: a real tiny run's policy out as a transformers directory (loaded by
``AutoModelForCausalLM``/``AutoTokenizer``, served by ``evo serve``), ``PolicyExported``
in the run's log, the checkpoint resolver's sources, and the one-line errors."""

from __future__ import annotations

import io
import json
import os

import httpx
import pytest
import torch

from evo_core.export import (
    ExportError,
    export_policy,
    exports,
    load_checkpoint_policy,
    resolve_policy_checkpoint,
)
from evo_core.store import open_store, run_stream
from evo_events import Emitter, PolicyExported, PolicyUpdated, Promoted, RunFinished, RunStarted, StepCompleted
from .export_testlib import evo, evo_serve, tiny_quickstart_run

pytestmark = pytest.mark.timeout(600)

PROMPT = "3+4="


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("export-run")
    url, run_id = tiny_quickstart_run(work)
    return work, url, run_id


def _updates(url: str, run_id: str) -> dict[int, PolicyUpdated]:
    st = open_store(url)
    try:
        return {e.policy_version: e for e in st.events(run_stream(run_id), types=[PolicyUpdated.TYPE])
                if e.target == "trainer"}
    finally:
        st.close()


def _reference_policy(url: str, run_id: str, version: int):
    st = open_store(url)
    try:
        return load_checkpoint_policy(st, resolve_policy_checkpoint(st, run_id, version))
    finally:
        st.close()


def test_export_main_loads_with_auto_classes_generates_and_is_logged(tiny_run, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    work, url, run_id = tiny_run
    out = tmp_path / "main"
    r = evo("export", run_id, "--main", "-o", str(out), "--store", url, "--json")
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)
    ups = _updates(url, run_id)
    main_version = row["policy_version"]
    assert row["main"] is True and row["digest"] == ups[main_version].digest
    assert row["checkpoint"] == ups[main_version].checkpoint.digest
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= set(os.listdir(out))

    model = AutoModelForCausalLM.from_pretrained(str(out), local_files_only=True)
    tok = AutoTokenizer.from_pretrained(str(out), local_files_only=True)
    ref = _reference_policy(url, run_id, main_version)
    enc = tok(PROMPT, return_tensors="pt")
    assert enc["input_ids"][0].tolist() == ref.encode_prompt(PROMPT)  # BOS first, one id per character
    with torch.no_grad():
        logits = model(**enc).logits[0, -1]
        ref_logits = ref.model(input_ids=torch.tensor([ref.encode_prompt(PROMPT)])).logits[0, -1]
    assert torch.allclose(logits, ref_logits, atol=1e-5)
    gen = model.generate(**enc, max_new_tokens=1, do_sample=False, pad_token_id=tok.pad_token_id)
    token = int(gen[0, -1])
    assert token == int(ref_logits.argmax())

    st = open_store(url)
    try:
        last = list(exports(st, run_id))[-1]  # in the run's export stream: the run's own ends at its seal
        assert isinstance(last, PolicyExported) and not isinstance(list(st.events(run_stream(run_id)))[-1], PolicyExported)
        assert (last.policy_version, last.digest, last.output_dir) == (main_version, row["digest"], str(out))
        assert last.checkpoint.digest == row["checkpoint"] and last.main and not last.adapter
        assert last.caused_by == (row["source"].split("#")[1],)
        assert st.verify().ok  # the sealed run still verifies
    finally:
        st.close()
    prov = json.loads((out / "evo_export.json").read_text())
    assert prov["run_id"] == run_id and prov["digest"] == row["digest"]


def test_export_a_version_gives_that_versions_weights(tiny_run, tmp_path):
    from evo_core.trainer.policy import HFPolicy

    work, url, run_id = tiny_run
    ups = _updates(url, run_id)
    assert len({u.digest for u in ups.values()}) == len(ups) >= 4  # every step moved the weights
    st = open_store(url)
    try:
        res = export_policy(st, run_id, str(tmp_path / "v1"), policy_version=1)
        assert [e.policy_version for e in exports(st, run_id)][-1] == 1
    finally:
        st.close()
    assert res.resolved.digest == ups[1].digest and not res.resolved.main
    assert HFPolicy.from_pretrained(str(tmp_path / "v1")).digest() == ups[1].digest  # the weights, bit for bit
    # the modes a plain open()/mkdir() gives (0644/0755 under umask 022), never a writer's private 0600
    import stat

    umask = os.umask(0)
    os.umask(umask)
    out = tmp_path / "v1"
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~umask
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert "model.safetensors" in modes and set(modes.values()) == {0o666 & ~umask}, modes


def test_evo_serve_serves_the_exported_directory(tiny_run, tmp_path):
    work, url, run_id = tiny_run
    out = tmp_path / "served"
    r = evo("export", run_id, "-o", str(out), "--store", url, "--no-record")
    assert r.returncode == 0, r.stderr
    assert "not recorded" in r.stdout
    ref = _reference_policy(url, run_id, resolve_policy_checkpoint(open_store(url), run_id, main=True).policy_version)
    with torch.no_grad():
        want = int(ref.model(input_ids=torch.tensor([ref.encode_prompt(PROMPT)])).logits[0, -1].argmax())
    with evo_serve(str(out), name="exported") as base:
        resp = httpx.post(base + "/v1/completions", json={"model": "exported", "prompt": PROMPT, "max_tokens": 1,
                                                         "temperature": 0, "return_token_ids": True}, timeout=60)
    assert resp.status_code == 200, resp.text
    choice = resp.json()["choices"][0]
    assert choice["prompt_token_ids"] == ref.encode_prompt(PROMPT)
    assert choice["token_ids"] == [want]


def test_cli_errors_are_one_line(tiny_run, tmp_path):
    work, url, run_id = tiny_run
    cases = [
        (["export", run_id, "--main", "--policy-version", "1", "-o", str(tmp_path / "a")], "not both"),
        (["export", run_id, "--policy-version", "99", "-o", str(tmp_path / "b")], "has no policy version 99"),
        (["export", "no-such-run", "-o", str(tmp_path / "c")], "no run 'no-such-run'"),
        (["export", run_id, "--adapter", "-o", str(tmp_path / "d")], "not a LoRA run"),
    ]
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep me")
    cases.append((["export", run_id, "-o", str(tmp_path / "full")], "not empty"))
    for args, needle in cases:
        r = evo(*args, "--store", url)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
        assert len(lines) == 1 and needle in lines[0], (args, r.stderr)
        assert "Traceback" not in r.stderr
    assert (tmp_path / "full" / "x").read_text() == "keep me"  # nothing lost
    assert not (tmp_path / "d").exists()


# --- the resolver on hand-built logs (memory store) -----------------------------------------


TINY = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 2, "intermediate_size": 64}


def _tiny_config() -> dict:
    from evo_core.config import config_from_dict

    return config_from_dict({"policy": {"tiny": dict(TINY)}}).for_arm("fixed").to_dict()  # as a run logs it


def _state_blob(store, policy) -> object:
    buf = io.BytesIO()
    torch.save(policy.state_dict(), buf)
    return store.blobs.put(buf.getvalue(), "application/x-torch-state-dict")


@pytest.fixture
def hand_log():
    """A finished run whose policy v0 and v2 weights are known; no PolicyUpdated carries a blob."""
    from evo_core.trainer.policy import HFPolicy
    from evo_core.trainer.tiny import TinyModelConfig

    st = open_store("memory://")
    run_id = "hand"
    cfg = _tiny_config()
    p0 = HFPolicy.tiny(TinyModelConfig(**TINY), seed=0)
    p2 = HFPolicy.tiny(TinyModelConfig(**TINY), seed=7)
    em = Emitter("test", "1")
    evs = [RunStarted(run_id=run_id, config=cfg, config_hash="h", seed=0, harness_mode="fixed", code_version="0",
                      started_at="2026-01-01T00:00:00Z", emitted_by=em),
           PolicyUpdated(run_id=run_id, step=0, policy_version=0, digest=p0.digest(), emitted_by=em),
           PolicyUpdated(run_id=run_id, step=2, policy_version=2, digest=p2.digest(), emitted_by=em),
           RunFinished(run_id=run_id, status="completed", step=2, emitted_by=em)]
    st.append(run_stream(run_id), evs, expected_version=0)
    return st, run_id, p0, p2


def test_missing_checkpoint_names_the_setting(hand_log):
    st, run_id, _, _ = hand_log
    with pytest.raises(ExportError, match=r"logged no checkpoint for policy version 2; a run keeps the weights of its main line only, "
                                          r"unless run.checkpoint_blobs = true"):
        resolve_policy_checkpoint(st, run_id, 2)
    with pytest.raises(ExportError, match="not both"):
        resolve_policy_checkpoint(st, run_id, 2, main=True)


def test_promotion_figures_checkpoint_is_a_source(hand_log, tmp_path):
    from evo_core.trainer.policy import HFPolicy

    st, run_id, _, p2 = hand_log
    ref = _state_blob(st, p2)
    prom = Promoted(run_id=run_id, subject="policy", subject_id="2", step=2, gate="policy", harness_version_before=0,
                    harness_version_after=0, figures={"checkpoint": {"digest": ref.digest, "size": ref.size,
                                                                     "media_type": ref.media_type}})
    st.append(run_stream(run_id), [prom], expected_version=st.stream_version(run_stream(run_id)))
    res = resolve_policy_checkpoint(st, run_id, main=True)
    assert (res.policy_version, res.checkpoint, res.source, res.main) == (2, ref, f"evo.Promoted#{prom.event_id}", True)
    out = export_policy(st, run_id, str(tmp_path / "main"), main=True)
    assert HFPolicy.from_pretrained(str(tmp_path / "main")).digest() == p2.digest()
    assert out.event is not None and out.event.caused_by == (prom.event_id,)


def test_a_restored_version_finds_the_blob_of_the_same_weights(hand_log):
    st, run_id, p0, _ = hand_log
    ref = _state_blob(st, p0)
    stream = run_stream(run_id)
    st.append(stream, [PolicyUpdated(run_id=run_id, step=2, policy_version=0, digest=p0.digest(), checkpoint=ref,
                                     target="evo-serve#tiny"),
                       PolicyUpdated(run_id=run_id, step=3, policy_version=3, digest=p0.digest(), target="restore")],
              expected_version=st.stream_version(stream))
    res = resolve_policy_checkpoint(st, run_id, 3)
    assert res.checkpoint == ref and res.digest == p0.digest()
    assert load_checkpoint_policy(st, res).digest() == p0.digest()


def test_weights_that_do_not_match_the_log_are_refused(hand_log, tmp_path):
    st, run_id, p0, p2 = hand_log
    wrong = _state_blob(st, p2)
    stream = run_stream(run_id)
    st.append(stream, [PolicyUpdated(run_id=run_id, step=0, policy_version=0, digest=p0.digest(), checkpoint=wrong,
                                     target="copy")], expected_version=st.stream_version(stream))
    with pytest.raises(ExportError, match="but the log gives policy version 0 the weights"):
        export_policy(st, run_id, str(tmp_path / "x"), policy_version=0)
    assert not (tmp_path / "x").exists()
    assert not list(exports(st, run_id))


def test_a_missing_blob_is_a_one_line_error(hand_log, tmp_path):
    from evo_events import BlobRef

    st, run_id, p0, _ = hand_log
    stream = run_stream(run_id)
    st.append(stream, [PolicyUpdated(run_id=run_id, step=0, policy_version=0, digest=p0.digest(),
                                     checkpoint=BlobRef("0" * 64, 10, "application/x-torch-state-dict"), target="x")],
              expected_version=st.stream_version(stream))
    with pytest.raises(ExportError, match="missing") as e:
        export_policy(st, run_id, str(tmp_path / "x"), policy_version=0)
    assert "\n" not in str(e.value)


def test_a_synced_directory_tar_is_a_source(hand_log, tmp_path):
    from evo_core.trainer.http_engine import pack_directory

    st, run_id, _, p2 = hand_log
    p2.save(str(tmp_path / "sync"))
    ref = st.blobs.put(pack_directory(str(tmp_path / "sync")), "application/x-tar")
    stream = run_stream(run_id)
    st.append(stream, [PolicyUpdated(run_id=run_id, step=2, policy_version=2, digest=p2.digest(), checkpoint=ref,
                                     target="evo-serve#tiny")], expected_version=st.stream_version(stream))
    res = export_policy(st, run_id, str(tmp_path / "out"), policy_version=2)
    assert res.resolved.checkpoint == ref


def test_exporting_a_live_run_leaves_its_stream_to_the_trainer(tmp_path):
    from evo_core.export import export_stream
    from evo_core.trainer.policy import HFPolicy
    from evo_core.trainer.tiny import TinyModelConfig

    st = open_store("memory://")
    p = HFPolicy.tiny(TinyModelConfig(**TINY), seed=1)
    stream = run_stream("live")
    st.append(stream, [RunStarted(run_id="live", config=_tiny_config(), config_hash="h", seed=0, harness_mode="fixed",
                                  code_version="0", started_at="2026-01-01T00:00:00Z"),
                       PolicyUpdated(run_id="live", step=0, policy_version=0, digest=p.digest(),
                                     checkpoint=_state_blob(st, p))], expected_version=0)
    res = export_policy(st, "live", str(tmp_path / "b"), record=False)
    assert res.event is None and st.stream_version(export_stream("live")) == 0
    res = export_policy(st, "live", str(tmp_path / "c"))
    assert res.event is not None and st.stream_version(export_stream("live")) == 1
    assert st.stream_version(stream) == 2  # the trainer's next append (expected version 2) still succeeds
    st.append(stream, [RunFinished(run_id="live", status="completed", step=0)], expected_version=2)


# --- LoRA: merged weights, or the adapter alone ---------------------------------------------


def test_lora_run_exports_merged_weights_or_the_adapter(tmp_path):
    from transformers import AutoModelForCausalLM

    from evo_core.trainer.policy import HFPolicy
    from evo_core.trainer.tiny import TinyModelConfig

    base = tmp_path / "base"
    HFPolicy.tiny(TinyModelConfig(**TINY), seed=0).save(str(base))
    url, run_id = tiny_quickstart_run(tmp_path, "--set", "policy.kind=hf", "--set", f"policy.path={json.dumps(str(base))}",
                                      "--set", "policy.lora.enabled=true", "--set", "sft.lr=5e-2", "--set", "rl.lr=5e-2")
    for args in (["-o", str(tmp_path / "merged")], ["-o", str(tmp_path / "adapter"), "--adapter"]):
        r = evo("export", run_id, "--store", url, "--json", *args)
        assert r.returncode == 0, r.stderr
    assert "adapter_config.json" in os.listdir(tmp_path / "adapter")
    assert "adapter_config.json" not in os.listdir(tmp_path / "merged")
    version = resolve_policy_checkpoint(open_store(url), run_id, main=True).policy_version
    ref = _reference_policy(url, run_id, version)  # the peft model with the logged weights
    assert HFPolicy.load(str(tmp_path / "adapter")).digest() == _updates(url, run_id)[version].digest
    ids = torch.tensor([ref.encode_prompt(PROMPT)])
    with torch.no_grad():
        want = ref.model(input_ids=ids).logits
        merged = AutoModelForCausalLM.from_pretrained(str(tmp_path / "merged"), local_files_only=True)(input_ids=ids).logits
        adapter = AutoModelForCausalLM.from_pretrained(str(tmp_path / "adapter"), local_files_only=True)(input_ids=ids).logits
        plain = AutoModelForCausalLM.from_pretrained(str(base), local_files_only=True)(input_ids=ids).logits
    assert torch.allclose(merged, want, atol=1e-5) and torch.allclose(adapter, want, atol=1e-5)
    assert (plain - want).abs().max() > 1e-3  # the adapter changed the model: the comparison is not vacuous


def test_a_promotion_checkpoint_field_is_a_source(hand_log, tmp_path):
    from evo_core.trainer.policy import HFPolicy

    st, run_id, _, p2 = hand_log
    buf = io.BytesIO()
    torch.save({"model": p2.state_dict(), "optimizer": None, "policy_version": 2}, buf)  # the loop's snapshot blob
    ref = st.blobs.put(buf.getvalue(), "application/x-evo-snapshot")
    prom = Promoted(run_id=run_id, subject="policy", subject_id="2", step=2, gate="policy", harness_version_before=0,
                    harness_version_after=0, checkpoint=ref, digest=p2.digest())
    st.append(run_stream(run_id), [prom], expected_version=st.stream_version(run_stream(run_id)))
    res = export_policy(st, run_id, str(tmp_path / "main"))  # no version given: the main line
    assert (res.resolved.policy_version, res.resolved.checkpoint, res.resolved.main) == (2, ref, True)
    assert HFPolicy.from_pretrained(str(tmp_path / "main")).digest() == p2.digest()


def test_a_killed_runs_resume_checkpoint_is_a_source(tmp_path):
    import hashlib

    from evo_core.trainer.policy import HFPolicy
    from evo_core.trainer.tiny import TinyModelConfig

    st = open_store("memory://")
    p = HFPolicy.tiny(TinyModelConfig(**TINY), seed=3)
    path = tmp_path / "step-000001.pt"
    torch.save({"model": p.state_dict(), "optimizer": {}, "step": 1, "policy_version": 1}, str(path))
    rec = {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    stream = run_stream("killed")
    st.append(stream, [RunStarted(run_id="killed", config=_tiny_config(), config_hash="h", seed=0, harness_mode="fixed",
                                  code_version="0", started_at="2026-01-01T00:00:00Z"),
                       StepCompleted(run_id="killed", step=1, policy_version=1, harness_version=0, metrics={},
                                     resume_checkpoint=rec),
                       PolicyUpdated(run_id="killed", step=1, policy_version=1, digest=p.digest())], expected_version=0)
    res = export_policy(st, "killed", str(tmp_path / "out"), policy_version=1)
    assert res.resolved.checkpoint is None and res.resolved.checkpoint_file == rec
    assert res.event is not None and res.event.checkpoint_file == rec
    assert HFPolicy.from_pretrained(str(tmp_path / "out")).digest() == p.digest()
    path.write_bytes(path.read_bytes() + b"x")  # the file no longer matches the log
    with pytest.raises(ExportError, match="does not match the sha256 the log recorded"):
        export_policy(st, "killed", str(tmp_path / "out2"), policy_version=1, record=False)
    path.unlink()  # a finished run removed its resume checkpoints: nothing is left to export
    with pytest.raises(ExportError, match="logged no checkpoint for policy version 1"):
        resolve_policy_checkpoint(st, "killed", 1)
