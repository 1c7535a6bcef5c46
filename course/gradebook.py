"""Who handed in what, and the gradebook's text: every submission its own row, whatever its name (course/grade.py).

Each row is keyed by its submission as found (``alice.ipynb``, ``alice/05_one_head.ipynb``); names, flags
and the escaping of what reaches a CSV or a terminal are described in book/instructors.md.
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
import stat
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

FORMULA = ("=", "+", "-", "@", "\t", "\r", "\n")
BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}


@dataclass
class Entry:
    """One submission as the folder holds it."""

    student: str  # the name as given (visible)
    submission: str  # what was found, relative to the folder (visible): the row's key
    path: Path | None  # the notebook, or None with a reason
    reason: str = ""
    flags: list[str] = field(default_factory=list)
    raw: str = ""  # what was found, as the file system gave it

    @property
    def stem(self) -> str:
        """The name of its feedback and log files: an ASCII form of the name and a digest of the submission."""
        ascii_name = unicodedata.normalize("NFKD", self.student).encode("ascii", "ignore").decode()
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", ascii_name).strip("._")[:40] or "student"
        digest = hashlib.sha256((self.raw or self.submission).encode("utf-8", "surrogateescape")).hexdigest()[:10]
        return f"{slug}-{digest}"


def visible(text: str, *, newlines: bool = False) -> str:
    """``text`` with every control character, bidirectional override and undecodable byte written as
    an escape, so that a terminal, an editor or a spreadsheet shows it and does not obey it."""
    out = []
    for ch in str(text):
        code = ord(ch)
        if ch == "\n" and newlines:
            out.append(ch)
        elif 0xDC80 <= code <= 0xDCFF:  # a byte of a file name that is not UTF-8 (surrogateescape)
            out.append(f"\\x{code - 0xDC00:02x}")
        elif code in BIDI or unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp"):
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def cell(text) -> str:
    """A CSV cell: visible, and never a formula."""
    text = visible(str(text))
    return "'" + text if text.lstrip(" ")[:1] in FORMULA and text else text


def short(text: str, width: int = 80) -> str:
    text = visible(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def _notebook(folder: Path, name: str, stem: str) -> tuple[Path | None, str]:
    """The chapter's notebook in a student's folder, or None and why."""
    try:
        with os.scandir(folder) as it:
            found = sorted((e.name, e) for e in it if e.name.endswith(".ipynb"))
    except OSError as exc:
        return None, f"the folder cannot be read ({exc.strerror})"
    notebooks = [n for n, e in found if e.is_file(follow_symlinks=False)]
    if f"{stem}.ipynb" in notebooks or len(notebooks) == 1:
        return folder / (f"{stem}.ipynb" if f"{stem}.ipynb" in notebooks else notebooks[0]), ""
    odd = [n for n, e in found if not e.is_file(follow_symlinks=False)]
    also = f" ({', '.join(visible(n) for n in odd[:3])}: a folder or link, not a notebook)" if odd else ""
    return None, f"{len(notebooks)} notebooks in the folder and none named {stem}.ipynb{also}"


def entries(folder: Path, stem: str) -> list[Entry]:
    """Every submission in ``folder`` (``NAME.ipynb`` or ``NAME/``), sorted by what was found, with flags."""
    found = []
    with os.scandir(folder) as it:
        items = sorted(it, key=lambda e: e.name)
    for item in items:
        name = item.name
        if name.startswith("."):
            continue
        student = name[:-6] if name.endswith(".ipynb") else name
        try:
            kind = os.lstat(item.path).st_mode
        except OSError as exc:  # gone, or unreadable, since the folder was listed
            found.append(Entry(visible(student), visible(name), None, f"it cannot be read ({exc.strerror})", raw=name))
            continue
        if stat.S_ISDIR(kind):
            path, reason = _notebook(Path(item.path), name, stem)
            label = f"{name}/{path.name}" if path is not None else f"{name}/"
            entry = Entry(visible(name), visible(label), path, reason, raw=label)
        elif stat.S_ISLNK(kind):
            entry = Entry(visible(student), visible(name), None, "the submission is a symbolic link: hand in the "
                                                                 "notebook itself", raw=name)
        elif not name.endswith(".ipynb"):
            continue
        elif not stat.S_ISREG(kind):
            entry = Entry(visible(student), visible(name), None, "the submission is not a regular file", raw=name)
        else:
            entry = Entry(visible(student), visible(name), Path(item.path), raw=name)
        if any(0xDC80 <= ord(c) <= 0xDCFF for c in name):
            entry.flags.append("its name is not valid UTF-8 (shown with \\x escapes)")
        found.append(entry)
    _flag(found)
    return found


def _flag(found: list[Entry]) -> None:
    by_name: dict[str, list[Entry]] = {}
    by_form: dict[str, list[Entry]] = {}
    for entry in found:
        by_name.setdefault(entry.student, []).append(entry)
        by_form.setdefault(unicodedata.normalize("NFC", entry.student), []).append(entry)
    for name, same in by_name.items():
        if len(same) > 1:
            listed = ", ".join(e.submission for e in same)
            for entry in same:
                entry.flags.append(f"{len(same)} submissions carry the name {name} ({listed}): each is graded on "
                                   f"its own row")
    for form, similar in by_form.items():
        names = sorted({e.student for e in similar})
        if len(names) > 1:
            for entry in similar:
                others = ", ".join(e.submission for e in similar if e.student != entry.student)
                entry.flags.append(f"its name and that of {others} differ only in how Unicode writes them "
                                   f"(NFC and NFD): two students, or one twice?")


def write_csv(path: Path, fieldnames: list[str], rows: list[dict]) -> None:
    """Write the gradebook whole or not at all: each text cell visible and never a formula."""
    part = path.with_name(path.name + ".part")
    with open(part, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fieldnames)
        writer.writerow({name: cell(name) for name in fieldnames})
        for row in rows:
            writer.writerow({k: v if isinstance(v, int) else cell(v) for k, v in row.items()})
    part.replace(path)
