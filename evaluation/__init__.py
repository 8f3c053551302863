"""selfheal's benchmark harness: single shot versus healing, scored by hidden reference tests.

Run it with ``python -m evaluation.run_benchmark --suite humaneval --model local``; see
``docs/evaluation.md``. The pieces:

* ``evaluation.suites``: ``Task``, the ``Suite`` protocol, the ``builtin``, ``humaneval``, ``demo``
  and ``example`` suites;
* ``evaluation.suite_file``: your own suite, a JSONL or YAML file of specs and hidden tests
  (``--suite PATH``);
* ``evaluation.modes``: the mode -> ``HealConfig`` table;
* ``evaluation.scoring``: reference verdicts in the kernel sandbox;
* ``evaluation.recording`` / ``evaluation.honesty``: the recording provider and the leak check;
* ``evaluation.pair`` / ``evaluation.benchmark``: one (task, mode) pair as a ``TaskRecord``;
  every pair of a run, appended as they finish, resumed;
* ``evaluation.metrics`` / ``evaluation.report``: metrics, ``results.json``/``.md`` and charts.
"""

from __future__ import annotations

from evaluation.benchmark import BenchmarkRunner
from evaluation.honesty import HonestyReport, check_calls, check_messages
from evaluation.modes import MODES, config_for
from evaluation.recording import RecordingProvider
from evaluation.records import TaskRecord
from evaluation.scoring import ReferenceVerdict, score
from evaluation.suites import BuiltinSuite, HumanEvalSuite, Suite, Task, get_suite

__all__ = [
    "MODES",
    "BenchmarkRunner",
    "BuiltinSuite",
    "HonestyReport",
    "HumanEvalSuite",
    "RecordingProvider",
    "ReferenceVerdict",
    "Suite",
    "Task",
    "TaskRecord",
    "check_calls",
    "check_messages",
    "config_for",
    "get_suite",
    "score",
]
