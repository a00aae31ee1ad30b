"""``palsgd train --compile``: the model's forward compiled by ``torch.compile`` in place.

:func:`compile_model` calls :meth:`torch.nn.Module.compile`, which compiles the module's
call and leaves the module itself as it is: the same object, parameters and buffers (so the
algorithms' pulls, syncs and outer steps, which update the parameters in place between
steps, act on what the compiled forward reads), and a ``state_dict`` with the plain
module's names. A checkpoint written by a compiled run therefore carries no
``_orig_mod.`` prefix (what wrapping the module in ``torch.compile(model)`` would add) and
resumes with or without ``--compile``.

The default is off: on the CPU compiling costs more than it saves for the models here,
and on CUDA it stays off until a compiled step is measured faster on a GPU in this
project (docs/trainer.md).
"""

from __future__ import annotations

from typing import Any

from torch import nn

__all__ = ["COMPILE_BACKEND", "compile_model", "is_compiled"]

#: the ``torch.compile`` backend of ``--compile``: ``"inductor"`` (generated kernels; on the
#: CPU it needs a C++ compiler). The tests set ``"aot_eager"``, which traces and runs the
#: same forward and backward graphs without generating code, to check the wiring quickly.
COMPILE_BACKEND = "inductor"


def compile_model(model: nn.Module, backend: str | None = None, **options: Any) -> nn.Module:
    """Compile ``model``'s forward in place with ``torch.compile`` (``backend``: default
    :data:`COMPILE_BACKEND`; ``options``: further ``torch.compile`` keywords) and return
    the same module. The first calls trace and compile (seconds to a minute); a change of
    shape or of ``model.training`` compiles again."""
    model.compile(backend=backend or COMPILE_BACKEND, **options)
    return model


def is_compiled(model: nn.Module) -> bool:
    """Whether ``model``'s call was compiled in place (:func:`compile_model`)."""
    return getattr(model, "_compiled_call_impl", None) is not None
