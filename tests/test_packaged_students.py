"""Packaged students for llama.cpp: SmolLM2 (required) and Gemma 3 270M base (optional)."""

from __future__ import annotations

import importlib.util

import pytest

from precompute.models import GEMMA3_PACKAGE, GEMMA3_PIP, ModelNotFound
from tests.backend_contract import continuation


def test_a_missing_optional_student_package_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import builtins

    from precompute import models

    real_import = builtins.__import__

    def without_gemma(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith(GEMMA3_PACKAGE):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_gemma)
    monkeypatch.setattr(models.importlib, "import_module", lambda name: without_gemma(name))
    with pytest.raises(ModelNotFound, match=GEMMA3_PIP.replace(".", r"\.")):
        models.gemma3_270m_gguf_path()


@pytest.mark.slow
def test_gemma_base_gets_turn_markers_and_continues_a_teacher_prefix() -> None:
    if importlib.util.find_spec(GEMMA3_PACKAGE) is None:
        pytest.skip(f"optional student package not installed: pip install {GEMMA3_PIP}")
    from precompute.backends.llamacpp_engine import LlamaCppEngine

    engine = LlamaCppEngine("gemma3-270m", n_ctx=512, n_threads=1)
    request = continuation("cont", "Count from 1 to 10.", "1, 2, 3, 4,", system=None, max_tokens=4)
    prompt = engine.render(request)
    # The GGUF of the base model has no template: the packaged one writes Gemma's turns and
    # leaves the assistant turn open so the student continues the teacher's prefix.
    assert prompt.endswith("<start_of_turn>model\n1, 2, 3, 4,")
    assert "<start_of_turn>user\nCount from 1 to 10.<end_of_turn>\n" in prompt
    (completion,) = engine.generate([request])
    assert completion.ok and completion.completion_tokens > 0
