"""Process-group helpers, so the training loop reads the same with one process or many under `torchrun`.

`torchrun` sets RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT; without them we run as a single
process and every helper here is a no-op. CPU uses gloo, CUDA uses nccl (one GPU per local rank).

Joining is bounded and restartable. Every wait (reaching the store at MASTER_ADDR:MASTER_PORT, the other ranks
joining, any collective) ends after `timeout` seconds (`--dist-timeout`) with a `DistributedError` naming the
rank and what it waited for. Under torchrun the workers share the launcher's store, which outlives each worker
group: an elastic restart (`--max-restarts`) would find the keys of the group that died there (gloo's peer
addresses under the same names) and dial dead ports. So each group works under a namespace of its own, a token
drawn by its rank 0; the other ranks learn it by a handshake that a dead rank 0 cannot answer (`_fresh_namespace`).
"""
from __future__ import annotations

import os
import re
import socket
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable

import torch
import torch.distributed as dist

from bertforge.device import resolve_device
from bertforge.settings import SettingError
from bertforge.training.options import DIST_TIMEOUT

DEFAULT_TIMEOUT = DIST_TIMEOUT  # seconds; --dist-timeout
_POLL = 0.02             # seconds between looks at the store while joining
_LEADER = "bertforge/leader"


class DistributedError(SettingError, RuntimeError):
    """The process group could not form in time, or lost a member: the message names the rank, the cause and the
    setting that gives the processes longer (`{dist_timeout}`, shown as the verb's flag)."""


def _timed_out(what: str, info: DistInfo, cause: str | None = None) -> DistributedError:
    """`what` did not happen within the group's timeout (the rank, the seconds and the setting named)."""
    return DistributedError("{who}{what} within {seconds:g} s ({dist_timeout})" + (": {cause}" if cause else ""),
                            who=info.who, what=what, seconds=info.timeout, cause=cause)


class FailedOnRankZero(RuntimeError):
    """Raised on ranks other than 0 for an error rank 0 reports for the whole group (printed once, by rank 0)."""


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    timeout: float = DEFAULT_TIMEOUT
    owns_group: bool = False  # this process group was joined here (and is left here)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def who(self) -> str:
        return f"rank {self.rank} of {self.world_size}"


def init_distributed(device: str = "auto", timeout: float = DEFAULT_TIMEOUT) -> DistInfo:
    """Join the process group if launched by torchrun (or already joined); else a single-process DistInfo.
    Every wait while joining, and every collective after, gives up after `timeout` seconds."""
    if not timeout > 0:
        raise SettingError("{dist_timeout} must be positive, got {got}", got=timeout)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    joined = dist.is_available() and dist.is_initialized()
    if joined:
        world_size, rank = dist.get_world_size(), dist.get_rank()
    dev = resolve_device(device, local_rank)
    info = DistInfo(rank=rank, world_size=world_size, local_rank=local_rank, device=dev, timeout=timeout)
    if world_size > 1 and not joined:
        store = _group_store(info)
        try:
            dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo", store=store, rank=rank,
                                    world_size=world_size, timeout=timedelta(seconds=timeout))
        except RuntimeError as err:  # DistError, or gloo's own RuntimeError when the mesh does not connect
            raise _timed_out(" could not connect to the other processes", info, _first_line(err)) from None
        info.owns_group = True
    return info


def cleanup(info: DistInfo) -> None:
    """Leave the process group this process joined (a group the caller made stays)."""
    if info.enabled and info.owns_group and dist.is_initialized():
        dist.destroy_process_group()


def lost_contact(err: BaseException, info: DistInfo) -> DistributedError | None:
    """What a collective's failure means for the user (another rank died or hangs), or None if `err` is not one."""
    if not info.enabled or not isinstance(err, RuntimeError) or isinstance(err, (DistributedError, FailedOnRankZero)):
        return None
    text = str(err)
    if not isinstance(err, dist.DistError) and not any(s in text for s in ("gloo", "Connection reset", "NCCL")):
        return None
    return DistributedError("{who} lost contact with the other processes: one of them stopped, or did not answer "
                            "within {seconds:g} s ({dist_timeout}) ({cause})", who=info.who, seconds=info.timeout,
                            cause=_first_line(err))


# ---- joining -----------------------------------------------------------------------------------------------------
def _group_store(info: DistInfo) -> dist.Store:
    """The store the group forms in: a namespace of torchrun's own store, or one rank 0 serves itself (a launch
    by environment variables alone, or torchrun with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1)."""
    addr, port = _master()
    deadline = time.monotonic() + info.timeout
    shared = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    serves = info.rank == 0 and not shared
    if not serves:
        _wait_reachable(addr, port, deadline, info)
    try:
        store = dist.TCPStore(addr, port, info.world_size, serves, timeout=timedelta(seconds=info.timeout),
                              multi_tenant=True)
    except dist.DistError as err:
        what = ": the other processes did not all join" if serves else " cannot reach the rendezvous"
        raise _timed_out(f"{what} at {addr}:{port} (MASTER_ADDR:MASTER_PORT)", info, _first_line(err)) from None
    return _fresh_namespace(store, info, deadline, f"{addr}:{port}") if shared else store


def _fresh_namespace(store: dist.Store, info: DistInfo, deadline: float, where: str) -> dist.Store:
    """A namespace no earlier group used. Rank 0 draws a token and publishes it; each other rank answers the
    token it finds with a nonce of its own and waits for rank 0 to echo that nonce. A token left by a rank 0
    that died is never echoed, so a rank that read it simply reads again until this group's token is there."""
    if info.rank == 0:
        token = uuid.uuid4().hex
        store.set(_LEADER, token)
        for rank in range(1, info.world_size):
            ping = f"bertforge/{token}/ping/{rank}"
            _poll(lambda: store.check([ping]), deadline,
                  lambda: _timed_out(f": rank {rank} did not join the group at {where}", info))
            store.set(f"bertforge/{token}/welcome/{store.get(ping).decode()}", "1")
        return dist.PrefixStore(f"bertforge/{token}/", store)
    nonce, token = uuid.uuid4().hex, None

    def welcomed() -> bool:
        nonlocal token
        if not store.check([_LEADER]):
            return False
        leader = store.get(_LEADER).decode()
        if leader != token:  # a newer rank 0 (or the first one seen): answer it
            token = leader
            store.set(f"bertforge/{token}/ping/{info.rank}", nonce)
        return store.check([f"bertforge/{token}/welcome/{nonce}"])

    _poll(welcomed, deadline, lambda: _timed_out(f": rank 0 did not open the group at {where}", info))
    return dist.PrefixStore(f"bertforge/{token}/", store)


def _poll(done: Callable[[], bool], deadline: float, failure: Callable[[], DistributedError]) -> None:
    while not done():
        if time.monotonic() > deadline:
            raise failure()
        time.sleep(_POLL)


def _wait_reachable(addr: str, port: int, deadline: float, info: DistInfo) -> None:
    """Wait, quietly, until something listens at addr:port (torch's own client retries log every attempt)."""
    while True:
        try:
            with socket.create_connection((addr, port), timeout=max(0.1, min(5.0, deadline - time.monotonic()))):
                return
        except OSError as err:
            if time.monotonic() > deadline:
                raise _timed_out(f" cannot reach the rendezvous at {addr}:{port} (MASTER_ADDR:MASTER_PORT)", info,
                                 str(err.strerror or err)) from None
            time.sleep(0.2)


def _master() -> tuple[str, int]:
    missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(k)]
    if missing:
        raise DistributedError("WORLD_SIZE is {world} but {missing} {are} not set; launch with torchrun",
                               world=os.environ.get("WORLD_SIZE"), missing=" and ".join(missing),
                               are="is" if len(missing) == 1 else "are")
    try:
        return os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    except ValueError:
        raise DistributedError("MASTER_PORT must be a port number, got {got!r}", got=os.environ["MASTER_PORT"]) from None


def _first_line(err: BaseException) -> str:
    """The cause in a few words: the first line of torch's message, without gloo's source location and advice."""
    line = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
    line = re.sub(r"^\[[^\]]*\.(?:cc|cpp|h):\d+\]\s*", "", line)
    return line.split(". This is typically caused")[0]


# ---- collectives -------------------------------------------------------------------------------------------------
def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def any_true(flag: bool, info: DistInfo) -> bool:
    """True on every rank if it is true on any: ranks must take the same branch (skip a step, stop)."""
    if not info.enabled:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=_collective_device(info))
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def all_sum(values: list[float], info: DistInfo) -> list[float]:
    """Element-wise sum over ranks of a few floats (metric counters)."""
    if not info.enabled:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=_collective_device(info))
    dist.all_reduce(t)
    return t.tolist()


def gather_objects(obj: Any, info: DistInfo) -> list[Any] | None:
    """Every rank's `obj` on rank 0 (a list by rank), None elsewhere; [obj] without a process group."""
    if not info.enabled:
        return [obj]
    out = [None] * info.world_size if info.is_main else None
    dist.gather_object(obj, out, dst=0)
    return out


def broadcast_object(obj: Any, info: DistInfo) -> Any:
    """Rank 0's `obj` on every rank (e.g. a decision to stop on a wall-clock budget)."""
    if not info.enabled:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def on_rank_zero(work: Callable[[], Any], info: DistInfo) -> Any:
    """`work()` on rank 0 alone (claiming the output, checking a checkpoint), with its error raised on every
    rank: as itself on rank 0, which reports it, and as a quiet `FailedOnRankZero` elsewhere, so that the user
    reads one line, not one per rank. Returns what `work` returned (on rank 0; None elsewhere)."""
    result, failure = None, None
    if info.is_main:
        try:
            result = work()
        except Exception as err:  # noqa: BLE001 - re-raised below, on every rank
            failure = err
    if any_true(failure is not None, info):
        if failure is not None:
            raise failure
        raise FailedOnRankZero("rank 0 stopped the run (its error says why)")
    return result


def _collective_device(info: DistInfo) -> torch.device:
    return info.device if dist.get_backend() == "nccl" else torch.device("cpu")


def is_main_process() -> bool:
    """Rank 0, or the only process (what prints a command's summary)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank() == 0
    return int(os.environ.get("RANK", "0")) == 0
