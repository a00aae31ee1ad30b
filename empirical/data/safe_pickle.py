"""A restricted unpickler for data files: no file a user names runs code.

``pickle.load`` calls whatever a file names (``os.system``, ``subprocess.Popen``, ...): a
crafted CIFAR-10 batch would run a command before anything checks it. :func:`load_data_pickle`
reads the containers pickle builds from opcodes alone (dict, list, tuple, bytes, str,
numbers, booleans, ``None``) and, of everything a pickle reaches through a global, only what
a numpy array needs: ``numpy.ndarray``, ``numpy.dtype``, the array reconstructor
``_reconstruct`` (``numpy.core.multiarray`` in the released CIFAR-10 files, written by
Python 2; ``numpy._core.multiarray`` when numpy 2 writes them), ``numeric._frombuffer`` (an
array pickled with protocol 5), numpy scalars (``multiarray.scalar``) and ``_codecs.encode`` with the latin-1 codec (how Python 3's protocol
2 stores bytes). Any other global is refused before it is looked up or called, with a
:class:`RefusedGlobal` error that names it; a persistent id is refused too.
"""

from __future__ import annotations

import codecs
import io
import pickle
from typing import Any, BinaryIO

import numpy as np

__all__ = ["RefusedGlobal", "SafeUnpickler", "load_data_pickle", "ALLOWED_GLOBALS"]


class RefusedGlobal(pickle.UnpicklingError):
    """A pickle asked for a global outside :data:`ALLOWED_GLOBALS` (it was not imported)."""

    def __init__(self, module: str, name: str) -> None:
        super().__init__(f"it asks for '{module}.{name}', which a data file never needs")
        self.module, self.name = module, name


def _latin1_encode(text: str, encoding: str = "utf-8", errors: str = "strict") -> bytes:
    """``_codecs.encode`` as Python 3's protocol 2 uses it for bytes: latin-1 only."""
    if codecs.lookup(encoding).name != "iso8859-1" or errors != "strict":
        raise RefusedGlobal("_codecs", f"encode(..., {encoding!r}, {errors!r})")
    return text.encode("latin-1")


def _numpy_attr(module: str, name: str) -> Any:
    """``numpy._core.SUB.NAME`` (numpy 2) or ``numpy.core.SUB.NAME`` (numpy 1), from whichever
    exists, without the deprecated ``numpy.core`` alias."""
    sub = module.rpartition(".")[2]
    for where in (f"numpy._core.{sub}", f"numpy.core.{sub}"):
        try:
            mod = __import__(where, fromlist=[name])
        except ImportError:
            continue
        return getattr(mod, name)
    raise RefusedGlobal(module, name)  # pragma: no cover - numpy always has one of them


#: (module, name) -> the object it stands for; the only globals a data pickle may name
ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): _latin1_encode,
    **{
        (f"{core}.{sub}", name): None  # resolved on use (_numpy_attr)
        for core in ("numpy.core", "numpy._core")
        for sub, name in (("multiarray", "_reconstruct"), ("multiarray", "scalar"))
        + (("numeric", "_frombuffer"),)
    },
}


class SafeUnpickler(pickle.Unpickler):
    """A :class:`pickle.Unpickler` whose globals are :data:`ALLOWED_GLOBALS` only."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: D102 - see the class
        key = (module, name)
        if key not in ALLOWED_GLOBALS:
            raise RefusedGlobal(module, name)
        value = ALLOWED_GLOBALS[key]
        return _numpy_attr(module, name) if value is None else value

    def persistent_load(self, pid: Any) -> Any:  # noqa: D102 - refused: no external objects
        raise pickle.UnpicklingError("it holds a persistent id, which a data file never needs")


def load_data_pickle(source: BinaryIO | bytes, *, encoding: str = "bytes") -> Any:
    """The object pickled in ``source`` (an open binary file or bytes), through
    :class:`SafeUnpickler`. ``encoding`` is the one of :func:`pickle.load` for Python 2
    strings (``"bytes"``: CIFAR-10's keys stay ``b'data'``, ``b'labels'``).

    Raises :class:`RefusedGlobal` (a :class:`pickle.UnpicklingError`) for a file that asks
    for anything else, and what :func:`pickle.load` raises for a corrupt one.
    """
    fh = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source
    return SafeUnpickler(fh, encoding=encoding).load()
