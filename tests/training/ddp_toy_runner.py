"""One rank of a 2-process `torchrun` run of the engine on the toy stage (test_engine.py), recording the gradient
the optimizer is handed at the first step:

    python -m torch.distributed.run --nproc_per_node 2 ddp_toy_runner.py OUT

writes the run to OUT/run and each rank's optimizer input to OUT/optimizer-input-rank{R}.safetensors.
"""
import math
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # test_engine, and the needs.py it imports

from safetensors.torch import save_file  # noqa: E402

from test_engine import ToyStage, optimizer_inputs, run  # noqa: E402

if __name__ == "__main__":
    out = Path(sys.argv[1])
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    stage = ToyStage(rows=2, rank=rank, world_size=world_size)
    with optimizer_inputs() as steps:
        run(stage, out / "run", grad_accum=2, max_steps=1, max_grad_norm=math.inf)
    by_name = {name: steps[0][id(p)].contiguous() for name, p in stage.model.named_parameters()}
    save_file(by_name, str(out / f"optimizer-input-rank{rank}.safetensors"))
