"""Imported once by the server that forks the GLUE worker processes, so that each worker starts with what every
run loads anyway already loaded: torch with its optimizers (whose first use imports torch._dynamo), the
fine-tuning code, the metrics (scipy, scikit-learn) and matplotlib with its fonts (every run draws its curves)."""
import io

import matplotlib

matplotlib.use("Agg")  # before pyplot: workers draw into files only

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

import bertforge.evaluation.units  # noqa: E402,F401
import bertforge.tasks.finetune  # noqa: E402,F401
import bertforge.tasks.predictor  # noqa: E402,F401
from bertforge.lifeline import killed_with_parent  # noqa: E402

# The fork server ends with the suite's process, killed or not (it would otherwise outlive it by the seconds its
# interpreter takes to tear torch down); its workers end with it (`lifeline.die_with_parent`).
killed_with_parent()


def _warm_up() -> None:
    """Build an AdamW and draw a figure once: the lazy imports and font loading they trigger then happen here,
    not in every worker. Neither starts a thread, so forking afterwards stays safe."""
    torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    figure, axes = plt.subplots()
    axes.plot([0, 1], [0, 1], label="x")
    axes.set_title("warm-up")
    axes.legend()
    figure.savefig(io.BytesIO(), format="png")
    plt.close(figure)


_warm_up()
