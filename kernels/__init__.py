"""kernelrt's kernel library, imported as ``kernelrt.kernels``.

* ``kernelrt.kernels.sfap``: MyoGen's single-fibre action potentials (``compute_sfaps``).
* ``kernelrt.kernels.laplacian``: SpectralBrain's cotangent Laplacian, eigenpairs, HKS/WKS.
* ``kernelrt.kernels.demo``: what ``kernelrt demo`` runs.

The library uses only kernelrt's public API; importing this package imports nothing else.
"""

__all__ = ["host_warmups", "variant_specs", "warm_specs"]


def warm_specs() -> dict:
    """Every built-in kernel with the signatures the drivers launch it with.

    Returns:
        ``{"cpu": [(kernel, signature), ...], "cuda": [...]}``, what ``kernelrt cache
        warm`` and ``kernelrt demo`` compile or load.
    """
    from . import laplacian, sfap  # they import numba: the CLI imports this package for --help too

    specs: dict = {"cpu": [], "cuda": []}
    for module in (sfap, laplacian):
        for target, items in module.warm_specs().items():
            specs[target].extend(items)
    return specs


def host_warmups() -> list:
    """(name, function) of each run that compiles the built-in ``kernelrt.njit`` host functions (the
    eigensolver's helpers), for ``kernelrt cache warm``."""
    from . import laplacian

    return laplacian.host_warmups()


def variant_specs() -> list:
    """Every GPU kernel variant (``kernelrt.kernels.variants``) with the signature its driver launches it with.

    Not in ``warm_specs``: the defaults are what runs unless a variant is chosen. The PTX
    layer compiles these, and tools/kernel_resources.py lists their resources.
    """
    from . import laplacian, sfap

    return sfap.variant_specs() + laplacian.variant_specs()
