"""The command line explains itself: a bare ``selfheal`` prints help, every option has help
and heal's show ``HealConfig``'s real defaults, the config's switches have flags, ``runs list``
filters and speaks JSON, and the evidence block says each thing once (a remembered solution
says it is one)."""

from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path

import pytest
from cli_harness import run_cli

from selfheal.cli import build_parser
from selfheal.cli.heal import heal_config as _config
from selfheal.cli.runs import since_time
from selfheal.config import HealConfig
from selfheal.config.options import FLAGS


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser by its prog, the top one included."""
    found = {parser.prog: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found.update(_subparsers(child))
    return found


def _heal() -> argparse.ArgumentParser:
    return _subparsers(build_parser())["selfheal heal"]


def test_a_bare_selfheal_prints_the_help_and_exits_2() -> None:
    ran = run_cli()
    assert ran.code == 2 and ran.out == ""
    assert ran.err.startswith("usage: selfheal")
    for command in ("heal", "runs", "memory", "doctor", "serve"):
        assert f"    {command} " in ran.err
    runs = run_cli("runs")
    assert runs.code == 2
    assert runs.err.strip() == (
        "selfheal: error: the following arguments are required: ACTION (in `selfheal runs`). "
        "See `selfheal runs --help`."
    )


def test_every_option_of_every_command_has_help() -> None:
    missing = [
        f"{prog} {action.option_strings or action.dest}"
        for prog, parser in _subparsers(build_parser()).items()
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction)
        and (not action.help or action.help == argparse.SUPPRESS)
        and action.dest != "debug"
    ]
    assert missing == []


def _shown(value: object) -> str:
    if value is None or value == ():  # an empty list setting: none given
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def test_heal_help_states_heal_configs_real_defaults() -> None:
    """Each flag that sets a HealConfig field says that field's default, as HealConfig has it
    (so ``--max-iterations`` says 2, not the 3 it once said)."""
    defaults = HealConfig().flat()
    by_flag = {flag: action for action in _heal()._actions for flag in action.option_strings}
    for field, flag in FLAGS.items():
        help_text = " ".join((by_flag[flag].help or "").split())
        assert help_text.endswith(f"(default {_shown(defaults[field])})"), flag
    text = " ".join(_heal().format_help().split())
    assert f"first population included (default {defaults['max_iterations']})" in text


def test_provider_help_names_every_kind_of_model_string() -> None:
    text = " ".join(_heal().format_help().split())
    for kind in ("local", "ollama[:MODEL]", "anthropic[:MODEL]", "openai:MODEL", "hf:MODEL",
                 "mock (the scripted median demo)", "mock:<script.yaml>", "auto"):  # fmt: skip
        assert kind in text, kind


def test_the_configs_switches_have_flags() -> None:
    def config(*argv: str) -> HealConfig:
        return _config(build_parser().parse_args(["heal", "SPEC", *argv]))

    assert config() == HealConfig()
    on = config("--lessons", "--spec-tests", "--critic", "--adversarial").flat()
    for field in ("lessons", "spec_blind_tests", "critic", "adversarial_tests"):
        assert on[field] is True, field
    off = config("--no-spec-tests", "--no-probes", "--no-repair", "--no-diagnosis",
                 "--no-examples", "--no-memory").flat()  # fmt: skip
    for field in ("spec_blind_tests", "probes", "repair", "diagnosis", "example_tests", "memory"):
        assert off[field] is False, field


def test_since_reads_dates_times_and_ages() -> None:
    now = 1_800_000_000.0
    assert since_time("30m", now=now) == now - 1800
    assert since_time("2d", now=now) == now - 2 * 86400
    assert since_time("2026-11-26") == datetime.datetime(2026, 11, 26).timestamp()
    assert since_time("2026-11-26T08:30") == datetime.datetime(2026, 11, 26, 8, 30).timestamp()
    with pytest.raises(Exception, match="give a date"):
        since_time("yesterday")


def test_runs_list_filters_by_status_and_time_and_speaks_json(runs_dir: Path) -> None:
    assert run_cli("heal", "--provider", "mock", "--quiet", "--no-memory").code == 0
    waiting = run_cli(
        "heal", "--provider", "mock", "--quiet", "--no-memory", "--autonomy", "review_all"
    )
    assert waiting.code == 3
    listed = run_cli("runs", "list", "--json").json()
    assert [r["status"] for r in listed["runs"]] == ["verified", "awaiting_approval"]
    first = listed["runs"][0]
    assert first["spec"].startswith("Write a function median") and first["iterations"] == 2
    assert Path(first["path"]).is_file() and first["parent"] is None
    only = run_cli("runs", "list", "--json", "--status", "awaiting_approval").json()["runs"]
    assert [r["run_id"] for r in only] == [listed["runs"][1]["run_id"]]
    assert run_cli("runs", "list", "--json", "--since", "1h").json()["runs"] == listed["runs"]
    tomorrow = (datetime.date.today() + datetime.timedelta(days=1)).isoformat()
    assert run_cli("runs", "list", "--json", "--since", tomorrow).json()["runs"] == []
    text = run_cli("runs", "list", "--status", "verified")
    assert text.out.startswith(first["run_id"]) and len(text.out.splitlines()) == 1
    assert run_cli("runs", "list", "--status", "failed").out.strip() == "no run matches"
    bad = run_cli("runs", "list", "--status", "done")
    assert bad.code == 2 and "invalid choice: 'done'" in bad.err
    assert time.time() - since_time("1h") > 3500


def test_the_evidence_block_says_each_thing_once_and_names_a_remembered_solution(
    runs_dir: Path,
) -> None:
    first = run_cli("heal", "--provider", "mock", "--quiet")
    assert first.code == 0
    evidence = first.out.split("evidence: ", 1)[1].split("\n\n", 1)[0]
    assert evidence.count("trusted tests pass") == 1
    assert "model-written" not in evidence  # the demo has none: nothing to count
    assert evidence.startswith("2/2 trusted tests pass; 3 of 3 candidates that pass them agree")
    again = run_cli("heal", "--provider", "mock", "--quiet")  # the memory recalls run 1
    assert again.code == 0 and "VERIFIED" in again.out
    evidence = again.out.split("evidence: ", 1)[1].split("\n\n", 1)[0]
    assert "the chosen code is the solution remembered from a verified earlier run" in evidence
    assert "1 of 1 candidates" not in evidence
    shown = run_cli(
        "runs", "show", json.loads(run_cli("runs", "list", "--json").out)["runs"][-1]["run_id"]
    )
    assert "the chosen code is the solution remembered" in shown.out
