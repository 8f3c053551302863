"""``candidates="auto"``: the population sized from what the generator's backend decodes at
once (``batch_hint``), resolved when a run starts and recorded in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfheal.config import HealConfig, candidates_of, population_size
from selfheal.context import FixedRouter
from selfheal.errors import ConfigError
from selfheal.graph.build import settled_config
from selfheal.llm.anthropic import AnthropicProvider
from selfheal.llm.base import batch_hint
from selfheal.llm.limits import LimitedProvider, ModelLimits, local_gate
from selfheal.llm.mock import MockProvider
from selfheal.llm.ollama import OllamaProvider
from selfheal.llm.openai_compat import OpenAICompatible
from selfheal.local.provider import LocalProvider
from selfheal.local.server import LocalServer
from selfheal.local.settings import ServerSettings
from selfheal.request import HealRequest
from selfheal.state import Event


def test_the_rule() -> None:
    assert [population_size(h) for h in (None, 1, 3, 4, 8, 16, 64)] == [4, 4, 4, 4, 8, 16, 16]
    assert candidates_of(HealConfig()) == 4  # unresolved (no run yet): the floor
    assert candidates_of(HealConfig(candidates=7)) == 7


def test_each_provider_says_what_it_decodes_at_once(tmp_path: Path) -> None:
    served = LocalServer(
        ServerSettings(binary="llama-server", model_path="m.gguf", alias="m", slots=6)
    )
    assert batch_hint(LocalProvider(server=served)) == 6  # llama-server's slots
    assert batch_hint(OpenAICompatible(model="m", base_url="http://127.0.0.1:9/v1")) is None
    assert batch_hint(OpenAICompatible(model="m", max_concurrency=12)) == 12
    assert batch_hint(AnthropicProvider(api_key="sk-test")) == 1  # rate limits
    assert batch_hint(OllamaProvider()) == 1
    assert batch_hint(MockProvider.demo()) is None
    wrapped = OpenAICompatible(model="m", max_concurrency=8)
    limited = LimitedProvider(wrapped, local_gate("openai:m", ModelLimits()), ModelLimits())
    assert batch_hint(limited) == 8  # a wrapper passes its inner provider's on


def test_hf_batch_hint_by_device(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tiny_hf import build_model

    from selfheal.llm.hf import HFProvider

    folder = str(build_model(tmp_path, first_token="hello"))
    assert batch_hint(HFProvider(folder, device="cpu")) == 1  # a CPU computes every row
    assert batch_hint(HFProvider(folder, device="cpu", batch=16)) == 16
    gpu = HFProvider(folder, device="cpu")
    gpu.device = "cuda"  # what the hint reads; no GPU here
    assert batch_hint(gpu) == 8


def resolved(provider: object, **config: object) -> tuple[HealConfig, tuple[Event, ...]]:
    request = HealRequest(spec="Return the median of a list.", config=HealConfig(**config))
    return settled_config(request.config, FixedRouter(provider), None)  # type: ignore[arg-type]


def test_auto_resolves_from_the_generators_backend_and_is_recorded() -> None:
    config, events = resolved(OpenAICompatible(model="m", max_concurrency=8))
    assert config.generation.candidates == 8
    (note,) = events
    assert note.kind == "info" and note.detail.startswith("candidates=auto: 8")
    assert "batch_hint 8" in note.detail
    config, _ = resolved(AnthropicProvider(api_key="sk-test"))
    assert config.generation.candidates == 4  # a hint of 1 keeps the floor


def test_explicit_numbers_keep_working() -> None:
    config, events = resolved(OpenAICompatible(model="m", max_concurrency=8), candidates=2)
    assert config.generation.candidates == 2 and events == ()


def test_auto_from_the_cli_and_the_magic() -> None:
    from selfheal.cli import build_parser
    from selfheal.cli.heal import heal_config as _config
    from selfheal.config.options import setting

    assert (
        _config(
            build_parser().parse_args(["heal", "S", "--candidates", "auto"])
        ).generation.candidates
        == "auto"
    )
    key, value = setting("candidates=auto")
    assert HealConfig(**{key: value}).generation.candidates == "auto"
    assert HealConfig(**dict([setting("candidates=6")])).generation.candidates == 6
    with pytest.raises(ConfigError, match="candidates=17: must be at most 16"):
        HealConfig(candidates=17)


def test_a_branch_asking_for_auto_keeps_the_recorded_population() -> None:
    from selfheal.graph.branch import branch_point

    config, _ = resolved(OpenAICompatible(model="m", max_concurrency=8))
    request = HealRequest(spec="Return the median of a list.", config=config)
    history = [request.initial_state().model_copy(update={"next": "generate"})]
    assert branch_point(history, config.model_copy(update={"candidates": "auto"})) is None
    fork = branch_point(history, config.model_copy(update={"candidates": 6}))
    assert fork is not None and fork.config.generation.candidates == 6
