"""Experiment configs over the repository's smoke problems, for tests that run the command line
(``python -m precompute ... --config FILE``) with models of their own."""

from __future__ import annotations

import json
from pathlib import Path

#: The three grade-school problems every smoke config reads (``configs/smoke_problems.jsonl``).
SMOKE_PROBLEMS = Path(__file__).resolve().parents[1] / "configs" / "smoke_problems.jsonl"


def write_smoke_config(path: Path, name: str, stages: list[str], models: str) -> Path:
    """Write to ``path`` the TOML of experiment ``name`` running ``stages`` on the smoke problems
    (the local loader, task gsm8k), followed by ``models`` (its teacher, student and judge
    tables as TOML); return ``path``."""
    source = json.dumps(SMOKE_PROBLEMS.as_posix())  # a TOML basic string: quoted, escaped
    head = (
        f'[experiment]\nname = "{name}"\nstages = {json.dumps(stages)}\n\n'
        '[problems]\ndataset = "local"\n'
        f'options = {{ source = {source}, dataset = "smoke", task = "gsm8k" }}\n\n'
    )
    path.write_text(head + models, encoding="utf-8")
    return path
