"""Every name `bertforge` exports resolves (the lazy ones too), so `from bertforge import X` never breaks."""
import bertforge


def test_every_public_name_resolves():
    missing = [name for name in bertforge.__all__ if getattr(bertforge, name, None) is None]
    assert missing == []
