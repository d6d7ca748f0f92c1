"""The copy job: copy a user's own corpus directory (their FITS files, ISOs) into the child, timed.

Owns walking the corpus and writing real files; it never reads outside the corpus nor writes
outside the destination, which must not exist yet. Symlinks are recreated, not followed.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

CHUNK = 1 << 20


@dataclass(frozen=True)
class CopyResult:
    files: int
    bytes: int
    seconds: float


def corpus_stats(corpus: str | Path) -> tuple[int, int]:
    """(files, bytes) of a corpus; symlinks are not counted (the copy recreates them)."""
    files = total = 0
    for root, _dirs, names in os.walk(corpus):
        for name in names:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                files += 1
                total += os.path.getsize(path)
    return files, total


def corpus_bytes(corpus: str | Path) -> int:
    return corpus_stats(corpus)[1]


def copy_corpus(corpus: str | Path, dest: str | Path, stop: threading.Event | None = None,
                limit: int | None = None) -> CopyResult:
    """Copy whole files in walk order until `limit` bytes (None: all) have been copied."""
    corpus, dest = Path(corpus), Path(dest)
    if not corpus.is_dir():
        raise FileNotFoundError(f"corpus {corpus} is not a directory")
    dest.mkdir(parents=False)
    files = copied = 0
    started = time.monotonic()
    for root, dirs, names in os.walk(corpus):
        dirs.sort()
        names.sort()
        rel = Path(root).relative_to(corpus)
        for name in dirs:
            source = Path(root) / name
            if source.is_symlink():
                os.symlink(os.readlink(source), dest / rel / name)
            else:
                (dest / rel / name).mkdir()
        for name in names:
            if limit is not None and copied >= limit:
                break
            if stop is not None and stop.is_set():
                raise InterruptedError("copy stopped")
            source, target = Path(root) / name, dest / rel / name
            if source.is_symlink():
                os.symlink(os.readlink(source), target)
                continue
            with open(source, "rb") as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, CHUNK)
            files += 1
            copied += target.stat().st_size
    return CopyResult(files, copied, time.monotonic() - started)
