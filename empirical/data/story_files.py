"""TinyStories sources: random access to the i-th story of a local file without loading
every story (``<|endoftext|>``-separated text, JSON lines, JSON arrays, saved ``datasets``)."""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from core.errors import UserInputError
from empirical.data.common import _TRAIN


class _MappedFile:
    """Lazily memory-mapped file; re-opened after pickling (DataLoader worker processes)."""

    def __init__(self, path: str):
        self.path = path
        self._mm: mmap.mmap | None = None
        self._pid = -1

    def view(self) -> mmap.mmap:
        if self._mm is None or self._pid != os.getpid():
            with open(self.path, "rb") as fh:
                self._mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            self._pid = os.getpid()
        return self._mm

    def __getstate__(self) -> dict:
        return {"path": self.path, "_mm": None, "_pid": -1}


def _progress(total: int, desc: str) -> tqdm:
    return tqdm(
        total=total, desc=desc, unit="B", unit_scale=True, disable=total < (64 << 20), leave=False
    )


class _SeparatedStories:
    """The non-blank pieces of a memory-mapped file between separators ``SEP``.

    Indexing records each piece's byte offsets ``[starts[i], ends[i])`` (separator excluded);
    pieces of white space only are skipped. Subclasses set ``SEP`` and decode a piece.
    """

    SEP: bytes

    def __init__(self, path: str):
        self.path = path
        self.file = _MappedFile(path)
        size = os.path.getsize(path)
        sep = self.SEP
        starts, ends = [], []
        if size:
            mm = self.file.view()
            pos = 0
            with _progress(size, f"indexing {os.path.basename(path)}") as bar:
                while pos <= size:
                    cut = mm.find(sep, pos)
                    end = size if cut < 0 else cut
                    if mm[pos:end].strip():
                        starts.append(pos)
                        ends.append(end)
                    bar.update(min(end + len(sep), size) - pos)
                    if cut < 0:
                        break
                    pos = cut + len(sep)
        self.starts = np.asarray(starts, dtype=np.int64)
        self.ends = np.asarray(ends, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.starts)

    def _raw(self, i: int) -> bytes:
        """The bytes of piece ``i`` (separator and nothing else stripped)."""
        return self.file.view()[int(self.starts[i]) : int(self.ends[i])]


class _TextStories(_SeparatedStories):
    """Stories separated by the literal ``<|endoftext|>`` (TinyStories ``*.txt`` release)."""

    SEP = b"<|endoftext|>"

    def get(self, i: int) -> str:
        return self._raw(i).decode("utf-8", errors="replace").strip()


class _JsonLinesStories(_SeparatedStories):
    """One JSON object per line with a text field."""

    SEP = b"\n"

    def __init__(self, path: str, field: str | None):
        super().__init__(path)
        self.field = field
        if len(self):
            self.field = _pick_field(self._record(0), field, path)

    def _record(self, i: int) -> Any:
        raw = self._raw(i)
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise UserInputError(
                f"'{self.path}': line at byte {int(self.starts[i])} is not valid JSON ({exc}); "
                "expected one JSON object per line with a text field"
            ) from None

    def get(self, i: int) -> str:
        rec = self._record(i)
        if not isinstance(rec, dict) or not isinstance(rec.get(self.field), str):
            raise UserInputError(
                f"'{self.path}': record at byte {int(self.starts[i])} has no "
                f"string field '{self.field}'"
            )
        return rec[self.field].strip()


def _pick_field(record: Any, field: str | None, path: str) -> str:
    if not isinstance(record, dict):
        raise UserInputError(
            f"'{path}': expected JSON objects with a text field, found {type(record).__name__}"
        )
    for name in [field] if field else ["text", "story"]:
        if isinstance(record.get(name), str):
            return name
    raise UserInputError(
        f"'{path}': records have no string field "
        f"{repr(field) if field else 'text or story'}; fields present: {sorted(record)}"
    )


class _ListStories:
    """Stories held in memory (JSON arrays, saved HF datasets)."""

    def __init__(self, texts: Sequence[str]):
        self.texts = texts

    def __len__(self) -> int:
        return len(self.texts)

    def get(self, i: int) -> str:
        return str(self.texts[i]).strip()


def _json_array(path: str, field: str | None) -> _ListStories:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except ValueError as exc:
        raise UserInputError(
            f"'{path}' is not valid JSON ({exc}): expected a JSON array of "
            "objects with a text field, or JSON lines"
        ) from None
    if not isinstance(data, list):
        raise UserInputError(
            f"'{path}': expected a JSON array of objects, found {type(data).__name__}"
        )
    if not data:
        return _ListStories([])
    if all(isinstance(x, str) for x in data):
        return _ListStories(data)
    name = _pick_field(data[0], field, path)
    texts = []
    for k, rec in enumerate(data):
        if not isinstance(rec, dict) or not isinstance(rec.get(name), str):
            raise UserInputError(f"'{path}': element {k} has no string field '{name}'")
        texts.append(rec[name])
    return _ListStories(texts)


def _hf_saved(path: str, split: str, field: str | None) -> _ListStories:
    try:
        import datasets  # optional dependency
    except ImportError:
        raise UserInputError(
            f"'{path}' is a saved Hugging Face dataset, which needs the optional package "
            "'datasets' (pip install datasets); or export it to JSON lines"
        ) from None
    obj = datasets.load_from_disk(path)
    if isinstance(obj, datasets.DatasetDict):
        names = ["train"] if split == _TRAIN else ["validation", "valid", "val", "test"]
        found = [n for n in names if n in obj]
        if not found:
            raise UserInputError(f"'{path}' has splits {sorted(obj)}: none matches '{split}'")
        obj = obj[found[0]]
    name = field or ("text" if "text" in obj.column_names else "story")
    if name not in obj.column_names:
        raise UserInputError(f"'{path}': no column '{name}'; columns: {obj.column_names}")
    return _ListStories(obj[name])


def _open_stories(path: str, field: str | None, split: str):
    if os.path.isdir(path):
        return _hf_saved(path, split, field)
    low = path.lower()
    if low.endswith(".jsonl"):
        return _JsonLinesStories(path, field)
    if low.endswith(".json"):
        with open(path, "rb") as fh:
            head = fh.read(4096).lstrip()
        if head.startswith(b"["):
            return _json_array(path, field)
        return _JsonLinesStories(path, field)
    if low.endswith(".txt"):
        return _TextStories(path)
    raise UserInputError(
        f"'{path}': unsupported TinyStories file type; expected .txt (stories separated by "
        "<|endoftext|>), .jsonl/.json (objects with a text field) or a saved datasets directory"
    )


def _resolve_story_file(path: str, split: str) -> str:
    """A file path, or the split's file inside a directory (or the directory itself if saved
    with ``datasets``)."""
    if not os.path.isdir(path):
        return path
    marks = ("dataset_dict.json", "dataset_info.json", "state.json")
    if any(os.path.exists(os.path.join(path, m)) for m in marks):
        return path
    keys = ("train",) if split == _TRAIN else ("valid", "val", "test")
    files = sorted(
        f
        for f in os.listdir(path)
        if f.lower().endswith((".txt", ".jsonl", ".json"))
        and any(k in os.path.splitext(f)[0].lower() for k in keys)
        and os.path.isfile(os.path.join(path, f))
    )
    if len(files) == 1:
        return os.path.join(path, files[0])
    if not files:
        raise UserInputError(
            f"no {split} file in directory '{path}': expected e.g. TinyStories-"
            f"{'train' if split == _TRAIN else 'valid'}.txt, {split}.jsonl, or a directory "
            "saved with datasets.save_to_disk"
        )
    raise UserInputError(
        f"several {split} files in '{path}' ({', '.join(files)}): pass the file itself as path"
    )
