"""The papers' ablation tables, as data: which pre-training runs each table compares.

A `Variant` is one row: the `bertforge pretrain` options that differ from the table's common settings,
plus config overrides (ALBERT's embedding size and sharing). Every row of a table gets the same wall-clock
budget, the same data and the same fine-tuning, so differences come from the one thing the row changes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bertforge.tasks.glue_tasks import GLUE


@dataclass(frozen=True)
class Variant:
    name: str
    options: dict[str, Any] = field(default_factory=dict)   # PretrainConfig fields (objective, masking, model...)
    config: dict[str, Any] = field(default_factory=dict)    # config overrides (embedding_size, layer_sharing...)
    kind: str = "pretrain"                                   # "pretrain", or "distill" (student of a teacher row)
    teacher: str | None = None                               # for kind == "distill": the row it learns from


@dataclass(frozen=True)
class Table:
    name: str
    title: str
    paper: str
    variants: tuple[Variant, ...]
    model: str = "tiny"      # the size every row uses unless it says otherwise
    expectation: str = ""    # what the paper found, to compare against


TABLES: dict[str, Table] = {t.name: t for t in (
    Table("bert-objectives", "Pre-training tasks", "BERT Table 5", (
        Variant("MLM + NSP", {"objective": "mlm+nsp"}),
        Variant("MLM, no NSP", {"objective": "mlm"}),
        Variant("LTR, no NSP", {"objective": "ltr"}),
    ), expectation="Removing NSP hurts QNLI/MNLI/SQuAD slightly; LTR is clearly worse than MLM (esp. MRPC, SQuAD)."),
    Table("bert-sizes", "Model size", "BERT Table 6", (
        Variant("tiny (L=2, H=128)", {"model": "tiny"}),
        Variant("mini (L=4, H=256)", {"model": "mini"}),
        Variant("small (L=4, H=512)", {"model": "small"}),
    ), expectation="Larger models give lower MLM perplexity and better fine-tuning accuracy, even on small tasks."),
    Table("roberta-masking", "Static vs dynamic masking", "RoBERTa Table 1", (
        Variant("static, one mask per sequence", {"masking": "static", "dupe_factor": 1}),
        Variant("static, dupe factor 10 (BERT)", {"masking": "static", "dupe_factor": 10}),
        Variant("dynamic (RoBERTa)", {"masking": "dynamic"}),
    ), expectation="Dynamic masking is comparable to or slightly better than static (RoBERTa Table 1: SQuAD 2.0 "
                   "78.3 static vs 78.7 dynamic, SST-2 92.5 vs 92.9). Differences need many epochs to show: run "
                   "it on a corpus small enough to be seen many times."),
    Table("roberta-inputs", "Input format and NSP", "RoBERTa Table 2", (
        Variant("SEGMENT-PAIR + NSP", {"objective": "mlm+nsp"}),
        Variant("FULL-SENTENCES", {"objective": "mlm", "packing": "full-sentences"}),
        Variant("DOC-SENTENCES", {"objective": "mlm", "packing": "doc-sentences"}),
    ), expectation="Without NSP, FULL-/DOC-SENTENCES match or beat SEGMENT-PAIR+NSP; DOC slightly best."),
    Table("albert-embedding", "Factorized embedding size E (all-shared)", "ALBERT Table 3", (
        Variant("E = 64", config={"embedding_size": 64}),
        Variant("E = 128", config={"embedding_size": 128}),
        Variant("E = 256", config={"embedding_size": 256}),
    ), model="albert-mini", expectation="With all-shared parameters, E = 128 is best; E matters little overall."),
    Table("albert-sharing", "Cross-layer parameter sharing", "ALBERT Table 4", (
        Variant("all-shared", config={"layer_sharing": "all"}),
        Variant("shared-attention", config={"layer_sharing": "attention"}),
        Variant("shared-FFN", config={"layer_sharing": "ffn"}),
        Variant("not-shared", config={"layer_sharing": "none"}),
    ), model="albert-mini", expectation="Sharing FFN costs most; sharing attention costs little; not-shared is best "
                                         "at many more parameters."),
    Table("albert-sop", "Sentence-prediction task: none vs NSP vs SOP", "ALBERT Table 5", (
        Variant("none", {"objective": "mlm"}),
        Variant("NSP", {"objective": "mlm+nsp"}),
        Variant("SOP", {"objective": "mlm+sop"}),
    ), model="albert-mini", expectation="NSP cannot solve SOP (~52%); SOP solves NSP reasonably (~78%) and helps "
                                        "downstream."),
    Table("distilbert", "Knowledge distillation", "DistilBERT section 4", (
        Variant("teacher (L=4)", {"model": "mini", "objective": "mlm"}),
        Variant("student, distilled (L=2)", kind="distill", teacher="teacher (L=4)"),
        Variant("student, no distillation (L=2)", {"model": "distilbert-mini", "objective": "mlm"},
                config={"num_hidden_layers": 2}),
    ), expectation="The distilled student keeps ~97% of the teacher's score; the same student trained alone "
                   "does worse."),
    Table("xlnet-plm", "Permutation LM against MLM at equal budget", "XLNet section 2.3 (K = 6, 7)", (
        Variant("MLM (BERT)", {"objective": "mlm"}),
        Variant("PLM, K = 6", {"objective": "plm", "plm_k": 6}),
        Variant("PLM, K = 7", {"objective": "plm", "plm_k": 7}),
    ), model="mini", expectation="XLNet-base (K = 6 and 7) beats BERT-base at equal data on GLUE and SQuAD; each "
                                 "row's held-out perplexity is its own objective's (MLM, or PLM over the last 1/K "
                                 "of each order), so only the GLUE columns compare across rows."),
)}


def slug(name: str) -> str:
    """A row's name as its folder and record name ("PLM, K = 6" -> plm-k-6)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


# what a row can report: (key in row.json, column heading, format), in the tables' column order
COLUMNS = (("parameters", "params", "{:,}"), ("perplexity", "held-out MLM ppl", "{:.1f}"),
           ("mlm_acc", "MLM acc", "{:.3f}"), ("ltr_perplexity", "held-out LTR ppl", "{:.1f}"),
           ("nsp_acc", "NSP acc", "{:.3f}"), ("sop_acc", "SOP acc", "{:.3f}"),
           ("sst2_accuracy", "SST-2 dev acc", "{:.3f}"), ("mrpc_accuracy", "MRPC dev acc", "{:.3f}"),
           ("mrpc_f1", "MRPC dev F1", "{:.3f}"), ("plm_perplexity", "held-out PLM ppl", "{:.1f}"),
           ("plm_acc", "PLM acc", "{:.3f}"),
           *((f"glue_{task}", f"{row.display} (GLUE)", "{:.1f}") for task, row in GLUE.items()),
           ("glue_average", "GLUE avg", "{:.1f}"))
