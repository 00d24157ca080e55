"""What every operator's `--measure triton` runner shares: reading an exported document, timing it with the
operator's kernel and turning any failure of the GPU stack or the kernel into a MeasureError that fails one trial
only; `DocumentRunner` builds an operator's `tiling_from_doc`, `measure_document` and `vendor_document` from its
problem class and its timing functions."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path

from ..errors import TilerError

GPU_EXTRA = "pip install 'tiler[gpu]'"  # what installs torch and triton


def load_document(path_or_dict) -> dict:
    """A tiler.tiling/v1 document: the dict itself, or the JSON object read from a path (at most
    tiler.io.FILE_BYTES_MAX bytes; TilerError in one line when it cannot be read or is not a JSON object)."""
    if isinstance(path_or_dict, dict):
        return path_or_dict
    from ..space import read_text_file

    path = Path(path_or_dict)
    text = read_text_file(path, "the tiling")  # at most tiler.io.FILE_BYTES_MAX bytes; one line on failure
    try:
        doc = json.loads(text)
    except (RecursionError, ValueError) as e:  # JSONDecodeError; nested too deep; a number too long
        raise TilerError(f"{path} is not JSON: {str(e).splitlines()[0][:80] or 'nested too deep'}") from None
    if not isinstance(doc, dict):
        raise TilerError(f"{path}: a tiling document is a JSON object")
    return doc


def tiling_from_doc(doc: dict, problem_cls, knobs) -> tuple[dict, dict, str]:
    """(problem fields, knob config, dtype) from a tiler.tiling/v1 document of `problem_cls.OP`."""
    if doc.get("op") != problem_cls.OP:
        raise TilerError(f"runner: expected a {problem_cls.OP} tiling, got op {doc.get('op')!r}")
    shape = doc["problem"]["shape"]
    fields = {k: shape[k] for k in (*problem_cls.FIELDS, *problem_cls.OPTIONAL) if k in shape}
    fields = {k: (v if k in getattr(problem_cls, "CHOICES", {}) else int(v)) for k, v in fields.items()}
    # a knob added after the document was written is absent: the kernel takes its default
    cfg = {k: doc["tiling"][k] for k in knobs if k in doc["tiling"]}
    return fields, cfg, str(doc["problem"]["dtype"])


def measured_us(
    run: Callable[[], dict],
    own: tuple[type[BaseException], ...] = (),
    missing: tuple[type[BaseException], ...] = (ImportError,),
) -> float:
    """Run a timing (returns {"ms": ...}) and give microseconds; a missing GPU stack, a kernel that does not compile
    or launch, or a wrong result raises MeasureError (tiler.runners.external), which fails this trial only.

    `own`: the runner's own errors, already one line for the user, passed on as they are (their first line);
    `missing`: the errors that mean torch or triton is not installed (a runner that reports that itself, as one of
    `own`, passes none)."""
    from ..runners.external import MeasureError

    try:
        res = run()
    except own as exc:
        raise MeasureError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    except missing as exc:
        raise MeasureError(f"triton: the GPU stack is missing ({exc}): {GPU_EXTRA}") from None
    except Exception as exc:  # noqa: BLE001 - a kernel that does not compile or launch fails this trial only
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MeasureError(f"triton: {type(exc).__name__}: {first[:200]}") from None
    return float(res["ms"]) * 1e3


def median_ms(fn: Callable[[], object], warmup: float, rep: float) -> float:
    """The timing protocol every runner shares: the median of triton.testing.do_bench over `rep` ms after `warmup`
    ms (L2 flushed before each call), in milliseconds."""
    import triton

    return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))


def _resolve(spec):
    """`spec` itself when it is a function, else the object that "package.module:name" names, imported now (a
    runner imports its kernels, and they torch and triton, only when it measures)."""
    if callable(spec):
        return spec
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


class DocumentRunner:
    """One operator's `--measure triton` and `--vendor` entry points, from what is specific to it.

    `problem_cls`: its problem class (OP, FIELDS, OPTIONAL, CHOICES); `knobs`: "module:name" of its knob names;
    `time`: fn(problem fields, config, dtype=dtype) -> {"ms": ...} that checks and times one tiling; `vendor`:
    fn(problem fields, dtype) -> (name, ms), the vendor call on the same problem, or None. A function may be given
    as "module:name", imported when a document is measured, so the operator imports without its kernels."""

    def __init__(self, problem_cls, knobs: str, time, vendor=None):
        self.problem_cls, self.knobs, self.time, self.vendor = problem_cls, knobs, time, vendor

    def tiling_from_doc(self, doc: dict) -> tuple[dict, dict, str]:
        """(problem fields, knob config, dtype) from a tiler.tiling/v1 document of this operator."""
        return tiling_from_doc(doc, self.problem_cls, _resolve(self.knobs))

    def measure_document(self, doc: dict) -> float:
        """The median time in microseconds of a tiling document (a failure fails this trial only)."""

        def run():
            time = _resolve(self.time)
            problem, cfg, dtype = self.tiling_from_doc(doc)
            return time(problem, cfg, dtype=dtype)

        return measured_us(run)

    def vendor_document(self, doc: dict) -> dict:
        """The vendor call on a tiling document's problem, timed as a tiling is: {"name", "us"}."""
        if self.vendor is None:
            raise TilerError(f"{self.problem_cls.OP}: the Triton runner times no vendor call")
        problem, _, dtype = self.tiling_from_doc(doc)
        name, ms = _resolve(self.vendor)(problem, dtype)
        return {"name": name, "us": float(ms) * 1e3}


class TritonRunner:
    """`--measure triton` and `--vendor` of a cuda Operator (a mixin before Operator) whose package holds a
    `triton_runner` module with `measure_document` and `vendor_document`: the module, and through it the kernels,
    torch and triton, is imported only when a measurement is asked for. An operator whose DocumentRunner times no
    vendor call answers `vendor()` as Operator does (no vendor call beside the runner)."""

    def _triton_runner(self):
        return importlib.import_module(".triton_runner", type(self).__module__.rpartition(".")[0])

    def runner(self, name: str):
        if name not in self.RUNNERS:
            return super().runner(name)
        return self._triton_runner().measure_document

    def vendor(self, name: str):
        if name not in self.RUNNERS:
            return super().vendor(name)
        module = self._triton_runner()
        if getattr(getattr(module, "RUNNER", None), "vendor", True) is None:
            return super().vendor(name)
        return module.vendor_document
