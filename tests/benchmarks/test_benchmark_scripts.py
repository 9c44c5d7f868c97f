"""Every script in `benchmarks/` is imported by a test: each answers `--help`; the helper modules have their own
tests. A new file in the folder fails here until it is listed."""
import pytest

from script_help import check_help, scripts_in

SCRIPTS = ["bench_allocator", "bench_compile", "bench_data", "bench_embedding_train", "bench_finetune",
           "bench_glue_cost", "bench_inference", "bench_int8", "bench_long_attention", "bench_longformer",
           "bench_model", "bench_modern", "bench_onnx", "bench_pll", "bench_plm", "bench_precision",
           "bench_prepare", "bench_pretrain", "bench_serve", "bench_short_windows", "bench_step_parts", "bench_tokenizer",
           "bench_trees"]
# helper modules (no command line), with the tests that import them
HELPERS = {"common": "tests/benchmarks/test_bench_fairness.py", "hostile_clients": "tests/serving/test_hostile.py"}


def test_every_file_of_the_folder_is_covered():
    assert scripts_in("benchmarks") == set(SCRIPTS) | set(HELPERS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_imports_and_answers_help(name, capsys, monkeypatch):
    check_help("benchmarks", name, capsys, monkeypatch)
