"""`InferenceOptions` is checked once, where the library starts: each entry point of the verbs that run a saved model
refuses a value out of its field's range with a `SettingError` naming the setting, before any folder is read."""
from __future__ import annotations

import pytest

from bertforge.device import DeviceOptions
from bertforge.evaluation.evaluate import EvaluateSettings, evaluate
from bertforge.generation.runs import (FillMaskSettings, GenerateSettings, MaskedLMOptions, ScoreSettings, fill_masks,
                                       generate_samples, score_sentences)
from bertforge.serving.embed import EmbedSettings, embed
from bertforge.settings import SettingError
from bertforge.tasks.feature_extraction import FeaturesSettings, extract_features
from bertforge.tasks.inference_options import InferenceOptions
from bertforge.tasks.predict import PredictSettings, predict

MISSING_MODEL = "no-such-folder"  # reading it would fail otherwise: the settings are refused first

CASES = {
    "predict batch": (lambda: predict(PredictSettings(model=MISSING_MODEL, text=["a"],
                                                      inference=InferenceOptions(batch_size=0))),
                      "--batch-size must be positive, got 0"),
    "predict chars": (lambda: predict(PredictSettings(model=MISSING_MODEL, text=["a"],
                                                      inference=InferenceOptions(max_chars=10 ** 9))),
                      "--max-chars must be at most 100,000,000, got 1000000000"),
    "evaluate": (lambda: evaluate(EvaluateSettings(model=MISSING_MODEL, eval="dev.csv", max_eval_samples=0)),
                 "--max-eval-samples must be positive, got 0"),
    "evaluate device": (lambda: evaluate(EvaluateSettings(model=MISSING_MODEL, inference=InferenceOptions(
        device="tpu"))), "--device must be one of auto, cpu, cuda, got 'tpu'"),
    "embed": (lambda: embed(EmbedSettings(model=MISSING_MODEL, output="o.npy", text=["a"],
                                          inference=InferenceOptions(batch_size=70_000))),
              "--batch-size must be at most 65,536, got 70000"),
    "features": (lambda: extract_features(FeaturesSettings(model=MISSING_MODEL, output="o.safetensors", text=["a"],
                                                           max_seq_length=10 ** 6)),
                 "--max-seq-length must be at most 32,768, got 1000000"),
    "generate": (lambda: generate_samples(GenerateSettings(model=MISSING_MODEL, length=3, iterations=5000)),
                 "--iterations must be at most 1,000, got 5000"),
    "score": (lambda: score_sentences(ScoreSettings(model=MISSING_MODEL, text=["a"],
                                                    mlm=MaskedLMOptions(max_tokens=0))),
              "--max-tokens must be positive, got 0"),
    "fill-mask": (lambda: fill_masks(FillMaskSettings(model=MISSING_MODEL, sentences=["a [MASK]"], top_k=5000,
                                                      placement=DeviceOptions())),
                  "--top-k must be at most 1,000, got 5000"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_entry_point_refuses_a_setting_out_of_range_before_any_work(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written either
    call, message = CASES[case]
    with pytest.raises(SettingError) as refused:
        call()
    assert str(refused.value) == message
    assert not list(tmp_path.iterdir())


def test_cross_setting_checks_name_the_settings():
    with pytest.raises(SettingError, match=r"^--burn-in 10 must be below --iterations \(10\)$"):
        generate_samples(GenerateSettings(model=MISSING_MODEL, length=3, sampler="gibbs", burn_in=10))
    with pytest.raises(SettingError, match=r"^--split test picks a file of a --data folder; --eval dev.csv is"):
        evaluate(EvaluateSettings(model=MISSING_MODEL, eval="dev.csv", split="test"))
