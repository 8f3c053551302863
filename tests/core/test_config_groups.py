"""``HealConfig`` by node: groups, the flat forms people already use, the options and
``READ_BY`` derived from the groups, and run logs written with the flat config."""

from __future__ import annotations

import argparse
import importlib.util
import json
import lzma
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest

from selfheal.cli import build_parser
from selfheal.cli.heal import heal_config as _config
from selfheal.config import FIELD_GROUP, GROUPS, HealConfig, field_info
from selfheal.config.groups import Generation
from selfheal.config.options import FLAGS, setting
from selfheal.errors import ConfigError
from selfheal.graph.branch import READ_BY
from selfheal.graph.checkpoint import read_states
from selfheal.state import HealState

REPO = Path(__file__).resolve().parents[2]
OLD_LOG = REPO / "evaluation/results/humaneval60-roles-paired/runs/20261125-150018-03c296.jsonl.xz"
"""A run log the benchmark stored before the config had groups (flat ``config``)."""


def test_the_flat_forms_and_the_grouped_form_are_one_config() -> None:
    grouped = HealConfig(generation={"candidates": 4}, limits={"test_timeout": 3.0})
    assert HealConfig(candidates=4, test_timeout=3) == grouped
    assert HealConfig(generation=Generation(candidates=4), test_timeout=3.0) == grouped
    assert HealConfig().model_copy(update={"candidates": 4, "test_timeout": 3.0}) == grouped
    assert grouped.generation.candidates == 4 and grouped.limits.test_timeout == 3.0
    # flat names on top of a group given whole
    mixed = HealConfig(generation={"candidates": 4, "seed": 1}, seed=2)
    assert (mixed.generation.candidates, mixed.generation.seed) == (4, 2)
    dumped = grouped.model_dump(mode="json")
    assert set(dumped) == set(GROUPS) and dumped["generation"]["candidates"] == 4
    assert HealConfig.model_validate(dumped) == grouped
    assert HealConfig.single_shot().flat()["repair"] is False
    with pytest.raises(ValueError, match="frozen"):
        grouped.candidates = 5


def test_the_old_flat_read_still_works_and_says_where_the_setting_is() -> None:
    config = HealConfig(candidates=4, test_timeout=3)
    with pytest.warns(DeprecationWarning, match=r"read config\.generation\.candidates"):
        assert config.candidates == 4
    with pytest.warns(DeprecationWarning, match=r"read config\.limits\.test_timeout"):
        assert config.test_timeout == 3.0
    with pytest.raises(AttributeError):
        config.candidate  # noqa: B018 (not a setting)


def test_changed_rewrites_settings_by_flat_name_checked_and_keeping_what_was_set() -> None:
    """``changed`` is how the package rewrites a config: flat names or groups, validated like
    ``HealConfig(...)``; a group it does not touch is the same object, and a group it touches
    keeps which of its fields were set (``first_sample`` given or not decides the first
    round's size on a batch-free backend)."""
    config = HealConfig(first_sample=3, memory=False)
    moved = config.changed(candidates=6, model="mock")
    assert (moved.generation.candidates, moved.generation.first_sample) == (6, 3)
    assert moved.calls.model == "mock" and moved.storage is config.storage
    assert moved.generation.model_fields_set == {"candidates", "first_sample"}
    assert config.changed(seed=1).generation.model_fields_set == {"first_sample", "seed"}
    assert HealConfig().changed(calls={"temperature": 0.5}).calls.temperature == 0.5
    with pytest.raises(ConfigError, match=r"generation\.candidates=99: must be at most 16"):
        config.changed(candidates=99)
    with pytest.raises(ConfigError, match="not an option"):
        config.changed(candidate=4)
    # a group given whole and a flat name on top: only what was given counts as set
    given = HealConfig(generation=Generation(candidates=8), seed=1)
    assert given.generation.model_fields_set == {"candidates", "seed"}


def test_a_bad_grouped_value_names_the_setting_and_its_group() -> None:
    with pytest.raises(ConfigError, match=r"generation\.candidates=17: must be at most 16"):
        HealConfig(generation={"candidates": 17})
    with pytest.raises(ConfigError, match=r"limits\.test_timeout=0: must be greater than 0"):
        HealConfig(limits={"test_timeout": 0})
    with pytest.raises(ConfigError, match=r"budgets\.time_budget=-1: must be greater than 0"):
        HealConfig(time_budget=-1)
    with pytest.raises(ConfigError, match=r"repairs\.bogus=1: is not an option"):
        HealConfig(repairs={"bogus": 1})


def _stored(config: dict[str, Any]) -> str:
    """A run log's line: a fresh state whose config is stored as ``config``."""
    line = json.loads(HealState(spec={"text": "Add two numbers."}).model_dump_json())
    return json.dumps({**line, "config": config})


def test_a_run_log_written_with_the_flat_config_loads(tmp_path: Path) -> None:
    """The form ec21d6f wrote: every setting at the top of ``config``."""
    chosen = HealConfig(candidates=6, probes=False, debugger_steps=2, memory_mb=1024)
    flat = {k: v for k, v in chosen.model_dump(mode="json").items() if k not in GROUPS}
    for part in chosen.model_dump(mode="json").values():
        flat.update(part)
    assert set(flat) == set(FIELD_GROUP)
    log = tmp_path / "flat.jsonl"
    log.write_text(_stored(flat) + "\n", encoding="utf-8")
    (state,) = read_states(log)
    assert state.config == chosen
    assert "generation" in json.loads(state.model_dump_json())["config"]  # written grouped


def test_a_run_log_the_benchmark_stored_before_the_groups_loads() -> None:
    raw = lzma.decompress(OLD_LOG.read_bytes()).decode()
    stored = json.loads(raw.splitlines()[-1])["config"]
    assert "candidates" in stored and "generation" not in stored  # the flat form
    states = read_states(OLD_LOG)
    assert states[-1].config.flat() == {**HealConfig().flat(), **stored}


def test_every_setting_has_a_read_by_entry_from_its_group() -> None:
    assert set(READ_BY) == set(FIELD_GROUP)
    assert READ_BY["debugger_steps"] == ("diagnose",)  # the field's own Reads
    assert READ_BY["first_answer"] == ("generate",)  # its group's reads
    assert READ_BY["cpu_seconds"] == ("*",)  # a sandbox limit: every node


def _heal_actions() -> dict[str, argparse.Action]:
    heal = next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ).choices["heal"]
    return {flag: a for a in heal._actions for flag in a.option_strings}


def _value(name: str) -> tuple[list[str], object]:
    """Arguments that set ``name`` to something other than its default, and that value."""
    info = field_info(name)
    default = info.get_default(call_default_factory=True)
    flag = FLAGS[name]
    action = _heal_actions()[flag]
    if isinstance(action, argparse.BooleanOptionalAction):
        return ([f"--no-{flag[2:]}"], False) if default is True else ([flag], True)
    if action.choices:
        other = next(c for c in action.choices if c != default)
        return [flag, str(other)], other
    if action.metavar == "N":  # a number: its lower bound, else its upper one, else 7
        bounds = [m.ge for m in info.metadata if hasattr(m, "ge")]
        bounds += [m.le for m in info.metadata if hasattr(m, "le")] + [7]
        kind = float if isinstance(default, float) else int
        number = next(kind(b) for b in bounds if b != default)
        return [flag, str(number)], number
    if action.metavar == "LIST":  # comma-separated: two items of the field's kind
        item = get_args(info.annotation)[0]
        items = get_args(item)[::-1] if get_origin(item) is Literal else (0.5, 1.5)
        return [flag, ",".join(map(str, items))], tuple(items)
    return [flag, "/tmp/somewhere"], "/tmp/somewhere"


@pytest.mark.parametrize("name", sorted(FLAGS))
def test_every_setting_has_a_heal_option_that_sets_it(name: str) -> None:
    argv, expected = _value(name)
    args = build_parser().parse_args(["heal", "SPEC", *argv])
    assert _config(args).flat()[name] == expected


def test_only_the_settings_the_cli_sets_another_way_have_no_flag() -> None:
    assert set(FIELD_GROUP) - set(FLAGS) == {"model", "models"}  # --provider / --model
    # the flags users have keep their names
    assert (FLAGS["adversarial_tests"], FLAGS["spec_blind_tests"]) == (
        "--adversarial",
        "--spec-tests",
    )
    assert (FLAGS["example_tests"], FLAGS["max_iterations"]) == ("--examples", "--max-iterations")


def test_a_setting_word_is_parsed_against_the_field() -> None:
    assert setting("memory=off") == ("memory", False)
    assert setting("sandbox=off") == ("sandbox", "off")  # a mode, not a switch
    assert setting("seed=none") == ("seed", None)
    with pytest.raises(ConfigError, match="Unknown setting 'candidate'"):
        setting("candidate=4")
    with pytest.raises(ConfigError, match=r"invalid int value: 'many' \(it needs a number or auto"):
        build_parser().parse_args(["heal", "SPEC", "--candidates", "many"])


def test_the_docs_table_of_the_settings_is_derived_from_the_groups() -> None:
    """docs/usage.md's table of groups and settings is what ``scripts/settings_table.py``
    writes from the groups: a new setting, or one moved, shows there without a hand edit."""
    spec = importlib.util.spec_from_file_location(
        "settings_table", REPO / "scripts/settings_table.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.stale() == [], "run: python scripts/settings_table.py --write"
    for name in FIELD_GROUP:
        assert f"`{name}`" in script.table()
