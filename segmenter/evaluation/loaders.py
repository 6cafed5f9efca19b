"""Labelled segmentation data: Choi, Wiki-727K/Wiki-50, dialogue and JSONL files.

Every loader yields :class:`Document`: the reference units (sentences,
utterances) are the evaluation units; ``text`` joins them with ``"\\n"`` so each
unit is one line, and ``spans`` records where each unit sits in ``text``
(``[start, end)``, the newline excluded).  Documents built from a raw text with
character-offset boundaries (JSONL ``text`` form) keep that text and use
:func:`analysis.text.split_sentences` for their units instead.

Lines are read with CR, LF or CRLF endings; blank lines are ignored everywhere.
Errors name the file and, where there is one, the line.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from headseg.analysis.errors import InputError
from headseg.analysis.reading import AUTO_ENCODING, DEFAULT_MAX_BYTES, read_text

FORMATS = ("auto", "choi", "wiki", "dialogue", "jsonl")

CHOI_SEPARATOR = "=========="
_WIKI_HEADER = re.compile(r"^========,(\d+),(.*)$")
#: Files in a data directory that describe the data rather than hold it.
_SKIP_NAMES = re.compile(r"^(SOURCE|README|LICEN[CS]E)(\..*)?$", re.IGNORECASE)


@dataclass
class Document:
    """One labelled document.

    ``units`` the N reference units; ``boundaries`` the sorted unit indices in
    ``1..N-1`` that open a new segment; ``text`` the document text and
    ``spans [N]`` the ``(start, end)`` of each unit in it.
    """

    id: str
    units: list[str]
    boundaries: list[int]
    text: str = ""
    spans: list[tuple[int, int]] = field(default_factory=list)
    source: str = ""

    def __post_init__(self):
        if not self.units:
            raise InputError(f"{self.source or self.id}: document has no text units")
        n = len(self.units)
        b = sorted(set(int(x) for x in self.boundaries))
        if any(x < 1 or x >= n for x in b):
            raise InputError(f"{self.source or self.id}: boundary outside 1..{n - 1}")
        self.boundaries = b
        if not self.text:
            self.text, self.spans = join_units(self.units)
        if len(self.spans) != n:
            raise InputError(f"{self.source or self.id}: {len(self.spans)} unit spans for {n} units")

    @property
    def n(self) -> int:
        """The number of units."""
        return len(self.units)

    @property
    def num_segments(self) -> int:
        """The number of reference segments (boundaries + 1)."""
        return len(self.boundaries) + 1

    @property
    def starts(self) -> list[int]:
        """Character offset where each unit starts ``[N]``."""
        return [s for s, _ in self.spans]

    def fingerprint(self) -> str:
        """Identifies the text and the reference, so stale cached results are not reused."""
        h = hashlib.sha256(self.text.encode("utf-8"))
        h.update(json.dumps([self.spans, self.boundaries]).encode())
        return h.hexdigest()[:16]


def join_units(units: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """``"\\n".join(units)`` and each unit's span in it."""
    spans = []
    pos = 0
    for u in units:
        spans.append((pos, pos + len(u)))
        pos += len(u) + 1
    return "\n".join(units), spans


def snap_each(offsets: Sequence[int], starts: Sequence[int], text_len: int) -> list[int | None]:
    """Each character offset's nearest unit boundary, in the order given (None: the document's start or end).

    Candidates are every unit start (``starts[0] == 0``) and the end of the text; ties go to the
    earlier candidate.  Cost: O(log N) per offset.
    """
    n = len(starts)
    cands = list(starts) + [text_len]
    out: list[int | None] = []
    for c in offsets:
        c = int(c)
        i = bisect.bisect_left(cands, c)
        if i == 0:
            best = 0
        elif i >= len(cands):
            best = len(cands) - 1
        else:
            best = i if cands[i] - c < c - cands[i - 1] else i - 1
        out.append(best if 0 < best < n else None)
    return out


def snap_offsets(offsets: Sequence[int], starts: Sequence[int], text_len: int) -> list[int]:
    """Map character offsets to the nearest unit boundary (:func:`snap_each`).

    Offsets that snap to the start or the end of the document are dropped (they are not boundaries),
    duplicates merged; sorted.
    """
    return sorted({u for u in snap_each(offsets, starts, text_len) if u is not None})


def _lines(text: str) -> list[str]:
    # splitlines() would also break on \x0b, \x1c, U+2028 ...; these files only use CR/LF.
    return re.split(r"\r\n|\r|\n", text)


def _err(path: str, lineno: int | None, msg: str) -> InputError:
    return InputError(f"{path}:{lineno}: {msg}" if lineno else f"{path}: {msg}")


def parse_choi(text: str, path: str, doc_id: str | None = None) -> Document:
    """``==========`` lines open, separate and close segments; one unit per line."""
    units: list[str] = []
    boundaries: list[int] = []
    pending = False
    for lineno, raw in enumerate(_lines(text), 1):
        line = raw.strip()
        if not line:
            continue
        if line == CHOI_SEPARATOR:
            pending = True
            continue
        if _WIKI_HEADER.match(line):
            raise _err(path, lineno, "a Wiki-727K section header in a Choi file (use --format wiki)")
        if re.fullmatch(r"=+", line):
            raise _err(path, lineno, f"malformed separator ({len(line)} '=' instead of 10)")
        if pending and units:
            boundaries.append(len(units))
        pending = False
        units.append(line)
    if not units:
        raise _err(path, None, "no sentences (a Choi file has one sentence per line between '==========' lines)")
    return Document(id=doc_id or Path(path).stem, units=units, boundaries=boundaries, source=path)


def parse_wiki(text: str, path: str, max_level: int | None = None, doc_id: str | None = None) -> Document:
    """Koshorek et al.'s format: ``========,<level>,<title>.`` opens each section.

    A header deeper than ``max_level`` does not open a segment (its text stays in
    the enclosing section).  ``***LIST***`` placeholders are ordinary units.
    """
    units: list[str] = []
    boundaries: list[int] = []
    pending = False
    for lineno, raw in enumerate(_lines(text), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("========"):
            m = _WIKI_HEADER.match(line)
            if not m:
                raise _err(path, lineno, "malformed section header (expected '========,<level>,<title>.')")
            level = int(m.group(1))
            if level < 1:
                raise _err(path, lineno, f"section level {level} (levels start at 1)")
            if max_level is None or level <= max_level:
                pending = True
            continue
        if pending and units:
            boundaries.append(len(units))
        pending = False
        units.append(line)
    if not units:
        raise _err(path, None, "no text lines under the section headers")
    return Document(id=doc_id or Path(path).stem, units=units, boundaries=boundaries, source=path)


def parse_dialogues(text: str, path: str) -> list[Document]:
    """A ``call_id`` header line, then ``<label> <utterance>`` lines; a new header starts a new dialogue.

    A boundary is wherever the label differs from the previous utterance's.
    """
    docs: list[Document] = []
    current: tuple[str, list[str], list[str]] | None = None

    def flush():
        if current is None:
            return
        name, labels, utts = current
        if not utts:
            raise _err(path, None, f"dialogue '{name}' has no utterances")
        bounds = [i for i in range(1, len(labels)) if labels[i] != labels[i - 1]]
        docs.append(Document(id=name, units=utts, boundaries=bounds, source=path))

    for lineno, raw in enumerate(_lines(text), 1):
        line = raw.strip()
        if not line:
            continue
        parts = line.split(None, 1)
        if len(parts) == 1:
            if line.startswith("call_id") or current is None:
                flush()
                current = (line, [], [])
                continue
            raise _err(path, lineno, f"expected '<label> <utterance>', got the single word {line[:40]!r}")
        if current is None:
            raise _err(path, lineno, "expected a 'call_id' header line before the utterances")
        current[1].append(parts[0])
        current[2].append(parts[1])
    flush()
    if not docs:
        raise _err(path, None, "no dialogues")
    return docs


def _boundary_list(obj: dict, path: str, lineno: int, what: str) -> list[int]:
    """A record's ``boundaries``: integers, strictly increasing (a gold standard listing a boundary twice,
    or out of order, was not written as the format says: refused, not guessed at)."""
    b = obj.get("boundaries")
    if not isinstance(b, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in b):
        raise _err(path, lineno, f"'boundaries' must be a list of {what} (integers)")
    for prev, x in zip(b, b[1:]):
        if x <= prev:
            raise _err(path, lineno, f"'boundaries' must be strictly increasing ({x} after {prev})")
    return b


def _json_doc(obj, path: str, lineno: int) -> Document:
    if not isinstance(obj, dict):
        raise _err(path, lineno, "each line must be a JSON object")
    if "boundaries" in obj and "labels" in obj:
        raise _err(path, lineno, "both 'boundaries' and 'labels': give one of them")
    doc_id = str(obj.get("id", f"{Path(path).stem}:{lineno}"))
    if "sentences" in obj:
        sents = obj["sentences"]
        if not isinstance(sents, list) or not all(isinstance(s, str) for s in sents):
            raise _err(path, lineno, "'sentences' must be a list of strings")
        units = [" ".join(s.split()) for s in sents]
        if not all(units):
            raise _err(path, lineno, "empty or whitespace-only sentence")
        n = len(units)
        if "boundaries" in obj:
            b = _boundary_list(obj, path, lineno, "unit indices")
            bad = [x for x in b if x < 0 or x >= n]
            if bad:
                raise _err(path, lineno, f"boundary index {bad[0]} is outside 0..{n - 1}")
            # Index 0 would open the first segment, which always exists.
            bounds = [x for x in b if x > 0]
        elif "labels" in obj:
            lab = obj["labels"]
            if not isinstance(lab, list) or len(lab) != n or any(x not in (0, 1) for x in lab):
                raise _err(path, lineno, f"'labels' must be a 0/1 list with one entry per sentence ({n})")
            # labels[i] == 1: sentence i closes its segment (the last one always does).
            bounds = [i + 1 for i in range(n - 1) if lab[i] == 1]
        else:
            raise _err(path, lineno, "missing 'boundaries' (unit indices) or 'labels' (0/1 per sentence)")
        return Document(id=doc_id, units=units, boundaries=bounds, source=f"{path}:{lineno}")
    if "text" in obj:
        from headseg.analysis.text import split_sentences

        text = obj["text"]
        if not isinstance(text, str) or not text.strip():
            raise _err(path, lineno, "'text' must be a non-empty string")
        b = _boundary_list(obj, path, lineno, "character offsets")
        bad = [x for x in b if x < 0 or x > len(text)]
        if bad:
            raise _err(path, lineno, f"character offset {bad[0]} is outside the text (0..{len(text)})")
        spans = [(s, e) for s, e in split_sentences(text) if text[s:e].strip()]
        # A span's trailing whitespace is not part of the unit's text.
        spans = [(s, s + len(text[s:e].rstrip())) for s, e in spans]
        # Leading whitespace before the first unit would make starts[0] != 0.
        if spans and spans[0][0] != 0:
            spans[0] = (0, spans[0][1])
        units = [text[s:e].strip() for s, e in spans]
        starts = [s for s, _ in spans]
        bounds = snap_offsets(b, starts, len(text))
        return Document(id=doc_id, units=units, boundaries=bounds, text=text, spans=spans, source=f"{path}:{lineno}")
    raise _err(path, lineno, "a JSONL document needs 'sentences' or 'text'")


def parse_jsonl(text: str, path: str) -> list[Document]:
    """The documents of a JSONL text, one JSON object a line (blank lines skipped, ids unique)."""
    docs = []
    seen = set()
    for lineno, raw in enumerate(_lines(text), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _err(path, lineno, f"invalid JSON ({exc.msg} at column {exc.colno})") from None
        doc = _json_doc(obj, path, lineno)
        if doc.id in seen:
            raise _err(path, lineno, f"duplicate document id {doc.id!r}")
        seen.add(doc.id)
        docs.append(doc)
    if not docs:
        raise _err(path, None, "no documents")
    return docs


def detect_format(text: str, path: str) -> str:
    """Guess the format from the content (and a ``.jsonl`` / ``.json`` suffix)."""
    lines = [ln.strip() for ln in _lines(text) if ln.strip()]
    if path.endswith((".jsonl", ".json")) or (lines and lines[0].startswith("{")):
        return "jsonl"
    if any(_WIKI_HEADER.match(ln) for ln in lines[:50]):
        return "wiki"
    if any(ln == CHOI_SEPARATOR for ln in lines):
        return "choi"
    if lines and len(lines[0].split()) == 1 and len(lines) > 1:
        return "dialogue"
    raise InputError(f"{path}: cannot tell the format (no '==========' lines, Wiki headers, dialogue header or JSON); pass --format")


def load_file(
    path: str | os.PathLike,
    fmt: str = "auto",
    wiki_level: int | None = None,
    encoding: str = AUTO_ENCODING,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[Document]:
    """All documents in one file (Choi and Wiki files hold one; dialogue and JSONL files may hold many)."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format '{fmt}'; choose from {', '.join(FORMATS)}")
    p = str(path)
    text = read_text(p, encoding=encoding, max_bytes=max_bytes)
    if fmt == "auto":
        fmt = detect_format(text, p)
    if fmt == "choi":
        return [parse_choi(text, p)]
    if fmt == "wiki":
        return [parse_wiki(text, p, max_level=wiki_level)]
    if fmt == "dialogue":
        return parse_dialogues(text, p)
    return parse_jsonl(text, p)


def data_files(path: str | os.PathLike) -> list[Path]:
    """The data files under a directory (sorted, recursive; dot files and SOURCE/README skipped)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or directory")
    if p.is_file():
        return [p]
    files = [
        f
        for f in p.rglob("*")
        if f.is_file()
        and not any(part.startswith(".") for part in f.relative_to(p).parts)
        and not _SKIP_NAMES.match(f.name)
    ]
    if not files:
        raise InputError(f"{p}: no data files in this directory")
    return sorted(files, key=_natural_key)


def _natural_key(p: Path):
    # call_id_2 before call_id_10.
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(p))]


def iter_documents(
    path: str | os.PathLike,
    fmt: str = "auto",
    wiki_level: int | None = None,
    limit: int | None = None,
    encoding: str = AUTO_ENCODING,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Iterator[Document]:
    """Documents of a file or a directory, with ids relative to the directory; stops after ``limit``."""
    root = Path(path)
    count = 0
    seen: set[str] = set()
    for f in data_files(root):
        for doc in load_file(f, fmt, wiki_level=wiki_level, encoding=encoding, max_bytes=max_bytes):
            if root.is_dir():
                rel = f.relative_to(root).with_suffix("")
                base = str(rel).replace(os.sep, "/")
                # Files holding many documents: keep the document's own id too.
                doc.id = base if doc.id == f.stem else f"{base}#{doc.id}" if not base.endswith(doc.id) else base
            if doc.id in seen:
                raise InputError(f"{f}: duplicate document id {doc.id!r}")
            seen.add(doc.id)
            yield doc
            count += 1
            if limit is not None and count >= limit:
                return
