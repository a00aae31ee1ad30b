"""Tokenizers for the language-model datasets: a byte-level default and local HF tokenizers.

Nothing is downloaded. The default :class:`ByteTokenizer` needs no files at all; a Hugging
Face tokenizer is loaded only from a local directory (``local_files_only=True``), e.g. a copy
of the GPT-2 BPE tokenizer of ``EleutherAI/gpt-neo-125m`` that the authors used.

Both expose the same small interface used by :mod:`empirical.data`:
``encode(text) -> list[int]`` (no special tokens added), ``decode(ids) -> str``,
``vocab_size``, ``eos_token_id`` and ``pad_token_id``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from core.errors import UserInputError

__all__ = ["Tokenizer", "ByteTokenizer", "HFTokenizer", "load_tokenizer"]


@runtime_checkable
class Tokenizer(Protocol):
    """What the datasets need from a tokenizer."""

    vocab_size: int
    eos_token_id: int
    pad_token_id: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


class ByteTokenizer:
    """Byte-level tokenizer: the UTF-8 bytes of the text, plus one special token.

    Vocabulary (``vocab_size = 257``):

    * ids 0..255: the byte values of the UTF-8 encoding (any text round-trips exactly);
    * id 256: ``<|endoftext|>``, the document separator (EOS).

    Padding uses the EOS id (``pad_token_id = eos_token_id = 256``), the same convention as
    the authors' GPT-2 BPE setup (pad = EOS = 50256); datasets mark padded positions with
    ``attention_mask = 0`` and ``labels = -100`` unless asked to reproduce the authors'
    padding. The string ``"<|endoftext|>"`` inside a text is encoded as its bytes, never as
    the special id, so file contents cannot inject separators.
    """

    eos_token = "<|endoftext|>"
    eos_token_id = 256
    pad_token_id = 256
    vocab_size = 257

    def encode(self, text: str) -> list[int]:
        """UTF-8 bytes of ``text`` as ids (no special tokens added)."""
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Inverse of :meth:`encode`; EOS is dropped or written as ``<|endoftext|>``.

        Invalid UTF-8 (e.g. a sequence cut inside a character) decodes to U+FFFD.
        Ids outside ``[0, vocab_size)`` raise :class:`UserInputError`.
        """
        out = bytearray()
        for i in ids:
            i = int(i)
            if 0 <= i < 256:
                out.append(i)
            elif i == self.eos_token_id:
                if not skip_special_tokens:
                    out.extend(self.eos_token.encode("utf-8"))
            else:
                raise UserInputError(
                    f"token id {i} is outside the byte tokenizer's vocabulary [0, {self.vocab_size})"
                )
        return out.decode("utf-8", errors="replace")

    def __repr__(self) -> str:
        return "ByteTokenizer(vocab_size=257, eos=256, pad=256)"


class HFTokenizer:
    """Adapter around a local Hugging Face tokenizer (``AutoTokenizer``).

    ``encode`` adds no special tokens. If the tokenizer has no pad token, the EOS token is used
    for padding (the authors' setting for GPT-2 BPE). ``vocab_size`` is ``len(tokenizer)``
    (base vocabulary plus added tokens), the size the embedding table needs.
    """

    def __init__(self, tokenizer: Any, name: str = ""):
        self.tokenizer = tokenizer
        self.name = name
        eos = getattr(tokenizer, "eos_token_id", None)
        pad = getattr(tokenizer, "pad_token_id", None)
        if eos is None and pad is None:
            raise UserInputError(
                f"tokenizer {name or tokenizer!r} defines neither an eos_token nor a pad_token: "
                "the language-model datasets need one to separate and pad documents"
            )
        self.eos_token_id = int(eos if eos is not None else pad)
        self.pad_token_id = int(pad if pad is not None else eos)
        self.vocab_size = int(len(tokenizer))

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def __repr__(self) -> str:
        return f"HFTokenizer({self.name!r}, vocab_size={self.vocab_size})"


def check_tokenizer_path(spec: str | os.PathLike) -> str:
    """The directory of a tokenizer spec given as a path; raises :class:`UserInputError`
    (naming the path) unless it is a directory. Cheap: nothing is loaded."""
    path = os.fspath(spec)
    if not os.path.isdir(path):
        raise UserInputError(
            f"tokenizer path '{path}' is not a directory: expected 'byte' or a local "
            "directory saved with a Hugging Face tokenizer's save_pretrained()"
        )
    return path


def load_tokenizer(spec: Any = None) -> Tokenizer:
    """Return a tokenizer from a spec.

    * ``None`` or ``"byte"``: :class:`ByteTokenizer`;
    * a path to a local directory: ``AutoTokenizer.from_pretrained(path, local_files_only=True)``
      wrapped in :class:`HFTokenizer` (no network access);
    * a Hugging Face tokenizer object: wrapped in :class:`HFTokenizer` (its ``vocab_size``
      excludes added tokens, so the adapter uses ``len(tokenizer)``);
    * any other object with ``encode``, ``decode``, ``vocab_size``, ``eos_token_id`` and
      ``pad_token_id``: returned as is.
    """
    if spec is None or (isinstance(spec, str) and spec == "byte"):
        return ByteTokenizer()
    if isinstance(spec, str | os.PathLike):
        path = check_tokenizer_path(spec)
        return HFTokenizer(_load_hf_tokenizer(path), name=path)
    if isinstance(spec, ByteTokenizer | HFTokenizer):
        return spec
    if (
        hasattr(spec, "encode")
        and hasattr(spec, "__len__")
        and hasattr(spec, "convert_ids_to_tokens")
    ):
        return HFTokenizer(spec, name=type(spec).__name__)
    if isinstance(spec, Tokenizer):
        return spec
    raise UserInputError(
        f"tokenizer {spec!r} is not usable: expected None, 'byte', a local tokenizer directory, "
        "or an object with encode(), decode(), vocab_size, eos_token_id and pad_token_id"
    )


def _load_hf_tokenizer(path: str) -> Any:
    """A Hugging Face tokenizer saved in the directory ``path`` (``transformers`` is imported
    here: it takes seconds, and only this kind of tokenizer needs it)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise UserInputError(
            f"could not load a Hugging Face tokenizer from '{path}' (expected the files "
            f"written by save_pretrained(), e.g. tokenizer.json): {exc}"
        ) from None
