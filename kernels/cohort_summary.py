"""``kernelrt cohort``'s summary: one row per subject, as ``summary.csv`` and as a table.

Beside cohort_cli.py, and as light: ``kernelrt --help`` imports it (the ``laplacian``
package, numba with it, is imported only to write the file).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

__all__ = ["SUMMARY_COLUMNS", "ZERO_EIGENVALUE", "format_table", "summary_rows", "write_summary"]

SUMMARY_COLUMNS = ("name", "status", "n_vertices", "n_faces", "lambda_1", "lambda_k", "route",
                   "max_residual", "seconds", "backend", "reports", "error")
ZERO_EIGENVALUE = 1e-10  # lambda_1 is the first eigenvalue above this: the constant mode's λ ≈ 0 is not it


def summary_rows(results) -> list[dict]:
    """One dict per subject (``SUMMARY_COLUMNS``), in input order; None where nothing applies.

    Args:
        results: ``cohort_spectra(..., errors="keep")``'s list of ``SubjectSpectrum`` and
            ``TaskFailure``.

    Returns:
        Rows with ``status`` "ok" or "failed", ``lambda_1`` the first eigenvalue above
        ``ZERO_EIGENVALUE`` (None if none is), ``seconds`` the eigensolver's time, ``reports``
        the number of degenerate-face reports and ``error`` the failure's one-line message.
    """
    rows = []
    for r in results:
        row = dict.fromkeys(SUMMARY_COLUMNS)
        row["name"] = r.name
        if hasattr(r, "error"):  # a TaskFailure
            row.update(status="failed", error=" ".join(f"{type(r.error).__name__}: {r.error}".split()))
        else:
            positive = [float(x) for x in r.evals if x > ZERO_EIGENVALUE]
            row.update(status="ok", n_vertices=int(r.n_vertices), n_faces=int(r.n_faces),
                       lambda_1=positive[0] if positive else None, lambda_k=float(r.evals[-1]), route=r.route,
                       max_residual=_finite(r.max_residual), seconds=_finite(r.seconds), backend=r.backend,
                       reports=len(r.reports))
        rows.append(row)
    return rows


def _finite(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None  # JSON has no NaN


def write_summary(out, rows) -> Path:
    """Write ``<out>/summary.csv`` (``SUMMARY_COLUMNS``) whole or not at all: a temporary file, renamed."""
    from .laplacian.cohort_store import (
        replaced_atomically,  # numba: only when the command runs
    )

    path = Path(out) / "summary.csv"
    with replaced_atomically(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=SUMMARY_COLUMNS)
        writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)
    return path


_FORMATS = {"lambda_1": "{:.6g}", "lambda_k": "{:.6g}", "max_residual": "{:.1e}", "seconds": "{:.2f}"}
_RIGHT = {"n_vertices", "n_faces", "lambda_1", "lambda_k", "max_residual", "seconds", "reports"}


def format_table(rows) -> str:
    """The rows as an aligned text table, a header line first; the error column is last and unpadded."""
    cells = [list(SUMMARY_COLUMNS)]
    for row in rows:
        cells.append(["" if row[c] is None else _FORMATS.get(c, "{}").format(row[c]) for c in SUMMARY_COLUMNS])
    widths = [max(len(line[i]) for line in cells) for i in range(len(SUMMARY_COLUMNS))]
    lines = []
    for line in cells:
        parts = [text.rjust(w) if c in _RIGHT else text.ljust(w)
                 for c, text, w in zip(SUMMARY_COLUMNS[:-1], line, widths)]
        lines.append("  ".join(parts + [line[-1]]).rstrip())
    return "\n".join(lines)
