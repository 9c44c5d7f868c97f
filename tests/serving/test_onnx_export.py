"""export's int8 guard cannot be switched off by a NaN: a --max-drop that is not a finite number of points is
refused before any work, an undefined metric on the calibration file is refused, and onnx.json never holds a bare
NaN (which is not JSON). Fast: no graph is traced."""
from __future__ import annotations

import json
import math

import pytest

from bertforge.serving import int8_price, onnx_export
from bertforge.settings import SettingError


@pytest.mark.parametrize("max_drop", [math.nan, math.inf, -math.inf])
def test_a_max_drop_that_is_no_finite_number_is_refused_before_work(tiny_model, tmp_path, max_drop):
    data = tmp_path / "dev.csv"
    data.write_text("text,label\na,0\nb,1\n")
    out = tmp_path / "out"
    with pytest.raises(SettingError, match=r"^--max-drop must be a finite number of points; got "):
        onnx_export.export_onnx(tiny_model, out, quantize="int8", calibrate_on=data, max_drop=max_drop)
    assert not out.exists()  # refused before the folder was made, let alone a graph traced


@pytest.mark.parametrize("fp32, int8", [(math.nan, 80.0), (80.0, math.nan), (math.nan, math.nan)])
def test_an_undefined_metric_is_refused_even_with_force(tmp_path, monkeypatch, fp32, int8):
    """Spearman of constant scores is NaN: `drop > max_drop` would be False and let any int8 graph through."""
    price = int8_price.Int8Price("spearman", fp32, int8, 10, 0.01, 0.005, "dev.csv")
    monkeypatch.setattr(int8_price, "price_int8", lambda *args: price)
    for force in (False, True):
        with pytest.raises(SettingError, match=r"--calibrate-on dev.csv: the spearman is undefined on it"):
            onnx_export._checked_price(tmp_path, tmp_path / "fp32.onnx", "dev.csv", 1.0, force)


def test_the_guard_still_refuses_a_real_drop_and_keeps_a_small_one(tmp_path, monkeypatch):
    price = int8_price.Int8Price("accuracy", 90.0, 85.0, 10, 0.01, 0.005, "dev.csv")
    monkeypatch.setattr(int8_price, "price_int8", lambda *args: price)
    with pytest.raises(int8_price.Int8TooCostly, match="loses more than --max-drop 1"):
        onnx_export._checked_price(tmp_path, tmp_path / "fp32.onnx", "dev.csv", 1.0, False)
    kept = onnx_export._checked_price(tmp_path, tmp_path / "fp32.onnx", "dev.csv", 6.0, False)
    assert kept["drop"] == pytest.approx(5.0) and kept["forced"] is False


def test_onnx_json_never_holds_a_bare_nan(tmp_path):
    onnx_export.write_info(tmp_path, {"opset": 17, "int8_price": {"fp32": 80.0}})
    assert json.loads((tmp_path / "onnx.json").read_text()) == {"opset": 17, "int8_price": {"fp32": 80.0}}
    with pytest.raises(ValueError, match="not JSON compliant"):
        onnx_export.write_info(tmp_path, {"int8_price": {"fp32": math.nan}})
