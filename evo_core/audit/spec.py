"""``--with SPEC``: which diagnostics and gates a counterfactual replay runs.

A SPEC is one or more items (repeat ``--with`` or separate items with ``;``):

- ``NAME`` / ``NAME@VERSION`` / ``NAME@VERSION:k=v,k=v`` — the diagnostic plugin NAME
  (checked against the installed version when one is given), with parameters laid over
  the run's own parameters for it (or the plugin's defaults);
- ``gate:NAME[@VERSION][:k=v,…]`` — re-decide every recorded decision with gate NAME;
- ``-NAME`` (or ``drop:NAME``) — replay without diagnostic NAME;
- ``PATH.json`` / ``PATH.toml`` — a file holding ``{"diagnostics": {NAME: {version, spec,
  …params}}, "gates": {…}, "drop": […]}``, a skill (``{"bundle": {…}}`` as exported by
  ``evo skills``), or one data-only diagnostic spec (``{"kind", "where", "statistic",
  "threshold", …}``).

Values after ``=`` are read as JSON when they parse (``0.1``, ``true``, ``[1,2]``), else
as strings.

``ReplaySpec.overlay`` lays a SPEC over a run's own ``[harness]`` table: the replay runs
the live harness engine with the result.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import attrs

from evo_core.audit.errors import AuditError
from evo_core.harness.specs import SpecError, validate_spec

_ITEM = re.compile(r"^(?P<name>[A-Za-z_][\w.\-]*)(?:@(?P<version>[\w.\-+]+))?(?::(?P<params>.*))?$")


@attrs.frozen
class DiagnosticItem:
    name: str
    version: Optional[str] = None
    params: dict[str, Any] = attrs.Factory(dict)
    spec: Optional[dict[str, Any]] = None  # a data-only diagnostic
    drop: bool = False
    source: str = ""  # the text or file it came from


@attrs.frozen
class GateItem:
    name: str
    version: Optional[str] = None
    params: dict[str, Any] = attrs.Factory(dict)
    source: str = ""


@attrs.frozen
class ReplaySpec:
    diagnostics: tuple[DiagnosticItem, ...] = ()
    gates: tuple[GateItem, ...] = ()
    text: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.diagnostics and not self.gates

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

    def merged(self, other: "ReplaySpec") -> "ReplaySpec":
        return ReplaySpec(self.diagnostics + other.diagnostics, self.gates + other.gates, self.text + other.text)

    def overlay(self, table: Mapping[str, Any], diagnostics: Mapping[str, Any],
                gates: Mapping[str, Any]) -> dict[str, Any]:
        """``table`` (a run's ``[harness]`` table) with this SPEC laid over it: each named
        diagnostic or gate added, its params over the run's own for it; each dropped
        diagnostic switched off. ``diagnostics``/``gates`` are the installed plugins by name
        (a name or version the SPEC asks for must be installed)."""
        out = copy.deepcopy(dict(table))
        diags = dict(out.get("diagnostics") or {})
        for it in self.diagnostics:
            if it.drop:
                diags[it.name] = {"enabled": False}
                continue
            if it.spec is not None:
                try:
                    validate_spec(it.spec)
                except SpecError as exc:
                    raise AuditError(f"SPEC {it.source or it.name}: bad diagnostic spec: {exc}") from None
                diags[it.name] = {**it.params, "version": it.version or "spec", "spec": dict(it.spec)}
                continue
            _installed("diagnostic", it.name, it.version, diagnostics)
            diags[it.name] = {**_own(diags.get(it.name)), **it.params}
        own_gates = dict(out.get("gates") or {})
        for g in self.gates:
            _installed("gate", g.name, g.version, gates)
            own_gates[g.name] = {**_own(own_gates.get(g.name)), **g.params}
        out["diagnostics"], out["gates"] = diags, own_gates
        return out


def _own(params: Any) -> dict[str, Any]:
    """The run's own params for a plugin, switched on."""
    out = dict(params) if isinstance(params, Mapping) else {}
    out.pop("enabled", None)
    return out


def _installed(kind: str, name: str, version: Optional[str], installed: Mapping[str, Any]) -> None:
    impl = installed.get(name)
    if impl is None:
        have = ", ".join(sorted(installed)) or "none"
        raise AuditError(f"SPEC names {kind} {name!r}, which no installed plugin provides (installed: {have})")
    if version is not None and str(impl.version) != version:
        raise AuditError(f"SPEC asks for {kind} {name!r} version {version}, but version {impl.version} is installed")


def _value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _params(raw: Optional[str], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not raw:
        return out
    for part in raw.split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise AuditError(f"SPEC {where!r}: parameter {part!r} is not k=v")
        k, v = part.split("=", 1)
        out[k.strip()] = _value(v.strip())
    return out


def _is_spec(d: Mapping[str, Any]) -> bool:
    return "threshold" in d and ("where" in d or "statistic" in d)


def _from_mapping(data: Any, source: str) -> ReplaySpec:
    if not isinstance(data, Mapping):
        raise AuditError(f"SPEC file {source}: expected a table/object, got {type(data).__name__}")
    diags: list[DiagnosticItem] = []
    gates: list[GateItem] = []
    if "bundle" in data or "intervention" in data or "diagnostic" in data:  # a skill (or its bundle)
        bundle = data.get("bundle", data)
        d = bundle.get("diagnostic") if isinstance(bundle, Mapping) else None
        iv = bundle.get("intervention") if isinstance(bundle, Mapping) else None
        if isinstance(iv, Mapping) and iv.get("kind") == "diagnostic":
            d = iv.get("params") or {}
        if not isinstance(d, Mapping):
            raise AuditError(f"SPEC file {source}: this skill carries no diagnostic to replay (it changes "
                             f"{(iv or {}).get('kind', 'nothing')}, which replay cannot re-run over recorded evidence)")
        spec = d.get("spec")
        name = str(d.get("diagnostic") or d.get("name") or (spec or {}).get("kind") or data.get("name") or Path(source).stem)
        diags.append(DiagnosticItem(name, str(d["version"]) if d.get("version") is not None else None,
                                    dict(d.get("params") or {}), dict(spec) if spec else None, source=source))
    elif _is_spec(data):
        diags.append(DiagnosticItem(str(data.get("kind") or Path(source).stem), None, {}, dict(data), source=source))
    else:
        unknown = set(data) - {"diagnostics", "gates", "drop"}
        if unknown:
            raise AuditError(f"SPEC file {source}: unknown key(s) {', '.join(sorted(unknown))}; "
                             "expected diagnostics, gates, drop (or a skill, or a diagnostic spec)")
        for name, params in (data.get("diagnostics") or {}).items():
            params = dict(params or {}) if params is not True else {}
            version = params.pop("version", None)
            spec = params.pop("spec", None)
            diags.append(DiagnosticItem(str(name), str(version) if version is not None else None, params,
                                        dict(spec) if spec else None, source=source))
        for name, params in (data.get("gates") or {}).items():
            params = dict(params or {}) if params is not True else {}
            version = params.pop("version", None)
            gates.append(GateItem(str(name), str(version) if version is not None else None, params, source=source))
        for name in data.get("drop") or ():
            diags.append(DiagnosticItem(str(name), drop=True, source=source))
    return ReplaySpec(tuple(diags), tuple(gates), (source,))


def load_file(path: Path) -> ReplaySpec:
    try:
        text = path.read_text()
    except OSError as exc:
        raise AuditError(f"SPEC file {path}: {exc.strerror or exc}") from None
    try:
        if path.suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except ValueError as exc:
        raise AuditError(f"SPEC file {path} is not valid {path.suffix.lstrip('.') or 'JSON'}: {exc}") from None
    return _from_mapping(data, str(path))


def parse_item(text: str) -> ReplaySpec:
    text = text.strip()
    if not text:
        return ReplaySpec()
    p = Path(text)
    if p.suffix in (".json", ".toml") or "/" in text:
        if not p.exists():
            raise AuditError(f"SPEC file {text} does not exist")
        return load_file(p)
    if text.startswith("-") or text.startswith("drop:"):
        name = text[1:] if text.startswith("-") else text[5:]
        if not _ITEM.match(name) or "@" in name or ":" in name:
            raise AuditError(f"SPEC {text!r}: write -NAME to drop diagnostic NAME")
        return ReplaySpec((DiagnosticItem(name, drop=True, source=text),), (), (text,))
    is_gate = text.startswith("gate:")
    body = text[5:] if is_gate else text[11:] if text.startswith("diagnostic:") else text
    m = _ITEM.match(body)
    if not m:
        raise AuditError(f"SPEC {text!r} is not NAME[@VERSION][:k=v,…], gate:NAME…, -NAME or a .json/.toml file")
    params = _params(m.group("params"), text)
    if is_gate:
        return ReplaySpec((), (GateItem(m.group("name"), m.group("version"), params, text),), (text,))
    return ReplaySpec((DiagnosticItem(m.group("name"), m.group("version"), params, source=text),), (), (text,))


def parse_spec(items: Sequence[str]) -> ReplaySpec:
    out = ReplaySpec()
    for item in items:
        for part in item.split(";"):
            out = out.merged(parse_item(part))
    return out
