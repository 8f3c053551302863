"""``HealResult``: what ``heal`` returns, a readable view of the final state."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from selfheal import texts
from selfheal.config import HealConfig
from selfheal.diffs import unified_diff
from selfheal.example_hints import no_trusted_test
from selfheal.kernel_sandbox.types import Outcome, TestResult
from selfheal.records import Record
from selfheal.state import (
    Attempt,
    Candidate,
    Diagnosis,
    Event,
    Evidence,
    HealState,
    Remembered,
    Status,
    TestCase,
    Usage,
)
from selfheal.texts import proposal_text, remembered_lines, trust
from selfheal.usertests import tests_module


def _dump_all(records: Sequence[Record]) -> list[dict[str, Any]]:
    return [r.model_dump(mode="json") for r in records]


def _pending(s: HealState) -> dict[str, Any] | None:
    """The proposal waiting for a decision: what a reviewer needs to approve, not blind."""
    p = s.pending
    if p is None or s.status != "awaiting_approval":
        return None
    return {
        **p.model_dump(mode="json", exclude={"candidates"}),
        "candidates": [c.id for c in p.candidates],
    }


_CANDIDATE_KEYS = {
    "id",
    "origin",
    "form",
    "temperature",
    "round",
    "parent",
    "memory_id",
    "cluster",
    "behaviour",
}
"""The fields of a candidate in ``HealResult.to_dict`` (its code is in the attempts)."""


class HealResult(Record):
    """The outcome of a heal run: the final state, read through properties (a saved result
    holds its data once)."""

    state: HealState
    """The final state (for time travel and the notebook view)."""
    path: str | None = None
    """The run log on disk."""

    @classmethod
    def from_state(cls, state: HealState, *, path: Path | None = None) -> HealResult:
        return cls(state=state, path=str(path) if path else None)

    # -- the state, read --------------------------------------------------------------------

    @property
    def code(self) -> str | None:
        """The code the run settled on (the best attempt; while a run goes, the latest
        candidate or the pending proposal)."""
        s = self.state
        if s.final_code is not None:
            return s.final_code
        if s.current is not None:
            return s.current.code
        return s.pending.code if s.pending is not None else None

    @property
    def verified(self) -> bool:
        """True only with trusted tests, all passing, and agreement behind it."""
        return self.state.status == "verified"

    @property
    def status(self) -> Status:
        """``verified``, ``exhausted``, ``failed``, ``unverified`` or ``awaiting_approval``."""
        return self.state.status

    @property
    def iterations(self) -> int:
        """Rounds run (the first population, then repair rounds)."""
        return self.state.iteration

    @property
    def run_id(self) -> str:
        """Id of the run log (``selfheal runs show ID``)."""
        return self.state.run_id

    @property
    def entry_point(self) -> str | None:
        """Name of the function."""
        return self.state.spec.entry_point

    @property
    def tests(self) -> tuple[TestCase, ...]:
        """Every test with its origin and trust."""
        return self.state.tests

    @property
    def attempts(self) -> tuple[Attempt, ...]:
        """Each round's chosen version with its execution report."""
        return self.state.attempts

    @property
    def diagnoses(self) -> tuple[Diagnosis, ...]:
        """Every diagnosis."""
        return self.state.diagnoses

    @property
    def lessons(self) -> tuple[str, ...]:
        """The final lessons."""
        return tuple(lesson.text for lesson in self.state.lessons)

    @property
    def remembered(self) -> tuple[Remembered, ...]:
        """What the run recalled from the memory across runs (lessons, a verified solution)."""
        return self.state.remembered

    def remembered_text(self) -> str:
        """One line per remembered lesson or solution, with the run it came from."""
        return "\n".join(f"  - {x}" for x in remembered_lines(self.state))

    @property
    def timeline(self) -> tuple[Event, ...]:
        """Every event."""
        return self.state.events

    @property
    def usage(self) -> Usage:
        """Model calls and tokens."""
        return self.state.usage

    @property
    def config(self) -> HealConfig:
        """The config it ran with."""
        return self.state.config

    @property
    def models(self) -> dict[str, str]:
        """Role -> model id used."""
        return dict(self.state.models)

    @property
    def error(self) -> str:
        """Why it failed, if it did."""
        return self.state.error

    # -- views ------------------------------------------------------------------------------

    @property
    def evidence(self) -> Evidence:
        """What the status rests on: trusted tests passed/total, candidates and clusters, probe
        inputs, disputed tests, and a one-line ``summary``."""
        if self.state.evidence is not None:
            return self.state.evidence
        trusted = [t for t in self.tests if t.trusted]
        outcomes = self.test_outcomes()
        passed = sum(1 for t in trusted if outcomes.get(t.id) == "passed")
        if not outcomes:
            summary = "not executed: no test ran (single shot, or the run stopped before)"
        elif trusted:
            summary = f"{passed}/{len(trusted)} trusted tests pass; one candidate"
        else:
            summary = f"{no_trusted_test(self.state.spec)}; one candidate"
        return Evidence(
            trusted_passed=passed,
            trusted_total=len(trusted),
            candidates=len(self.state.candidates),
            summary=summary,
        )

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        """Every candidate of the population: code, origin, cluster, its run on every test
        and probe input."""
        return self.state.candidates

    @property
    def diff(self) -> str:
        """The change against the code you gave (``heal(code=...)``), as a unified diff; ""
        when you gave none or it is unchanged."""
        given = self.state.given_code
        if given is None or not self.code or self.code.strip() == given.strip():
            return ""
        return unified_diff(given, self.code, a="your code", b="healed")

    def tests_file(self, import_from: str | None = None) -> str:
        """A pytest module of the tests that justify the result: your tests and the spec's
        examples (trusted), then the model-written tests the chosen code passes that no
        agreeing candidates dispute, each with a comment saying where it came from.

        ``import_from``: the module the code under test is imported from (``from
        import_from import *``); by default the code itself heads the file."""
        return tests_module(self.state, self.code or "", self.test_outcomes(), import_from)

    def _final_results(self) -> tuple[TestResult, ...] | None:
        """The results of the final code's last execution (None if it never ran)."""
        ran = [a.report for a in self.attempts if a.code == self.code and a.report is not None]
        return ran[-1].results if ran else None

    def test_outcomes(self) -> dict[str, Outcome]:
        """Test id -> outcome on the final code's last execution."""
        results = self._final_results()
        if results is None:
            return self.state.outcomes()
        return {r.test_id: r.outcome for r in results}

    @property
    def function(self) -> Any:
        """The healed function, defined in a fresh namespace of *this* process.

        Only call this on code you trust: it runs outside the sandbox."""
        if not self.code or not self.entry_point:
            return None
        ns: dict[str, Any] = {}
        exec(compile(self.code, f"<selfheal {self.run_id}>", "exec"), ns)
        return ns.get(self.entry_point)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict of everything (the CLI's ``--json``)."""
        s = self.state
        return {
            "code": self.code,
            "verified": self.verified,
            "status": self.status,
            "iterations": self.iterations,
            "run_id": self.run_id,
            "entry_point": self.entry_point,
            "tests": _dump_all(s.tests),
            "attempts": _dump_all(s.attempts),
            "diagnoses": _dump_all(s.diagnoses),
            "lessons": list(self.lessons),
            "remembered": _dump_all(s.remembered),
            "timeline": _dump_all(s.events),
            "usage": s.usage.model_dump(mode="json"),
            "config": s.config.model_dump(mode="json"),
            "models": self.models,
            "error": self.error,
            "path": self.path,
            "pending": _pending(s),
            "final_outcomes": self.test_outcomes(),
            "evidence": self.evidence.model_dump(mode="json"),
            "candidates": [
                {
                    **c.model_dump(mode="json", include=_CANDIDATE_KEYS),
                    "loaded": bool(c.report and c.report.load.ok),
                }
                for c in self.candidates
            ],
        }

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), **kw)

    def timeline_text(self) -> str:
        """One line per node: ``✓ execute  0.03s  0 tok  5/7 passed``."""
        return texts.timeline_text(self.timeline)

    def transcript_text(self) -> str:
        """Every model call as the model saw it: the messages sent and the raw reply
        (kept unless ``HealConfig(transcripts=False)``)."""
        return texts.transcript_text(self.timeline)

    def candidates_text(self) -> str:
        """One line per candidate: id, origin, round, what it cost, cluster, trusted tests
        passed, and what it returned on the first probes."""
        return texts.candidates_text(self.state)

    def pending_text(self) -> str:
        """The proposal waiting for a decision (diagnosis and diff), or "" if none waits."""
        if self.state.pending is None or self.status != "awaiting_approval":
            return ""
        return proposal_text(self.state.pending)

    def tests_text(self) -> str:
        """One row per test (outcome, id, origin, trust, first line); a failing trusted test
        shows what went wrong under it."""
        return texts.tests_text(self.tests, self.test_outcomes(), self._failures())

    def _failures(self) -> dict[str, str]:
        """Test id -> what went wrong, on the final code's last execution."""
        return {
            r.test_id: r.message.strip()
            if r.outcome == "failed" and r.message.strip()
            else f"{r.exc_type or r.outcome}: {r.message.strip()[:200]}"
            for r in self._final_results() or ()
            if r.outcome != "passed"
        }

    def __repr__(self) -> str:
        head = (
            f"HealResult(status={self.status!r}, verified={self.verified}, "
            f"iterations={self.iterations}, tests={len(self.tests)}, "
            f"tokens={self.usage.total_tokens}, run_id={self.run_id!r})"
        )
        parts = [head]
        if self.code:
            parts.append("--- code ---\n" + self.code.rstrip())
        if self.state.evidence is not None:
            parts.append(f"--- evidence ---\n{self.evidence.summary}")
        if self.error:
            parts.append(f"--- error ---\n{self.error}")
        return "\n".join(parts)

    __str__ = __repr__

    def _repr_markdown_(self) -> str:
        badge = "✅ verified" if self.verified else f"⚠️ {self.status}"
        lines = [
            f"**selfheal** `{self.entry_point or '?'}`: {badge} after {self.iterations} iteration(s), "
            f"{self.usage.calls} model call(s), {self.usage.total_tokens} tokens",
            "",
            f"Evidence: {self.evidence.summary}",
            "",
            "```python",
            (self.code or "").rstrip(),
            "```",
        ]
        if self.tests:
            outcomes = self.test_outcomes()
            lines += ["", "| test | origin | trust | outcome |", "|---|---|---|---|"]
            for t in self.tests:
                src = t.headline[:60].replace("|", "\\|")
                lines.append(
                    f"| `{src}` | {t.origin} | {trust(t)} | {outcomes.get(t.id, 'not run')} |"
                )
        if self.lessons:
            lines += ["", "Lessons:"] + [f"- {x}" for x in self.lessons]
        if self.remembered:
            lines += ["", "Remembered from earlier runs:"]
            lines += [f"- {x}" for x in remembered_lines(self.state)]
        if self.error:
            lines += ["", f"Error: {self.error}"]
        return "\n".join(lines)
