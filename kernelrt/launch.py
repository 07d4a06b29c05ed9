"""Launch configuration: an immutable, normalised (grid, block, shared memory) value.

``LaunchConfig.of(grid, block, shared_mem)`` accepts ints or 1-3 tuples, requires
every entry to be an int >= 1, pads to 3-tuples and is hashable, so backends can
cache per-configuration launchers. ``check_limits`` compares it with a device's
``DeviceLimits`` and refuses, never clamps: the message names the limit, the value
asked for and the hardware value.
"""

from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass

from .errors import LaunchConfigError

__all__ = ["LaunchConfig", "DeviceLimits", "check_limits", "normalize_dims"]

_AXES = "xyz"


def normalize_dims(value, what: str) -> tuple[int, int, int]:
    """An int or a tuple of 1-3 ints >= 1, as a 3-tuple padded with 1."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        dims = (value,)
    elif isinstance(value, (tuple, list)):
        dims = tuple(value)
        if not 1 <= len(dims) <= 3:
            raise LaunchConfigError(
                f"{what} must have 1 to 3 dimensions (got {len(dims)}: {value!r})"
            )
    else:
        raise LaunchConfigError(
            f"{what} must be an int or a tuple of 1-3 ints (got {type(value).__name__}: {value!r})"
        )
    for axis, d in zip(_AXES, dims):
        if isinstance(d, bool) or not isinstance(d, numbers.Integral):
            raise LaunchConfigError(
                f"{what}.{axis} must be an int (got {type(d).__name__}: {d!r})"
            )
        if d < 1:
            raise LaunchConfigError(f"{what}.{axis} must be >= 1 (got {d})")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))


@dataclass(frozen=True)
class LaunchConfig:
    """Grid and block as 3-tuples of ints >= 1, plus dynamic shared memory in bytes."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int = 0
    ndim: int = 1

    @staticmethod
    @functools.lru_cache(maxsize=4096, typed=True)  # typed: True == 1, but grid=True is refused
    def _cached(grid, block, shared_mem):
        return LaunchConfig._build(grid, block, shared_mem)

    @classmethod
    def of(cls, grid, block, shared_mem=0) -> "LaunchConfig":
        """Normalise user input; repeated configurations come from a small memo."""
        if isinstance(grid, LaunchConfig):
            return grid
        try:
            return cls._cached(grid, block, shared_mem)
        except TypeError:  # unhashable input (lists): build without the memo
            return cls._build(grid, block, shared_mem)

    @classmethod
    def _build(cls, grid, block, shared_mem):
        g = normalize_dims(grid, "grid")
        b = normalize_dims(block, "block")
        if isinstance(shared_mem, bool) or not isinstance(shared_mem, numbers.Integral):
            raise LaunchConfigError(
                f"shared_mem must be an int number of bytes (got {type(shared_mem).__name__}: {shared_mem!r})"
            )
        if shared_mem < 0:
            raise LaunchConfigError(f"shared_mem must be >= 0 bytes (got {shared_mem})")
        ndim = max(_given_ndim(grid), _given_ndim(block))
        return cls(g, b, int(shared_mem), ndim)

    @property
    def threads_per_block(self) -> int:
        """Threads in one block: the product of the block's three sizes."""
        x, y, z = self.block
        return x * y * z

    @property
    def shape(self) -> tuple[int, int, int]:
        """The global index space: grid * block per axis."""
        return tuple(g * b for g, b in zip(self.grid, self.block))

    def __repr__(self):
        def fmt(t):
            return "(" + ", ".join(map(str, t[: self.ndim])) + ("," if self.ndim == 1 else "") + ")"

        smem = f", shared_mem={self.shared_mem}" if self.shared_mem else ""
        return f"LaunchConfig(grid={fmt(self.grid)}, block={fmt(self.block)}{smem})"


def _given_ndim(value) -> int:
    return len(value) if isinstance(value, (tuple, list)) else 1


@dataclass(frozen=True)
class DeviceLimits:
    """The launch limits of one device, read once when its backend is made."""

    max_threads_per_block: int = 1024
    max_block_dim: tuple[int, int, int] = (1024, 1024, 64)
    max_grid_dim: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    max_shared_mem_per_block: int = 48 * 1024
    max_shared_mem_per_block_optin: int = 48 * 1024
    device: str = "device"


def check_limits(
    config: LaunchConfig,
    limits: DeviceLimits,
    *,
    static_shared_mem: int = 0,
    max_threads_for_kernel: int | None = None,
) -> None:
    """Raise LaunchConfigError if ``config`` does not fit ``limits``."""
    on = f"on {limits.device}"
    tpb = config.threads_per_block
    if tpb > limits.max_threads_per_block:
        raise LaunchConfigError(
            f"block {config.block[:config.ndim]} has {tpb} threads; the limit "
            f"max_threads_per_block {on} is {limits.max_threads_per_block}"
        )
    if max_threads_for_kernel is not None and tpb > max_threads_for_kernel:
        raise LaunchConfigError(
            f"block has {tpb} threads; this kernel's register use allows at most "
            f"{max_threads_for_kernel} threads per block {on}"
        )
    for axis, want, cap in zip(_AXES, config.block, limits.max_block_dim):
        if want > cap:
            raise LaunchConfigError(
                f"block.{axis} = {want} exceeds the limit max_block_dim_{axis} {on}, which is {cap}"
            )
    for axis, want, cap in zip(_AXES, config.grid, limits.max_grid_dim):
        if want > cap:
            raise LaunchConfigError(
                f"grid.{axis} = {want} exceeds the limit max_grid_dim_{axis} {on}, which is {cap}"
            )
    smem = config.shared_mem + static_shared_mem
    if smem > limits.max_shared_mem_per_block_optin:
        detail = (
            f" ({config.shared_mem} dynamic + {static_shared_mem} static)"
            if static_shared_mem
            else ""
        )
        raise LaunchConfigError(
            f"shared memory {smem} bytes{detail} exceeds the limit "
            f"max_shared_mem_per_block {on}, which is {limits.max_shared_mem_per_block_optin} bytes"
        )
