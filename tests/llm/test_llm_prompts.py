"""Prompts are data; the reply schema comes from the role's reply model, never from the YAML."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import get_args

import pytest
from pydantic import BaseModel

import selfheal.roles
from selfheal.errors import ConfigError
from selfheal.llm import prompts
from selfheal.roles.critic import CriticReply
from selfheal.roles.debugger import DiagnosisReply
from selfheal.roles.debugtools import TOOL_NAMES
from selfheal.roles.investigate import StepReply
from selfheal.roles.oracle import OracleReply
from selfheal.state.repair import Blame, DiagnosisCategory, Verdict

SHIPPED = sorted((Path(__file__).resolve().parents[2] / "prompts").glob("*.yaml"))


def _reply_models() -> list[type[BaseModel]]:
    """Every role's structured reply model: the ``*Reply`` models defined in selfheal.roles."""
    found: list[type[BaseModel]] = []
    for info in pkgutil.walk_packages(selfheal.roles.__path__, "selfheal.roles."):
        module = importlib.import_module(info.name)
        for name, obj in inspect.getmembers(module, inspect.isclass):
            ours = obj.__module__ == module.__name__
            if ours and name.endswith("Reply") and issubclass(obj, BaseModel):
                found.append(obj)
    return found


REPLY_MODELS = _reply_models()


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_prompt_loads_without_a_schema_copy(path: Path) -> None:
    assert "\nschema:" not in path.read_text(encoding="utf-8")
    template = prompts.load_prompt(path.stem)
    assert template.reply in ("code", "json")
    assert template.render  # renders are exercised by the pipeline tests


def _write(tmp_path: Path, extra: str) -> Path:
    (tmp_path / "critic.yaml").write_text(
        "version: 1\nrole: critic\nreply: json\n" + extra + "system: s\nuser: u {{ spec }}\n",
        encoding="utf-8",
    )
    return tmp_path


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ("schema: {type: object}\n", "reply model"),  # the schema comes from the reply model
        ("temprature: 0.2\n", "temprature"),  # an unknown key
    ],
)
def test_a_schema_block_or_an_unknown_key_is_refused(tmp_path: Path, extra: str, says: str) -> None:
    prompts.set_prompts_dir(_write(tmp_path, extra))
    try:
        with pytest.raises(ConfigError, match=says):
            prompts.load_prompt("critic")
    finally:
        prompts.set_prompts_dir(None)


def _enum(model: type, field: str) -> list[str]:
    return list(model.model_json_schema()["properties"][field]["enum"])  # type: ignore[attr-defined]


def test_reply_schemas_offer_the_choices_of_the_state() -> None:
    assert _enum(DiagnosisReply, "category") == list(get_args(DiagnosisCategory))
    assert _enum(DiagnosisReply, "blame") == list(get_args(Blame))
    assert _enum(CriticReply, "verdict") == list(get_args(Verdict))
    assert _enum(StepReply, "tool") == [*TOOL_NAMES, "diagnose"]


def test_a_near_miss_choice_costs_no_retry() -> None:
    reply = DiagnosisReply.model_validate(
        {"root_cause": "x", "category": " Edge_Case ", "blame": "the test"}
    )
    assert (reply.category, reply.blame) == ("edge_case", "unclear")
    assert (
        DiagnosisReply.model_validate({"root_cause": "x", "category": "typo"}).category == "other"
    )
    assert CriticReply.model_validate({"verdict": "Rejected"}).verdict == "reject"
    assert StepReply.model_validate({"tool": " Trace_Failure "}).tool == "trace_failure"
    assert StepReply.model_validate({"tool": "debug it"}).tool == "diagnose"
    # the older shape of a step reply still reads
    assert StepReply.model_validate({"action": "RUN", "code": "f(1)"}).arguments() == {
        "code": "f(1)"
    }


@pytest.mark.parametrize("model", REPLY_MODELS, ids=lambda m: m.__name__)
def test_schema_decoding_keeps_the_declared_field_order(model: type[BaseModel]) -> None:
    """llama.cpp's JSON-schema grammar writes required properties first, then optional ones;
    a reply model whose optional field comes before a required one would be decoded in
    another order than declared (the oracle's value before its reasoning, as it once was)."""
    schema = model.model_json_schema()
    declared = list(schema["properties"])
    required = set(schema.get("required", ()))
    grammar = [p for p in declared if p in required] + [p for p in declared if p not in required]
    assert grammar == declared


def test_every_role_reply_model_is_checked() -> None:
    names = {m.__name__ for m in REPLY_MODELS}
    assert {"OracleReply", "DiagnosisReply", "CriticReply", "LessonsReply", "StepReply"} <= names


def test_the_oracle_reasons_before_it_answers() -> None:
    schema = OracleReply.model_json_schema()
    assert list(schema["properties"]) == ["reasoning", "value"]
    assert schema["required"] == ["reasoning", "value"]
