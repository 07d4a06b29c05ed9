"""Runs the CUDABackend documentation's examples (tests/examples/doc_*.py) as scripts.

``fallback=True`` runs an example on the CPU fallback the way a user without a GPU does:
the import line ``from kernelrt import CUDABackend`` swapped for
``from kernelrt import CPUBackend as CUDABackend`` (same number of lines, so tracebacks and
the kernels' source lookups point into the file).
"""

from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
IMPORT = "from kernelrt import CUDABackend\n"
FALLBACK = "from kernelrt import CPUBackend as CUDABackend\n"


def run_example(name: str, *, fallback: bool = False, namespace: dict | None = None) -> dict:
    """Execute ``tests/examples/<name>.py`` as ``__main__``; returns its globals.

    If the example raises, the exception propagates and ``namespace`` (when given) holds
    what the example defined before it.
    """
    path = EXAMPLES / f"{name}.py"
    source = path.read_text()
    if IMPORT not in source:
        raise ValueError(f"{path} does not import CUDABackend from kernelrt")
    if fallback:
        source = source.replace(IMPORT, FALLBACK)
    ns = namespace if namespace is not None else {}
    ns.update({"__name__": "__main__", "__file__": str(path)})
    exec(compile(source, str(path), "exec"), ns)
    return ns
