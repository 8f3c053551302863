"""On a GPU the first round asks the whole batch (issue 45, item 5): a backend whose batch costs
about one answer (``batch_free``: transformers on CUDA) gets a ``first_sample`` the config does
not set raised to the whole population when the run starts; and each batch size the run will
use is warmed up once, when the model loads and when the run starts, off the run's path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from selfheal.config import HealConfig
from selfheal.context import FixedRouter
from selfheal.graph.build import settled_config, warm_up
from selfheal.llm.base import Message, batch_free
from selfheal.llm.limits import LimitedProvider, ModelLimits, local_gate
from selfheal.llm.mock import MockProvider
from selfheal.request import HealRequest
from selfheal.state import HealState

SPEC = "Write a function add(a, b) returning a + b. add(1, 2) -> 3"


class GPUMock(MockProvider):
    """The scripted mock as a GPU backend would describe itself, recording warm-up asks."""

    batch_hint = 8
    batch_free = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.warm: list[tuple[int, ...]] = []

    def warm_up(self, sizes: tuple[int, ...]) -> None:
        self.warm.append(tuple(sizes))


def started(provider: Any, **config: Any) -> HealState:
    request = HealRequest(spec=SPEC, config=HealConfig(**config))
    router = FixedRouter(provider)
    settled, events = settled_config(request.config, router, None)
    state = request.initial_state(config=settled, events=events)
    warm_up(state, router)
    return state


def test_a_gpu_backend_asks_the_whole_population_in_the_first_round() -> None:
    gpu = GPUMock()
    state = started(gpu)
    assert (state.config.generation.candidates, state.config.generation.first_sample) == (8, 8)
    note = state.events[-1].detail
    assert note.startswith("first_sample=8:") and "whole population" in note
    # the first round's batches: two greedy answers alone, 3 samples in each form together
    assert gpu.warm == [(1, 3)]
    assert started(GPUMock(), first_answer="instruct").config.generation.first_sample == 8
    assert started(GPUMock(), candidates=5).config.generation.first_sample == 5


def test_a_first_sample_you_set_or_a_cpu_backend_keeps_the_confirming_sample() -> None:
    assert started(GPUMock(), first_sample=2).config.generation.first_sample == 2
    assert started(GPUMock(), candidates=1, first_sample=1).config.generation.first_sample == 1
    cpu = MockProvider()
    assert not batch_free(cpu)
    assert started(cpu).config.generation.first_sample == 2
    # behind the model limits' gate, the backend still says so and is still warmed
    gpu = GPUMock()
    gated = LimitedProvider(gpu, local_gate("gpu-mock", ModelLimits()), ModelLimits())
    assert batch_free(gated) and started(gated).config.generation.first_sample == 8
    assert gpu.warm == [(1, 3)]


def test_the_whole_first_round_is_asked_at_once(tmp_path: Path) -> None:
    from selfheal import heal

    code = "```python\ndef add(a, b):\n    return a + b\n```"
    gpu = GPUMock({"generator": [code] * 8, "test_writer": ["```python\n# none\n```"]})
    result = heal(SPEC, provider=gpu, config=HealConfig(first_answer="instruct"))
    rounds = {c.round for c in result.candidates}
    assert len(result.candidates) == 8 and rounds == {1}
    assert len(gpu.calls_for("generator")) == 8
    assert result.config.generation.first_sample == 8


def test_a_transformers_model_warms_its_batch_sizes_when_it_loads(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from test_llm_hf_batch import Generations
    from tiny_hf import build_model

    from selfheal.llm.hf import WARM_TOKENS, HFProvider

    folder = str(build_model(tmp_path, first_token="hello", sampling=True))
    assert HFProvider(folder, device="cpu").warmed == {}  # a CPU has no per-shape set-up
    assert not batch_free(HFProvider(folder, device="cpu"))
    provider = HFProvider(folder, device="cpu", batch=4, warm=True)
    assert set(provider.wait_warm()) == {1, 4}
    gen = Generations(provider)
    provider.warm_up((1, 3, 4))  # a run's first round: only 3 is new
    assert set(provider.wait_warm()) == {1, 3, 4}
    (call,) = gen.calls
    assert call["num_return_sequences"] == 3 and call["max_new_tokens"] == WARM_TOKENS
    # a warm-up waits its turn like any call, and the model answers as before
    chat = [Message(role="user", content="def add ( a b )")]
    assert provider.complete(chat, max_tokens=2).completion_tokens <= 2
    provider.device = "cuda"  # what batch_free reads; no GPU here
    assert batch_free(provider)
