"""Every script in `experiments/` is imported by a test: each answers `--help`. A new file in the folder fails
here until it is listed."""
import pytest

from script_help import check_help, scripts_in

SCRIPTS = ["budget_calibration", "distill_records", "embedding_compare", "emotion_tutorial", "feature_based_ner",
           "finetune_records", "generation_infill", "glue_budget", "glue_parity_records", "hf_glue", "hf_pretrain_mlm",
           "kill_resume", "long_documents", "long_squad", "precision_quality", "question_generation", "recipe_race",
           "squad_retrieval"]


def test_every_file_of_the_folder_is_covered():
    assert scripts_in("experiments") == set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_imports_and_answers_help(name, capsys, monkeypatch):
    check_help("experiments", name, capsys, monkeypatch)
