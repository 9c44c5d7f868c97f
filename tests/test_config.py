"""BertConfig's size fields: each has an upper bound, named in one line when a config.json goes past it."""
from __future__ import annotations

import json

import pytest

from bertforge.config import MAX_SIZES, BertConfig, ConfigError, read_config_json
from bertforge.folder_files import FolderFileError
from bertforge.model.distilbert import DistilBertConfig

# a valid config of every size field's own bound needs the others consistent with it
AT_BOUND = {"hidden_size": dict(num_attention_heads=1), "num_attention_heads": dict(hidden_size=1024),
            "relative_attention_max_distance": dict(relative_attention_num_buckets=32),
            "relative_attention_num_buckets": dict(relative_attention_max_distance=1 << 20)}


@pytest.mark.parametrize("name", sorted(MAX_SIZES))
def test_each_size_field_is_bounded(name):
    bound = MAX_SIZES[name]
    assert getattr(BertConfig(**{name: bound}, **AT_BOUND.get(name, {})), name) == bound  # the bound itself is fine
    with pytest.raises(ConfigError) as err:
        BertConfig(**{name: bound + 1}, **AT_BOUND.get(name, {}))
    assert f"'{name}' is {bound + 1:,}; bertforge accepts at most {bound:,}" in str(err.value)


def test_a_family_names_the_field_as_its_config_json_does(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "distilbert", "n_layers": 10 ** 6}))
    with pytest.raises(ConfigError, match=r"config.json: config field 'n_layers' is 1,000,000; .* at most 512"):
        DistilBertConfig.from_json_file(path)


def test_config_json_is_read_as_a_file_of_its_folder(tmp_path_factory):
    folder, outside = tmp_path_factory.mktemp("model"), tmp_path_factory.mktemp("outside")
    (outside / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (folder / "config.json").symlink_to(outside / "config.json")
    with pytest.raises(FolderFileError, match="outside the folder"):
        BertConfig.from_pretrained(folder)
    (folder / "config.json").unlink()
    (folder / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError, match="config.json: (JSON nested too deeply|expected a JSON object)"):
        read_config_json(folder / "config.json")
