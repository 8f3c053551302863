"""Paired ablations (``--paired``): a mode that differs from its base mode only in a role's
switch continues the base mode's run of the same task instead of running afresh.

Sampling noise swamps small effects on a 1.5B model: two runs of the same loop differ on a
few problems in every sixty, which is the size of what a role can add. A paired mode removes
that noise where it can: it takes the base run's states from its run log, finds the first one
where the mode's config would have gone another way (``selfheal.graph.branch``), and goes on
from there with the same provider and sandbox. Up to that point the two records share every
answer; after it, they differ only by what the switch does (and the samples it leads to). A task
on which the switch never matters gets the base's result, marked ``diverged: false``.

The base runs' logs are kept beside the results (``runs/<run id>.jsonl.xz``, ``archive_run``)
so that ``--resume`` on another machine can still branch from them. The record counts the
shared part: ``wall_time`` is the base run's time up to the branch plus
the continuation's; calls and tokens likewise (``PairInfo``). The continuation does not erase
the server's prompt cache first: a run that reached the branch on its own would have its own
prompts cached, and the base's continuation may have left some of the same ones.
"""

from __future__ import annotations

import lzma
import time
from collections.abc import Callable
from pathlib import Path

from evaluation.honesty import HonestyReport
from evaluation.modes import asks_of, base_of
from evaluation.recording import RecordedCall
from evaluation.records import PairInfo, TaskRecord
from evaluation.suites import Task
from selfheal.config import HealConfig
from selfheal.errors import SelfHealError
from selfheal.graph.branch import branch_point, question_point
from selfheal.graph.checkpoint import find_run, read_states
from selfheal.llm.base import Completion
from selfheal.state import HealState

__all__ = ["archive_run", "base_history", "paired_record", "shared_calls"]


def archive_run(record: TaskRecord, config: HealConfig, folder: Path) -> Path | None:
    """Keep the run log behind a base mode's ``record`` in ``folder`` (beside the results),
    xz-compressed (a run log of 800 KB keeps in about 10 KB), so that a paired mode resumed
    later or on another machine can still branch from it. None when there is no log to keep."""
    if not record.run_id or record.error:
        return None
    target = folder / f"{record.run_id}.jsonl.xz"
    if target.exists():
        return target
    try:
        data = find_run(record.run_id, config.storage.runs_dir).read_bytes()
    except (SelfHealError, OSError):
        return None
    folder.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    partial.write_bytes(lzma.compress(data))
    partial.replace(target)
    return target


def base_history(
    record: TaskRecord, config: HealConfig, archive: Path | None = None
) -> list[HealState] | None:
    """The states of the run behind ``record``: from its run log in the runs directory, else
    from its copy in ``archive`` (``archive_run``); None when neither can be read."""
    if not record.run_id or record.error:
        return None
    places: list[Callable[[], Path]] = [lambda: find_run(record.run_id, config.storage.runs_dir)]
    if archive is not None:
        places.append(lambda: archive / f"{record.run_id}.jsonl.xz")
    for place in places:
        try:
            return read_states(place())
        except (SelfHealError, OSError, ValueError):
            continue
    return None


def shared_calls(start: HealState) -> list[RecordedCall]:
    """The base run's model calls before the branch, as its timeline kept them (the messages
    sent and the reply), so that the continuation's honesty check knows what the model itself
    wrote before: an assertion it wrote then and sees again is an echo, not a leak."""
    return [
        RecordedCall(messages=e.messages, completion=Completion(text=e.reply))
        for e in start.events
        if e.kind == "llm"
    ]


def _merge_honesty(a: HonestyReport | None, b: HonestyReport | None) -> HonestyReport | None:
    if a is None or b is None:
        return a or b
    return HonestyReport(
        messages_checked=a.messages_checked + b.messages_checked,
        secret_assertions=max(a.secret_assertions, b.secret_assertions),
        leaks=tuple(dict.fromkeys(a.leaks + b.leaks)),
        echoes=tuple(dict.fromkeys(a.echoes + b.echoes)),
    )


def paired_record(
    task: Task,
    mode: str,
    *,
    config: HealConfig,
    base: TaskRecord,
    history: list[HealState],
    run_from: Callable[[HealState], TaskRecord],
) -> TaskRecord:
    """The record of ``mode`` on ``task`` as a branch of ``base`` (whose run's states are
    ``history``): ``run_from(state)`` runs and scores the continuation (its honesty check
    over ``shared_calls(state)`` and its own calls). ``config`` is the
    mode's own (its seed is the base run's, so the continuation samples like a fresh run of
    the mode would)."""
    base_mode = base_of(mode)
    assert base_mode is not None  # (called for paired modes only)
    config = config.changed(seed=history[0].config.generation.seed)
    # a mode with a simulated user parts where the first question would have been open
    start = (question_point if asks_of(mode) else branch_point)(history, config)
    if start is None:
        info = PairInfo(base=base_mode, base_run_id=base.run_id, diverged=False)
        return base.model_copy(
            update={
                "mode": mode,
                "config": config.model_dump(mode="json"),
                "paired": info,
                "finished_at": time.time(),
            }
        )
    shared_seconds = max(0.0, base.wall_time - (history[-1].elapsed - start.elapsed))
    usage = start.usage
    record = run_from(start)
    info = PairInfo(
        base=base_mode,
        base_run_id=base.run_id,
        diverged=True,
        at_node=start.next,
        at_step=start.step,
        shared_seconds=shared_seconds,
        shared_calls=usage.calls,
    )
    return record.model_copy(
        update={
            "usage": record.usage + usage,
            "wall_time": record.wall_time + shared_seconds,
            # the continuation's check ran over the shared calls too (``shared_calls``); a
            # base run that kept no transcripts is vouched for by its own record's check
            "honesty": record.honesty
            if start.config.calls.transcripts
            else _merge_honesty(base.honesty, record.honesty),
            "paired": info,
        }
    )
