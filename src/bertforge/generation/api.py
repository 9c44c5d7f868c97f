"""`generate(model, tokenizer, text=..., sampler=...)`: batches of samples from a masked LM, as dicts."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from bertforge.generation import samplers as S
from bertforge.generation.diffusion import mdlm_sample
from bertforge.generation.mlm import MaskedLM
from bertforge.generation.template import GenerationInputError, Template, build_template

DEFAULT_ITERATIONS = {"mask-predict": 10, "gibbs": 10, "mh": 10, "left-to-right": 0, "mdlm": 10}
DEFAULT_TEMPERATURE = {"mask-predict": 0.0, "gibbs": 1.0, "mh": 1.0, "left-to-right": 0.0, "mdlm": 1.0}


def sample_generator(seed: int, index: int) -> torch.Generator:
    """Sample `index` of a run with `seed` draws from its own stream, whatever batch it lands in."""
    return torch.Generator().manual_seed(seed * 1_000_003 + index)


def generate(model: Any, tokenizer: Any, text: str | None = None, *, span_lengths: Sequence[int] | None = None,
             length: int | None = None, prefix: str | None = None, sampler: str = "mask-predict",
             iterations: int | None = None, num_samples: int = 1, batch_size: int = 8, seed: int = 0,
             temperature: float | None = None, top_k: int = 0, burn_in: int = 0, parallel: bool = False,
             top_p: float = 1.0, max_tokens: int = 8192, precision: str = "auto",
             progress: Callable[[int | None], Any] | None = None) -> list[dict]:
    """Fill the masks of `text` (or generate `length` tokens after `prefix`) `num_samples` times.

    Each result: {"text", "spans" (the generated pieces, one string per span), "tokens" (generated tokens),
    "sampler", "seed", "sample"}; `mh` adds "acceptance_rate" and "energy". `iterations` is T for
    mask-predict, the number of sweeps over the targets for gibbs and mh and of reverse steps for mdlm
    (default 10); `temperature` defaults to 0 (greedy) for mask-predict and left-to-right and to 1 for gibbs,
    mh and mdlm; `top_p` (mdlm) cuts each draw to its nucleus. `precision` is
    `bertforge.device.Precision`'s ("auto": fp32 on CPU, bf16 on CUDA). `progress`, if given,
    is called once the input is checked, with the number of model calls (None when unknown), and returns a
    tqdm-like bar updated once per model call and closed at the end."""
    if sampler not in S.SAMPLERS:
        raise GenerationInputError(f"unknown sampler {sampler!r}; choose one of {', '.join(S.SAMPLERS)}")
    iterations = DEFAULT_ITERATIONS[sampler] if iterations is None else int(iterations)
    temperature = DEFAULT_TEMPERATURE[sampler] if temperature is None else float(temperature)
    _check(sampler, iterations, num_samples, batch_size, temperature, top_k, burn_in)
    if not 0.0 < top_p <= 1.0 or (top_p < 1.0 and sampler != "mdlm"):
        raise GenerationInputError(f"top_p must be in (0, 1] and below 1 only with the mdlm sampler, got {top_p}")
    mlm = MaskedLM(model, tokenizer, max_tokens=max_tokens, precision=precision)
    template = build_template(tokenizer, mlm.max_length, text=text, span_lengths=span_lengths, length=length,
                              prefix=prefix)
    bar = progress(model_calls(sampler, template, iterations, num_samples, batch_size)) if progress else None
    step = (lambda: bar.update(1)) if bar is not None else S._noop
    results: list[dict] = []
    for start in range(0, num_samples, batch_size):
        indices = list(range(start, min(start + batch_size, num_samples)))
        generators = [sample_generator(seed, i) for i in indices]
        ids = template.ids.repeat(len(indices), 1)
        if sampler == "mdlm":
            out = S.SamplerOutput(mdlm_sample(mlm, ids, template.targets, iterations, generators, temperature,
                                              top_k, top_p, step))
        else:
            out = _run(sampler, mlm, ids, template.targets, generators, iterations, temperature, top_k, burn_in,
                       parallel, step)
        for row, index in enumerate(indices):
            result = _describe(tokenizer, template, out.ids[row], sampler, seed, index)
            if out.extras:
                result.update(out.extras[row])
            results.append(result)
    if bar is not None:
        bar.close()
    return results


def model_calls(sampler: str, template: Template, iterations: int, num_samples: int, batch_size: int) -> int | None:
    """How many model calls a run makes (for a progress bar); None where it depends on the chain (mh)."""
    batches = -(-num_samples // batch_size)
    n = template.targets.numel()
    if sampler == "mask-predict":
        per_batch = 1 + sum(1 for t in range(1, iterations) if n * (iterations - t) // iterations > 0)
    elif sampler == "left-to-right":
        per_batch = n
    elif sampler == "gibbs":
        per_batch = iterations * n
    else:
        return None  # mh depends on the chain; mdlm skips the steps that reveal nothing
    return batches * per_batch


def _check(sampler: str, iterations: int, num_samples: int, batch_size: int, temperature: float, top_k: int,
           burn_in: int) -> None:
    if sampler != "left-to-right" and iterations < 1:
        raise GenerationInputError(f"iterations must be at least 1 for {sampler}, got {iterations}")
    if num_samples < 1 or batch_size < 1:
        raise GenerationInputError(f"num_samples and batch_size must be at least 1, got {num_samples} and "
                                   f"{batch_size}")
    if temperature < 0 or (sampler in ("gibbs", "mh") and temperature == 0):
        raise GenerationInputError(f"temperature must be {'above' if sampler in ('gibbs', 'mh') else 'at least'}"
                                   f" 0 for {sampler}, got {temperature}")
    if top_k < 0:
        raise GenerationInputError(f"top_k must be 0 (no cut) or more, got {top_k}")
    if burn_in < 0 or (sampler == "gibbs" and burn_in >= iterations):
        raise GenerationInputError(f"burn_in must be from 0 to iterations - 1 ({iterations - 1}), got {burn_in}")


def _run(sampler: str, mlm: MaskedLM, ids: torch.Tensor, targets: torch.Tensor, generators: list,
         iterations: int, temperature: float, top_k: int, burn_in: int, parallel: bool, step) -> S.SamplerOutput:
    if sampler == "mask-predict":
        return S.mask_predict(mlm, ids, targets, iterations, generators, temperature, top_k, step=step)
    if sampler == "gibbs":
        return S.gibbs(mlm, ids, targets, iterations, generators, temperature, top_k, burn_in, parallel, step=step)
    if sampler == "mh":
        return S.metropolis_hastings(mlm, ids, targets, iterations, generators, temperature, top_k, step=step)
    return S.left_to_right(mlm, ids, targets, generators, temperature, top_k, step=step)


def _describe(tokenizer: Any, template: Template, ids: torch.Tensor, sampler: str, seed: int, index: int) -> dict:
    values = ids.tolist()
    return {"text": tokenizer.decode(values, skip_special_tokens=True).strip(),
            "spans": [tokenizer.decode([values[p] for p in span]).strip() for span in template.spans],
            "tokens": tokenizer.convert_ids_to_tokens([values[p] for p in template.targets.tolist()]),
            "sampler": sampler, "seed": seed, "sample": index}
