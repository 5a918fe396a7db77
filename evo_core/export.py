"""``evo export``: a run's policy, out of the log, as a transformers directory.

The log says which weights each policy version had (``PolicyUpdated.digest``) and where
they were stored (a checkpoint blob). ``resolve_policy_checkpoint`` finds that blob for a
version (or the main line); ``export_policy`` rebuilds the run's model from its logged
config, loads the blob, checks the weights digest against the log, writes
``save_pretrained`` plus the tokenizer, and appends ``PolicyExported`` to the run's export
stream ``export-<run>``: a finished run's own stream ends at its sealed ``RunFinished``, and
a live run's stream belongs to its trainer, so the record goes beside it, as a replay's does.

Where the weights of version N can be, in the order looked at:

1. ``PolicyUpdated(policy_version=N).checkpoint``: every version's weights with
   ``run.checkpoint_blobs``; the starting weights (v0) always in an evolving run;
2. on the ``Promoted(subject="policy", subject_id=N)`` that made N the main line: its
   ``checkpoint`` (or, in logs written before it had one, ``figures["checkpoint"]``);
3. any ``PolicyUpdated`` whose weights digest equals N's (a restore gives the main line's
   weights a new version number; the weights, and so the blob, are the same);
4. the resume checkpoint a ``StepCompleted(policy_version=N)`` recorded (path and sha256),
   while the file is still there: a run removes its resume checkpoints when it ends, so this
   serves runs that were killed.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import shutil
import tarfile
import tempfile
from typing import Any, Iterable, Mapping, Optional

import attrs

from evo_core.state import fold
from evo_core.store import run_stream
from evo_events import (
    BlobRef,
    Emitter,
    Event,
    PolicyExported,
    PolicyUpdated,
    Promoted,
    RunStarted,
    StepCompleted,
)

EXPORTER = Emitter("evo_export", "1")
EXPORT_PREFIX = "export-"
SNAPSHOT_MEDIA = "application/x-evo-snapshot"  # torch.save of {"model", "optimizer", "policy_version"} (trainer.port)
STATE_DICT_MEDIA = "application/x-torch-state-dict"  # torch.save of a bare state dict (older logs)
TAR_MEDIA = "application/x-tar"  # a saved policy directory (HTTP weight sync, sync_and_record)
PROVENANCE_FILE = "evo_export.json"
_LOG_TYPES = (RunStarted.TYPE, PolicyUpdated.TYPE, Promoted.TYPE, StepCompleted.TYPE)


class ExportError(RuntimeError):
    """The policy cannot be exported (one-line message naming what is missing)."""


@attrs.frozen(kw_only=True)
class ResolvedCheckpoint:
    """Where the weights of one policy version are, and what they must hash to."""

    run_id: str
    policy_version: int
    digest: str  # the weights digest the log gave this version ("" if no event named one)
    checkpoint: Optional[BlobRef]  # the weights source: a blob in the run's store, or
    checkpoint_file: Optional[Mapping[str, str]] = None  # a resume checkpoint {"path", "sha256"}
    source: str  # "<event type>#<event id>" of the event that named the weights
    source_event_id: str
    main: bool  # this version is the run's main line
    adapter: bool  # the blob holds a LoRA adapter directory only
    config: Mapping[str, Any] = attrs.field(factory=dict, repr=False)  # the run's resolved config


@attrs.frozen(kw_only=True)
class ExportResult:
    resolved: ResolvedCheckpoint
    output_dir: str
    files: tuple[str, ...]
    adapter: bool
    merged: bool
    event: Optional[PolicyExported] = None


def export_stream(run_id: str) -> str:
    """The stream that holds a run's ``PolicyExported`` records."""
    return f"{EXPORT_PREFIX}{run_id}"


def blob_ref(value: Any) -> Optional[BlobRef]:
    """A ``BlobRef``, or a mapping shaped like one (as it reads back from free-form figures)."""
    if isinstance(value, BlobRef):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("digest"), str) and isinstance(value.get("size"), int):
        return BlobRef(value["digest"], value["size"], str(value.get("media_type") or "application/octet-stream"))
    return None


def _promotion_checkpoint(ev: Promoted) -> Optional[BlobRef]:
    return blob_ref(ev.checkpoint) or blob_ref((ev.figures or {}).get("checkpoint"))


def _resume_file(ev: StepCompleted) -> Optional[Mapping[str, str]]:
    rec = ev.resume_checkpoint
    if isinstance(rec, Mapping) and rec.get("path") and os.path.isfile(rec["path"]):
        return rec
    return None


def resolve_policy_checkpoint(store: Any, run_id: str, policy_version: Optional[int] = None, *,
                              main: bool = False) -> ResolvedCheckpoint:
    """The checkpoint of ``policy_version``, or of the main line (``main=True``, or no
    version given): the last version a policy gate promoted, else the starting one (v0)."""
    if policy_version is not None and main:
        raise ExportError("give a policy version or main, not both")
    events = list(store.events(run_stream(run_id), types=_LOG_TYPES))
    if not events or not isinstance(events[0], RunStarted):
        raise ExportError(f"run {run_id!r} not found in {store.url}")
    state = fold(events)
    version = state.main_policy_version if policy_version is None else int(policy_version)
    updates = [e for e in events if isinstance(e, PolicyUpdated)]
    promotions = [e for e in events if isinstance(e, Promoted) and e.subject == "policy" and e.subject_id == str(version)]
    own = sorted((e for e in updates if e.policy_version == version), key=lambda e: e.target != "trainer")
    if not own and not promotions:
        known = sorted({e.policy_version for e in updates})
        span = f"versions {known[0]}..{known[-1]}" if known else "no policy versions"
        raise ExportError(f"run {run_id!r} has no policy version {version} (its log names {span})")
    digest = own[0].digest if own else next((p.digest for p in promotions if p.digest), "")
    candidates: list[tuple[Event, Optional[BlobRef]]] = [(e, e.checkpoint) for e in own]
    candidates += [(e, _promotion_checkpoint(e)) for e in promotions]
    if digest:
        candidates += [(e, e.checkpoint) for e in updates if e.digest == digest and e.policy_version != version]
    found: list[tuple[Event, Optional[BlobRef], Optional[Mapping[str, str]]]] = [
        (ev, ref, None) for ev, ref in candidates if ref is not None]
    found += [(e, None, _resume_file(e)) for e in reversed(events)
              if isinstance(e, StepCompleted) and e.policy_version == version and _resume_file(e)]
    if not found:
        raise ExportError(f"run {run_id!r} logged no checkpoint for policy version {version}; a run keeps the "
                          "weights of its main line only, unless run.checkpoint_blobs = true")
    ev, ref, file = found[0]
    return ResolvedCheckpoint(run_id=run_id, policy_version=version, digest=digest, checkpoint=ref,
                              checkpoint_file=dict(file) if file else None, source=f"{ev.TYPE}#{ev.event_id}",
                              source_event_id=ev.event_id, main=version == state.main_policy_version,
                              adapter=bool(getattr(ev, "adapter", False)), config=events[0].config)


# --- rebuilding the weights -----------------------------------------------------------------


def load_checkpoint_policy(store: Any, resolved: ResolvedCheckpoint, *, device: str = "cpu") -> Any:
    """The run's policy (model and tokenizer) with the resolved weights, checked against
    the log's weights digest."""
    if resolved.checkpoint is None:
        policy = _policy_from_state_dict(resolved, _read_resume_file(resolved), device)
    else:
        try:
            data = store.blobs.get(resolved.checkpoint)
        except Exception as exc:  # BlobError: missing or corrupted
            raise ExportError(f"policy version {resolved.policy_version} of run {resolved.run_id!r}: {exc}") from None
        media = resolved.checkpoint.media_type
        if media in (SNAPSHOT_MEDIA, STATE_DICT_MEDIA):
            policy = _policy_from_state_dict(resolved, data, device)
        elif media == TAR_MEDIA:
            policy = _policy_from_tar(data, device)
        else:
            raise ExportError(f"checkpoint {resolved.checkpoint.digest[:12]} ({resolved.source}) has media type "
                              f"{media!r}; export reads {SNAPSHOT_MEDIA!r}, {STATE_DICT_MEDIA!r} and {TAR_MEDIA!r}")
    if resolved.digest:
        got = policy.digest()
        if got != resolved.digest:
            raise ExportError(f"checkpoint {_name(resolved)} hashes to weights {got[:12]}, but the log "
                              f"gives policy version {resolved.policy_version} the weights {resolved.digest[:12]}")
    return policy


def _name(resolved: ResolvedCheckpoint) -> str:
    if resolved.checkpoint is not None:
        return resolved.checkpoint.digest[:12]
    return str((resolved.checkpoint_file or {}).get("path"))


def _read_resume_file(resolved: ResolvedCheckpoint) -> bytes:
    import hashlib

    rec = resolved.checkpoint_file or {}
    try:
        with open(rec["path"], "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ExportError(f"resume checkpoint of policy version {resolved.policy_version}: {exc}") from None
    if rec.get("sha256") and hashlib.sha256(data).hexdigest() != rec["sha256"]:
        raise ExportError(f"resume checkpoint {rec['path']} does not match the sha256 the log recorded")
    return data


def _run_policy(config: Mapping[str, Any], device: str) -> Any:
    """The run's model as its config builds it (weights to be replaced)."""
    from evo_core.config import ConfigError, config_from_dict
    from evo_core.run_setup import RunError, build_policy

    cfg_dict = json.loads(json.dumps(dict(config)))
    cfg_dict.setdefault("run", {})["device"] = device
    try:
        return build_policy(config_from_dict(cfg_dict))
    except (ConfigError, RunError) as exc:
        raise ExportError(f"cannot rebuild the run's model from its logged config: {exc}") from None


def _policy_from_state_dict(resolved: ResolvedCheckpoint, data: bytes, device: str) -> Any:
    import torch

    policy = _run_policy(resolved.config, device)
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)  # never unpickle code
    except Exception as exc:
        raise ExportError(f"checkpoint {_name(resolved)} is not a torch checkpoint: {exc}") from None
    if isinstance(state, dict) and isinstance(state.get("model"), dict):  # a snapshot or a resume checkpoint
        state = state["model"]
    try:
        policy.load_state_dict(state)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()
        raise ExportError(f"checkpoint {_name(resolved)} does not fit the run's model: "
                          f"{' '.join(first[:2])[:300]}") from None
    return policy


def _policy_from_tar(data: bytes, device: str) -> Any:
    from evo_core.trainer.policy import HFPolicy, PolicyLoadError

    tmp = tempfile.mkdtemp(prefix="evo-export-")
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            try:
                tar.extractall(tmp, filter="data")  # no absolute paths, links out or devices
            except TypeError:  # Python without extraction filters
                for m in tar.getmembers():
                    if not (m.isfile() or m.isdir()) or m.name.startswith("/") or ".." in m.name.split("/"):
                        raise ExportError(f"checkpoint tar holds an unsafe member {m.name!r}") from None
                tar.extractall(tmp)
        try:
            return HFPolicy.load(tmp, device=device)
        except PolicyLoadError as exc:
            raise ExportError(str(exc)) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --- writing --------------------------------------------------------------------------------


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _write(policy: Any, path: str, *, adapter: bool) -> bool:
    """Write the policy into ``path``; returns whether LoRA weights were merged."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one shard-writing bar per export is noise in a CLI
    if adapter:
        policy.save(path)  # adapter_config.json + adapter weights + tokenizer + the base model's path
        return False
    model = policy.model
    merged = False
    if policy.lora is not None:
        model = model.merge_and_unload()
        merged = True
    model.save_pretrained(path)
    policy.tokenizer.save(path)
    return merged


def _ordinary_modes(root: str) -> None:
    """The modes a plain ``open``/``mkdir`` would give under the user's umask (0644/0755
    under the usual 022): mkdtemp creates 0700, and weight writers can leave 0600 files
    (``model.safetensors``), which other users of a shared model directory cannot read."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(root, 0o777 & ~umask)
    for base, dirs, files in os.walk(root):
        for d in dirs:
            os.chmod(os.path.join(base, d), 0o777 & ~umask)
        for f in files:
            p = os.path.join(base, f)
            if not os.path.islink(p):
                os.chmod(p, 0o666 & ~umask)


def _prepare_output(out_dir: str, overwrite: bool) -> str:
    out = os.path.abspath(out_dir)
    if os.path.exists(out) and not os.path.isdir(out):
        raise ExportError(f"output {out_dir!r} exists and is not a directory")
    if os.path.isdir(out) and os.listdir(out) and not overwrite:
        raise ExportError(f"output directory {out_dir!r} is not empty; choose another or pass --force")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    return out


def export_policy(store: Any, run_id: str, out_dir: str, *, policy_version: Optional[int] = None,
                  main: bool = False, adapter: bool = False, device: str = "cpu", record: bool = True,
                  overwrite: bool = False) -> ExportResult:
    """Write policy ``policy_version`` (or the main line) of ``run_id`` to ``out_dir`` and,
    with ``record``, append ``PolicyExported`` to the run's export stream.

    The directory is written under a temporary name beside ``out_dir`` and renamed, so a
    crash never leaves a half-written export under the final name."""
    resolved = resolve_policy_checkpoint(store, run_id, policy_version, main=main)
    out = _prepare_output(out_dir, overwrite)
    policy = load_checkpoint_policy(store, resolved, device=device)
    if adapter and policy.lora is None:
        raise ExportError(f"run {run_id!r} is not a LoRA run (policy.lora.enabled = false); --adapter exports "
                          "a LoRA adapter")
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.tmp-", dir=os.path.dirname(out))
    try:
        merged = _write(policy, tmp, adapter=adapter)
        exported_at = _now()
        provenance = {"run_id": run_id, "policy_version": resolved.policy_version, "digest": resolved.digest,
                      "checkpoint": attrs.asdict(resolved.checkpoint) if resolved.checkpoint else None,
                      "checkpoint_file": resolved.checkpoint_file, "source": resolved.source,
                      "main": resolved.main, "adapter": adapter, "merged": merged, "exported_at": exported_at}
        with open(os.path.join(tmp, PROVENANCE_FILE), "w") as fh:
            json.dump(provenance, fh, indent=2, sort_keys=True)
        _ordinary_modes(tmp)  # mkdtemp makes the directory private, and writers may make files private
        if os.path.isdir(out):
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    event = None
    if record:
        event = PolicyExported(run_id=run_id, policy_version=resolved.policy_version, digest=resolved.digest,
                               output_dir=out, checkpoint=resolved.checkpoint,
                               checkpoint_file=dict(resolved.checkpoint_file) if resolved.checkpoint_file else None,
                               source=resolved.source,
                               main=resolved.main, adapter=adapter, merged=merged, exported_at=exported_at,
                               caused_by=(resolved.source_event_id,), emitted_by=EXPORTER)
        _record(store, run_id, event)
    return ExportResult(resolved=resolved, output_dir=out, files=tuple(sorted(os.listdir(out))), adapter=adapter,
                        merged=merged, event=event)


def _record(store: Any, run_id: str, event: PolicyExported) -> None:
    from evo_core.store import ConcurrencyConflict

    stream = export_stream(run_id)
    try:
        store.append(stream, [event], expected_version=store.stream_version(stream))
    except ConcurrencyConflict:
        raise ExportError(f"exported to {event.output_dir}, but another export of run {run_id!r} was recorded at the "
                          "same moment; this one is not in the log (export again to record it)") from None


def exports(store: Any, run_id: str) -> Iterable[PolicyExported]:
    """The run's recorded exports, oldest first."""
    return (e for e in store.events(export_stream(run_id)) if isinstance(e, PolicyExported))


__all__ = ["ExportError", "ExportResult", "ResolvedCheckpoint", "blob_ref", "export_policy", "export_stream", "exports",
           "load_checkpoint_policy", "resolve_policy_checkpoint"]
