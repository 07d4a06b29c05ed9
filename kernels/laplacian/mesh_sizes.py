"""A mesh file's element counts checked against its size, before a reader allocates for them.

The readers (meshio, nibabel) believe a file's header: a 6 KB PLY whose header claims
10^8 faces cost meshio 28 s and 2.5 GB before it failed, and a binary PLY cut at a face
boundary read as a surface with a hole. ``check_sizes`` reads only the header and the
file's size and refuses a file too short for what its header declares, with a message
naming the file, what was expected and what was found. ``check_counts`` compares what a
reader returned with the header's counts afterwards.

What each format allows:

* binary PLY: vertex rows are fixed-size, so the vertex block's size is exact; a face row
  holds at least its count and three indices (a face of fewer corners is no surface);
* ASCII PLY and OFF: a value takes at least two bytes (a digit and a separator), the
  file's last value one;
* binary STL: 84 bytes of header and count, then exactly 50 bytes per triangle; a file
  starting with ``solid`` is left to the reader (meshio reads it as binary only when its
  size fits a count exactly, so it allocates nothing a header claims);
* FreeSurfer: 12 bytes per vertex and per triangle after the two header lines (volume
  metadata may follow); quad files 6 bytes per vertex and 12 per quad at least.

OBJ has no counts; VTK, VTU and GIFTI are left to their readers. ``why_missing`` says why
a path cannot be opened (absent, a dangling link, a loop of links).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["check_counts", "check_sizes", "why_missing"]

_HEADER_MAX = 1 << 20  # a PLY or OFF header longer than this is no header
_PLY_TYPES = {"char": 1, "uchar": 1, "int8": 1, "uint8": 1, "short": 2, "ushort": 2, "int16": 2,
              "uint16": 2, "int": 4, "uint": 4, "int32": 4, "uint32": 4, "float": 4, "float32": 4,
              "double": 8, "float64": 8}
_FS_TRIANGLE, _FS_QUADS = b"\xff\xff\xfe", (b"\xff\xff\xff", b"\xff\xff\xfd")


def _short(path: Path, what: str, needed: int, size: int) -> ValueError:
    return ValueError(f"{path} is too short for its header: {what} need at least {needed:,} bytes, "
                      f"the file has {size:,} (cut short, or a header that lies)")


def _header_lines(path: Path, end: bytes) -> tuple[list[str], int] | None:
    """The header's lines up to and including ``end``, and its length in bytes; None if it has none."""
    with open(path, "rb") as f:
        head = f.read(_HEADER_MAX)
    at = head.find(end)
    nl = head.find(b"\n", at)
    if at < 0 or nl < 0:
        return None  # no header: the reader says what is wrong
    length = nl + 1  # "end_header\r\n" too
    return head[:length].decode("latin-1").splitlines(), length


def _ply_header(path: Path) -> tuple[str, int, list[tuple[str, int, list]]] | None:
    """(format, header bytes, [(element, count, [(type or (count type, item type), name)])]), or None."""
    header = _header_lines(path, b"end_header")
    if header is None:
        return None
    lines, length = header
    fmt, elements = "", []
    for line in lines:
        words = line.split()
        if words[:1] == ["format"] and len(words) > 1:
            fmt = words[1]
        elif words[:1] == ["element"] and len(words) == 3:
            if not words[2].isdigit():
                return None  # the reader refuses it
            elements.append((words[1], int(words[2]), []))
        elif words[:1] == ["property"] and elements:
            if len(words) == 5 and words[1] == "list":
                elements[-1][2].append(((words[2], words[3]), words[4]))
            elif len(words) == 3:
                elements[-1][2].append((words[1], words[2]))
    return fmt, length, elements


def _ply_row(path: Path, element: str, props: list, binary: bool) -> int:
    """The fewest bytes a row of ``element`` takes."""
    total = 0
    for kind, name in props:
        if isinstance(kind, tuple):
            count, item = (_PLY_TYPES.get(t) for t in kind)
            if count is None or item is None:
                raise ValueError(f"{path}: PLY property {name!r} of {element!r} has an unknown type {kind}")
            corners = 3 if element == "face" and name in ("vertex_indices", "vertex_index") else 0
            total += count + corners * item if binary else 2 * (1 + corners)
        else:
            size = _PLY_TYPES.get(kind)
            if size is None:
                raise ValueError(f"{path}: PLY property {name!r} of {element!r} has an unknown type {kind!r}")
            total += size if binary else 2
    return total


def _off_counts(path: Path) -> tuple[int, int, int] | None:
    """(vertices, faces, header bytes) of an OFF file, or None if its header is not one."""
    with open(path, "rb") as f:
        head = f.read(_HEADER_MAX)
    at = 0
    lines = head.split(b"\n")
    for i, raw in enumerate(lines):
        at += len(raw) + 1
        words = raw.split(b"#")[0].split()
        if i == 0 and words[:1] == [b"OFF"]:
            words = words[1:]
        if words:
            if len(words) < 2 or not all(w.isdigit() for w in words[:2]):
                return None  # the reader refuses it
            return int(words[0]), int(words[1]), at
    return None


def check_sizes(path: Path, fmt: str) -> dict | None:
    """Refuse ``path`` if it is shorter than its header's element counts need (ValueError).

    Returns:
        ``{"vertices": N, "faces": F}`` as a PLY or OFF header declares them (for
        ``check_counts``, so the header is read once), else None.
    """
    size = os.stat(path).st_size
    header = _ply_header(path) if fmt == "PLY" else _off_counts(path) if fmt == "OFF" else ()
    if header is None:
        return None  # no header to check against: the reader says what is wrong
    if fmt == "PLY":
        kind, length, elements = header
        binary = kind.startswith("binary")
        needed, parts = length, []
        for name, n, props in elements:
            row = _ply_row(path, name, props, binary)
            needed += n * row
            parts.append(f"{n:,} {name} rows of {'at least ' if not binary or name != 'vertex' else ''}{row} bytes")
        if not binary and needed > length:
            needed -= 1  # the file's last value needs no separator after it
        if size < needed:
            raise _short(path, f"a {length}-byte {'binary' if binary else 'ASCII'} PLY header and "
                         + ", ".join(parts), needed, size)
        counts = {name: n for name, n, _ in elements}
        return {"vertices": counts.get("vertex", 0), "faces": counts.get("face", 0)}
    elif fmt == "OFF":
        nv, nf, length = header
        needed = length + 6 * nv + 8 * nf - (1 if nv or nf else 0)  # no separator after the last value
        if size < needed:
            raise _short(path, f"{nv:,} OFF vertices (6 bytes each at least) and {nf:,} faces (8 at least)",
                         needed, size)
        return {"vertices": nv, "faces": nf}
    elif fmt == "STL":
        with open(path, "rb") as f:
            head = f.read(84)
        if len(head) == 84 and not head.lstrip().startswith(b"solid"):
            n = int.from_bytes(head[80:84], "little")
            if size != 84 + 50 * n:
                raise ValueError(f"{path}: a binary STL of {n:,} triangles has {84 + 50 * n:,} bytes, "
                                 f"the file has {size:,} (cut short, or a count that lies)")
    elif fmt == "FreeSurfer":
        _check_freesurfer(path, size)
    return None


def _check_freesurfer(path: Path, size: int) -> None:
    with open(path, "rb") as f:
        magic = f.read(3)
        if magic == _FS_TRIANGLE:
            f.readline()  # "created by ..." and an empty line, as nibabel reads them
            f.readline()
            counts = f.read(8)
            if len(counts) < 8:
                raise _short(path, "the FreeSurfer header's vertex and face counts", f.tell() + 8, size)
            nv, nf = (int.from_bytes(counts[i:i + 4], "big", signed=True) for i in (0, 4))
            if nv < 0 or nf < 0:
                raise ValueError(f"{path}: FreeSurfer header declares {nv} vertices and {nf} faces")
            needed = f.tell() + 12 * (nv + nf)
            if size < needed:
                raise _short(path, f"{nv:,} vertices and {nf:,} triangles of 12 bytes each", needed, size)
        elif magic in _FS_QUADS:
            counts = f.read(6)
            nv, nq = int.from_bytes(counts[:3], "big"), int.from_bytes(counts[3:], "big")
            needed = 9 + (6 if magic == _FS_QUADS[0] else 12) * nv + 12 * nq
            if size < needed:
                raise _short(path, f"{nv:,} vertices and {nq:,} quads", needed, size)


def check_counts(path: Path, declared: dict | None, vertices, faces) -> None:
    """Refuse what a reader returned if it holds other counts than the header declared (``check_sizes``)."""
    if declared is None:
        return
    found = {"vertices": len(vertices), "faces": len(faces)}
    for what, n in declared.items():
        if found[what] != n:
            raise ValueError(f"{path}: its header declares {n:,} {what}, the reader found {found[what]:,} "
                             "(a short or damaged block)")


def why_missing(path: Path) -> str:
    """Why ``path`` cannot be opened: absent, a dangling symbolic link, or a loop of them."""
    if not path.is_symlink():
        return f"mesh file not found: {path}"
    try:
        path.resolve(strict=True)
    except RuntimeError:  # Python < 3.13 raises this for a loop
        return f"{path} is a symbolic link in a loop of links"
    except OSError as e:
        if e.errno == errno.ELOOP:
            return f"{path} is a symbolic link in a loop of links"
    return f"{path} is a dangling symbolic link (to {os.readlink(path)}, which does not exist)"
