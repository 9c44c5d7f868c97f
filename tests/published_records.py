"""The check every `--records` writer's test makes: what a script wrote is the published group, record for record."""
from __future__ import annotations

from pathlib import Path


def assert_published(folder: Path, *prefixes: str) -> dict:
    """The records written to `folder` (by id), after asserting they are exactly the published records whose ids
    start with one of `prefixes`, each with the published description, unit and digits."""
    from bertforge.results_store import read_store
    written = read_store(folder).records
    published = {rid: r for rid, r in read_store().records.items() if rid.startswith(prefixes)}
    assert set(written) == set(published)
    for rid, record in written.items():
        want = published[rid]
        assert (record.what, record.unit, record.digits) == (want.what, want.unit, want.digits), rid
    return written
