"""tiler: tiling-strategy autotuner for Ascend NPU and NVIDIA GPU kernels.

Python API (`tiler.api`, loaded on first use, so `import tiler` stays instant)::

    import tiler
    res = tiler.search(op="matmul", chip="h200", shape="M=4096,N=4096,K=4096")
    res.tiling(0), res.row(0), res.document()
    tiler.explain(op=..., chip=..., shape=..., tiling={...})
    tiler.rank(op=..., chip=..., shape=..., candidates=frame_or_csv_path)
    tiler.sweep(shapes=frame_or_csv_path, op=..., chips="h200,ascend910b3", out="results/s.csv")
    tiler.lookup("lib.h200.json", op="matmul", chip="h200", shape="M=300,N=4096,K=4096")  # no model imported
    tiler.emit("lib.h200.json", target="triton", out="gen/")   # the library as a dispatch unit (code)
    tiler.shapes("examples/models/llama-3-8b/config.json", op="matmul", tokens="1,2048", tp=2)  # a model's shapes

`tiler.search`, `tiler.rank`, `tiler.sweep` and `tiler.shapes` are also the names of submodules (`from tiler.search import
exhaustive` keeps working): those modules are callable, and calling one calls the `tiler.api` function of that name.
"""

import sys as _sys
import types as _types

__version__ = "0.1.0"
__all__ = ["__version__", "emit", "explain", "lookup", "rank", "search", "shapes", "sweep"]
_API_ONLY = ("explain", "emit")  # API functions that are not also submodules

_CALLABLE_SUBMODULES = (
    "search",
    "rank",
    "sweep",
    "lookup",
    "shapes",
)  # submodule names that are API functions too


class _CallableModule(_types.ModuleType):
    """A submodule named like an API function: `tiler.search(...)` calls `tiler.api.search(...)`."""

    def __call__(self, *args, **kwargs):
        from . import api

        return getattr(api, self.__name__.rpartition(".")[2])(*args, **kwargs)


class _Package(_types.ModuleType):
    """The `tiler` package: when the import system binds one of those submodules here, it becomes callable."""

    def __setattr__(self, name, value):
        if name in _CALLABLE_SUBMODULES and type(value) is _types.ModuleType:
            value.__class__ = _CallableModule
        super().__setattr__(name, value)


def __getattr__(name):
    if name in _CALLABLE_SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    if name in _API_ONLY:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_sys.modules[__name__].__class__ = _Package
