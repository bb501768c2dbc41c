"""The catalogue of the real graphs in the shared datasets folder, by short name.

The files are not part of the package: they are looked up in ``$GRAIL_DUCKDB_DATASETS``, else
in the first existing of ``<repo>/../shared/datasets``, ``<cwd>/../shared/datasets`` and
``<cwd>/shared/datasets``. Tests and examples skip when none exists.

>>> list(DATASETS)[:3]
['citeseer', 'uniprot', 'agrocyc']
>>> DATASETS["cora"].reverse
True
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from grail_duckdb.errors import GrailError
from grail_duckdb.tools.readers import read_edges

__all__ = ["Dataset", "DATASETS", "ENV_VAR", "available", "datasets_dir", "load_dataset",
           "DatasetError"]

ENV_VAR = "GRAIL_DUCKDB_DATASETS"


class DatasetError(GrailError, LookupError):
    """A named dataset is unknown, or its file is not in the datasets folder."""


@dataclass(frozen=True)
class Dataset:
    """One graph file: where it lies under the datasets folder and how to read it.

    ``vertices`` and ``edges`` are the counts of the folder's README (edge rows as written,
    duplicates included); ``vertices`` is None where the README gives no exact count.
    """

    name: str
    path: str
    fmt: str | None = None
    reverse: bool = False
    vertices: int | None = None
    edges: int | None = None
    note: str = ""

    def file(self, root: Path | None = None) -> Path | None:
        """The file's path under ``root`` (default: :func:`datasets_dir`), or None."""
        root = root if root is not None else datasets_dir()
        return None if root is None else root / self.path


def _grail(name: str, stem: str | None = None, vertices=None, edges=None, note="") -> Dataset:
    return Dataset(name, f"grail/{stem or name}.gra.gz", "gra", False, vertices, edges, note)


#: every graph of the datasets folder; counts from its README
DATASETS: dict[str, Dataset] = {d.name: d for d in [
    _grail("citeseer", "citeseer.scc", 693_947, 312_282, "SCC-condensed citation graph"),
    _grail("uniprot", "uniprotenc_22m.scc", 1_595_444, 1_595_442, "a forest; one hub"),
    *(_grail(stem, note="small sparse GRAIL graph") for stem in (
        "agrocyc", "amaze", "anthra", "ecoo", "human", "kegg", "mtbrv", "nasa", "vchocyc",
        "xmark")),
    Dataset("cit-HepTh", "snap/cit-HepTh.tsv.gz", "tsv", False, 27_770, 352_807,
            "arXiv hep-th citations, citing -> cited; cycles and self-loops"),
    Dataset("p2p-Gnutella31", "snap/p2p-Gnutella31.txt.gz", "snap", False, 62_586, 147_892,
            "Gnutella peer-to-peer network"),
    Dataset("Wiki-Vote", "snap/Wiki-Vote.txt.gz", "snap", False, 7_115, 103_689,
            "Wikipedia adminship votes; sparse ids"),
    Dataset("cora", "snap/cora.cites.gz", "snap", True, 2_708, 5_429,
            "Cora citations; the file lists 'cited citing', read reversed"),
]}

#: other names accepted by :func:`load_dataset` (the GRAIL files' stems)
ALIASES = {"citeseer.scc": "citeseer", "uniprotenc_22m.scc": "uniprot",
           "uniprotenc_22m": "uniprot", "cora.cites": "cora"}


def candidate_dirs() -> list[Path]:
    """The folders searched for the datasets, in order."""
    env = os.environ.get(ENV_VAR)
    if env:
        return [Path(env)]
    repo = Path(__file__).resolve().parents[2]
    cwd = Path.cwd()
    return [repo.parent / "shared" / "datasets", cwd.parent / "shared" / "datasets",
            cwd / "shared" / "datasets"]


def datasets_dir() -> Path | None:
    """The datasets folder, or None where there is none (``$GRAIL_DUCKDB_DATASETS`` first)."""
    for folder in candidate_dirs():
        if folder.is_dir():
            return folder
    return None


def available() -> list[str]:
    """Names of the catalogued datasets whose file is present."""
    root = datasets_dir()
    if root is None:
        return []
    return [name for name, d in DATASETS.items() if d.file(root).is_file()]


def lookup(name: str) -> Dataset:
    """The catalogue entry of a name or alias (case-insensitive)."""
    key = ALIASES.get(name, name)
    if key in DATASETS:
        return DATASETS[key]
    folded = {n.lower(): d for n, d in DATASETS.items()}
    folded.update({a.lower(): DATASETS[n] for a, n in ALIASES.items()})
    if name.lower() in folded:
        return folded[name.lower()]
    raise DatasetError(f"unknown dataset {name!r}; the catalogue holds {', '.join(DATASETS)}")


def load_dataset(name: str) -> pa.Table:
    """Read a catalogued graph as an edge Table (``src``, ``dst``; see :func:`read_edges`).

    Raises
    ------
    DatasetError
        The name is unknown, or the datasets folder or the file is missing; the message names
        the available datasets and the folders searched.
    """
    spec = lookup(name)
    root = datasets_dir()
    path = spec.file(root) if root is not None else None
    if path is None or not path.is_file():
        searched = ", ".join(str(p) for p in candidate_dirs())
        raise DatasetError(
            f"dataset {spec.name!r} ({spec.path}) is not available: searched {searched}; "
            f"available here: {', '.join(available()) or 'none'}; set {ENV_VAR} to the "
            "datasets folder"
        )
    return read_edges(path, fmt=spec.fmt, reverse=spec.reverse)
