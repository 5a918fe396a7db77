"""Pull the program out of a model's completion."""

from __future__ import annotations

import re

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.S)


def extract_code(text: str) -> tuple[str, dict[str, object]]:
    """The last fenced Python block (or last fenced block of no language); else the whole
    text. Returns (code, signals) with the extraction path recorded."""
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    py = [b for lang, b in blocks if lang in ("python", "py", "python3")]
    plain = [b for lang, b in blocks if lang == ""]
    if py:
        return py[-1], {"extraction": "fenced_python", "n_code_blocks": len(blocks)}
    if plain:
        return plain[-1], {"extraction": "fenced_plain", "n_code_blocks": len(blocks)}
    return text, {"extraction": "raw", "n_code_blocks": 0}
