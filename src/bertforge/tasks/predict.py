"""`predict`: a predictor folder run on a file of inputs (and texts given as such), one record per input, in
input order, as `bertforge predict` does. `PredictSettings` says everything one such run takes (its flags are
derived from it); `predict(settings)` checks them and runs."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TextIO

from bertforge.settings import SettingError, check_settings, part, setting
from bertforge.tasks.inference_options import InferenceOptions, text_setting
from bertforge.tasks.long_inputs import LongInputOptions

__all__ = ["PredictSettings", "predict"]


@dataclass
class PredictSettings:
    """A prediction run: the predictor folder, the inputs, where the records go, how the model runs and how it
    reads inputs longer than it takes."""

    model: str = setting(help="predictor folder (has task.json)", metavar="DIR")
    input: str | None = setting(None, "input file ('-' = stdin, read as .txt lines)", metavar="FILE|-")
    text: list[str] | None = text_setting("inputs given on the command line, as .txt lines")
    text_column: str | None = setting(None, "column/key holding the text (default: text, sentence, ...)", metavar="C")
    text_pair_column: str | None = setting(None, "column/key holding the second text of a pair", metavar="C2")
    output: str | None = setting(None, "write records here (.csv for CSV, else JSON lines)", metavar="FILE")
    overwrite: bool = setting(False, "replace --output if it exists")
    inference: InferenceOptions = part(InferenceOptions, InferenceOptions, title="inference")
    long: LongInputOptions = part(LongInputOptions, LongInputOptions, title="long inputs")


def predict(settings: PredictSettings, stdout: TextIO | None = None, progress: bool = False):
    """Run `settings`: the records go to `settings.output` (written atomically) or, without one, as JSON lines to
    `stdout` (default: standard output). Returns the `Predictor`, whose `timing` says how long it took."""
    from bertforge.atomic import atomic_path
    from bertforge.outputs import claim_output_file
    from bertforge.tasks.prediction_io import output_format, parse_lines, read_inputs, write_records
    from bertforge.tasks.predictor import Predictor
    check_settings(settings)
    s, run = settings, settings.inference
    if not s.text and not s.input:
        raise SettingError("nothing to predict: give {input} FILE or {text}", owner=PredictSettings)
    if s.output:
        claim_output_file(s.output, overwrite=s.overwrite, inputs=(s.input,))
    predictor = Predictor.load(s.model, run.device, run.precision, max_chars=run.max_chars,
                               max_batch_tokens=run.max_batch_tokens, long_inputs=s.long)
    inputs = parse_lines(s.text or [], predictor.head, "--text")
    if s.input:
        inputs += read_inputs(s.input, predictor.head, text_column=s.text_column,
                              text_pair_column=s.text_pair_column)
    if not inputs:
        raise ValueError(f"{s.input}: no inputs (the file has no non-blank lines or rows)")
    records = predictor.predict(inputs, batch_size=run.batch_size, progress=progress)
    if s.output:
        with atomic_path(s.output) as tmp, open(tmp, "w", encoding="utf-8", newline="") as handle:
            write_records(records, handle, output_format(s.output))
    else:
        write_records(records, stdout or sys.stdout)
    return predictor
