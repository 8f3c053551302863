"""One request for a population (issue 45 item 1): the answers of one prompt asked as one
request for ``n``, as llama-server takes it (``n_cmpl``, alias ``n``), against a fake server on
127.0.0.1 that records each request and streams ``n`` choices interleaved, each choice's
usage in the chunk after its last one, the children seeded ``seed + 1, ...``. No model, no
timed assertions."""

from __future__ import annotations

import asyncio
import gc
import inspect
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from llm_fakes import FakeServer, Request, Response

from selfheal._sync import run_sync
from selfheal.llm import Message, OpenAICompatible, RetryPolicy
from selfheal.llm.parsing.code_stop import FunctionEnds

if TYPE_CHECKING:
    from selfheal import HealConfig, HealResult

MESSAGES = [
    Message(role="system", content="You write Python."),
    Message(role="user", content="Write add(a, b)."),
]


def _event(index: int, content: str | None = None, finish: str | None = None) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    choice = {"index": index, "delta": delta, "finish_reason": finish}
    return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [choice]}  # fmt: skip


def llama_n(replies: Callable[[int], list[str]], *, honour_n: bool = True) -> Callable[..., Any]:
    """A handler answering ``n`` choices the way llama-server streams them: ``replies(seed)``
    is the fragments of the choice seeded ``seed`` (the request's seed, then ``seed + 1``
    ...); the choices' fragments interleaved; after each choice's last chunk, its usage (no
    choices) with its own ``timings``. ``honour_n=False``: a server that ignores ``n``."""

    def handler(r: Request) -> Response:
        body = r.json()
        n = int(body.get("n", 1)) if honour_n else 1
        seed = int(body.get("seed", 0))
        streams = [replies(seed + i) for i in range(n)]
        events: list[dict[str, Any]] = []
        for step in range(max(len(s) for s in streams) + 1):
            for i, pieces in enumerate(streams):
                if step < len(pieces):
                    events.append(_event(i, pieces[step]))
                elif step == len(pieces):
                    events.append(_event(i, finish="stop"))
                    usage = {"prompt_tokens": 30, "completion_tokens": len(pieces),
                             "total_tokens": 30 + len(pieces),
                             "prompt_tokens_details": {"cached_tokens": 0}}  # fmt: skip
                    events.append({"id": "c", "object": "chat.completion.chunk", "created": 0,
                                   "model": "m", "choices": [], "usage": usage,
                                   "timings": {"cache_n": 0}})  # fmt: skip
        data = [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]
        return Response(status=200, body=data, headers={"content-type": "text/event-stream"})

    return handler


def words(seed: int) -> list[str]:
    """A reply whose length and text depend on the seed."""
    return [f"answer {seed}", *[" w"] * (seed % 3)]


def local(server: FakeServer, **kwargs: Any) -> OpenAICompatible:
    kwargs.setdefault("policy", RetryPolicy(timeout=10.0, attempts=1))
    return OpenAICompatible(
        model="m", base_url=server.url + "/v1", api_key="k", local=True, one_request=True, **kwargs
    )


def test_complete_many_is_one_request_for_n(http_server: Callable[..., FakeServer]) -> None:
    server = http_server(llama_n(words))
    got = local(server).complete_many(MESSAGES, n=4, max_tokens=16, temperature=0.8, seed=100)
    assert len(server.requests) == 1
    body = server.requests[0].json()
    assert (body["n"], body["seed"], body["temperature"], body["stream"]) == (4, 100, 0.8, True)
    assert [c.text for c in got] == ["".join(words(100 + i)) for i in range(4)]
    assert [c.completion_tokens for c in got] == [len(words(100 + i)) for i in range(4)]  # own
    # the prompt processed once, for the first choice (llama-server counts 0 cached for
    # each, the state copied to the others)
    assert [c.cached_tokens for c in got] == [0, 30, 30, 30]
    assert all(c.prompt_tokens == 30 and c.finish_reason == "stop" for c in got)


def test_concurrent_samples_of_one_prompt_join_into_one_request(
    http_server: Callable[..., FakeServer],
) -> None:
    """As the pipeline asks a round (each candidate its own call, all at once): the sampled
    requests that differ only in their seed go out as one request, each caller gets its own
    answer and its own streamed fragments; the greedy request goes alone."""
    server = http_server(llama_n(words))
    p = local(server)
    seen: list[list[str]] = [[], [], []]

    async def round_() -> list[Any]:
        asks = [p.acomplete(MESSAGES, max_tokens=16, temperature=0.0, seed=1)]
        asks += [
            p.acomplete(MESSAGES, max_tokens=16, temperature=0.8, seed=50 + i,
                        on_token=seen[i].append)
            for i in range(3)
        ]  # fmt: skip
        return list(await asyncio.gather(*asks))

    greedy, *samples = run_sync(round_())  # on selfheal's loop, as the pipeline asks
    bodies = [r.json() for r in server.requests]
    assert sorted(b.get("n", 1) for b in bodies) == [1, 3]
    joined = next(b for b in bodies if b.get("n") == 3)
    assert (joined["seed"], joined["temperature"]) == (50, 0.8)
    assert greedy.text == "".join(words(1))
    assert [c.text for c in samples] == ["".join(words(50 + i)) for i in range(3)]
    assert ["".join(s) for s in seen] == [c.text for c in samples]


def test_requests_that_differ_do_not_join(http_server: Callable[..., FakeServer]) -> None:
    server = http_server(llama_n(words))
    p = local(server)

    async def round_() -> list[Any]:
        return list(
            await asyncio.gather(
                p.acomplete(MESSAGES, max_tokens=16, temperature=0.8, seed=1),
                p.acomplete(MESSAGES, max_tokens=32, temperature=0.8, seed=2),
                p.acomplete(MESSAGES[:1], max_tokens=16, temperature=0.8, seed=3),
            )
        )

    run_sync(round_())
    assert [r.json().get("n", 1) for r in server.requests] == [1, 1, 1]


def test_other_servers_get_concurrent_requests_unless_asked(
    http_server: Callable[..., FakeServer],
) -> None:
    server = http_server(llama_n(words))
    OpenAICompatible(model="m", base_url=server.url + "/v1").complete_many(
        MESSAGES, n=3, temperature=0.8, seed=10
    )
    assert sorted(r.json()["seed"] for r in server.requests) == [10, 11, 12]
    assert all("n" not in r.json() for r in server.requests)
    opted = http_server(llama_n(words))
    OpenAICompatible(model="m", base_url=opted.url + "/v1", one_request=True).complete_many(
        MESSAGES, n=3, temperature=0.8, seed=10
    )
    assert [r.json()["n"] for r in opted.requests] == [3]


def test_answers_a_server_left_out_are_asked_one_by_one(
    http_server: Callable[..., FakeServer],
) -> None:
    server = http_server(llama_n(words, honour_n=False))
    got = local(server).complete_many(MESSAGES, n=3, temperature=0.8, seed=20)
    assert [c.text for c in got] == ["".join(words(20 + i)) for i in range(3)]
    seeds = [(r.json().get("n", 1), r.json()["seed"]) for r in server.requests]
    assert seeds[0] == (3, 20) and sorted(seeds[1:]) == [(1, 21), (1, 22)]


def test_more_answers_than_slots_go_in_requests_of_at_most_the_slots(
    http_server: Callable[..., FakeServer],
) -> None:
    server = http_server(llama_n(words))
    got = local(server, max_concurrency=4).complete_many(MESSAGES, n=6, temperature=0.8, seed=0)
    assert sorted((r.json()["n"], r.json()["seed"]) for r in server.requests) == [(2, 4), (4, 0)]
    assert [c.text for c in got] == ["".join(words(i)) for i in range(6)]


def test_each_choice_stops_where_its_function_ends(http_server: Callable[..., FakeServer]) -> None:
    """``stop_when`` holds per choice: prose after one choice's function ends that choice, the
    others read on."""
    code = "def f(x):\n    return x\n"

    def replies(seed: int) -> list[str]:
        return [code, "\nThat is it.", " More prose."] if seed % 2 else [code, "# a comment\n"]

    got = local(http_server(llama_n(replies))).complete_many(
        MESSAGES, n=2, temperature=0.8, seed=0, stop_when=FunctionEnds("f")
    )
    assert got[0].text == code + "# a comment\n"
    assert got[1].text.strip() == code.strip()  # the prose after the function is gone


CLAMP = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"


def _heal_four(server: FakeServer, spec: str, form: str) -> tuple[HealResult, HealConfig]:
    """A heal of ``spec`` against ``server`` whose first round asks four answers in ``form``
    (no tests of the model's, no repair): the result and its config."""
    from selfheal import HealConfig, heal
    from selfheal.kernel_sandbox import KernelPool

    config = HealConfig(
        candidates=4, first_sample=4, first_answer=form, spec_blind_tests=False,
        repair=False, seed=3,
    )  # fmt: skip
    with KernelPool(size=1) as pool:
        return heal(spec, provider=local(server), config=config, executor=pool), config


def test_a_heal_round_asks_its_samples_of_one_prompt_as_one_request(
    http_server: Callable[..., FakeServer],
) -> None:
    """In a heal, the first round's greedy answer goes alone and its samples, each asked on
    its own by the pipeline, reach the server as one request for all of them."""
    server = http_server(llama_n(lambda seed: [f"```python\n{CLAMP}```"]))
    spec = "Write clamp(x, lo, hi): x limited to [lo, hi]. Example: clamp(5, 0, 3) -> 3"
    result, config = _heal_four(server, spec, "instruct")
    assert result.code is not None and "max(lo, min(x, hi))" in result.code
    asked = sorted((r.json().get("n", 1), r.json()["temperature"]) for r in server.requests)
    assert asked == [(1, 0.0), (3, config.generation.sample_temperature)]
    assert len(result.candidates) == 4


def test_a_server_that_refuses_n_gets_one_answer_a_request_from_then_on(
    http_server: Callable[..., FakeServer],
) -> None:
    """An older llama-server refuses ``n`` in a chat request (HTTP 400): the answers are asked
    one by one, and so are the next populations."""
    answer = llama_n(words)

    def handler(r: Request) -> Response:
        if r.json().get("n", 1) > 1:
            message = "Only one completion choice is allowed"
            return Response.json({"error": {"code": 400, "message": message}}, 400)
        return answer(r)

    server = http_server(handler)
    p = local(server)
    got = p.complete_many(MESSAGES, n=3, temperature=0.8, seed=40)
    assert [c.text for c in got] == ["".join(words(40 + i)) for i in range(3)]
    assert not p.one_request
    p.complete_many(MESSAGES, n=2, temperature=0.8, seed=1)
    assert [r.json().get("n", 1) for r in server.requests] == [3, 1, 1, 1, 1, 1]


def test_a_caller_that_leaves_a_joined_request_does_not_cancel_the_others(
    http_server: Callable[..., FakeServer],
) -> None:
    """One of two joined callers is cancelled (a stopped cell) while the answers stream: the
    other still gets its answer; when every caller has gone, nothing of the request is left
    running."""
    # the first pair's answers are short, the second pair's would stream for 20 s
    answer = llama_n(lambda seed: [f"answer {seed}", *[" w"] * (20 if seed >= 9 else 2000)])

    def slow(r: Request) -> Response:
        response = answer(r)
        response.chunk_delay = 0.01
        return response

    server = http_server(slow)
    p = local(server)

    async def scenario() -> tuple[Any, list[Any]]:
        before = asyncio.all_tasks()  # (the loop's own, from earlier tests)
        asks = [
            asyncio.ensure_future(p.acomplete(MESSAGES, temperature=0.8, seed=9 + i))
            for i in range(2)
        ]
        while not server.requests:
            await asyncio.sleep(0.01)
        asks[0].cancel()
        kept = await asks[1]
        gone = [asyncio.ensure_future(p.acomplete(MESSAGES, temperature=0.8, seed=1))
                for _ in range(2)]  # fmt: skip
        while len(server.requests) < 2:
            await asyncio.sleep(0.01)
        for task in gone:
            task.cancel()
        await asyncio.gather(*gone, return_exceptions=True)
        for _ in range(500):  # the joined request's own task ends (its stream closed)
            left = [t for t in asyncio.all_tasks() - before if t is not asyncio.current_task()]
            if not left:
                break
            await asyncio.sleep(0.01)
        return kept, left

    kept, left = run_sync(scenario())
    assert kept.text == "answer 10" + " w" * 20
    assert [r.json()["n"] for r in server.requests] == [2, 2]
    assert left == []


def test_a_population_drawn_across_forms_asks_each_form_and_temperature_as_one_request(
    http_server: Callable[..., FakeServer],
) -> None:
    """Issue 45 item 2: eight candidates, the samples taking turns across the two forms and
    two temperatures; the server gets the two greedy answers alone and one request for ``n``
    per form and temperature; each candidate says which form and temperature it came from,
    and the timeline still shows every model call."""
    from selfheal import HealConfig, heal
    from selfheal.kernel_sandbox import KernelPool

    server = http_server(llama_n(lambda seed: [f"```python\n{CLAMP}```"]))
    config = HealConfig(
        candidates=8, first_sample=8, spec_blind_tests=False, repair=False, seed=3,
        population_forms=("complete", "instruct"), population_temperatures=(0.6, 1.0),
    )  # fmt: skip
    spec = "Write a function clamp(x, lo, hi): x limited to [lo, hi]. clamp(5, 0, 3) -> 3"
    with KernelPool(size=1) as pool:
        result = heal(spec, provider=local(server), config=config, executor=pool)

    def form(body: dict[str, Any]) -> str:
        return "complete" if body["messages"][-1]["role"] == "assistant" else "instruct"

    bodies = [r.json() for r in server.requests]
    asked = sorted((form(b), b["temperature"], b.get("n", 1)) for b in bodies)
    assert asked == [
        ("complete", 0.0, 1), ("complete", 0.6, 3), ("instruct", 0.0, 1), ("instruct", 1.0, 3)
    ]  # fmt: skip
    drawn = [(c.origin, c.form, c.temperature) for c in result.candidates]
    assert drawn == [("greedy", "complete", 0.0), ("greedy", "instruct", 0.0)] + [
        ("sample", "complete", 0.6), ("sample", "instruct", 1.0)
    ] * 3  # fmt: skip
    calls = [e for e in result.timeline if e.kind == "llm" and e.node == "generate"]
    assert len(calls) == 8
    assert (
        sorted(e.detail.split(" via ")[1].split(".yaml")[0] for e in calls)
        == ["complete"] * 4 + ["generator"] * 4
    )


def test_the_script_form_reaches_the_server_as_evalplus_asks_and_stops_at_the_functions_end(
    http_server: Callable[..., FakeServer],
) -> None:
    """The third form (``script``, issue 45 item 2): EvalPlus's instruct prompt, the reply
    prefilled with its response prefix, the closing fence a stop string; the samples of the
    form share its prompt, so they are one request for ``n``. The server streams the function,
    then tests and prose: the client stops reading where the function ends."""
    script = ["def clamp(x, lo, hi):\n", "    return max(lo, min(x, hi))\n", "\n",
              "assert clamp(5, 0, 3) == 3\n", "print(clamp(9, 0, 3))\n", "```\n\n",
              "This script defines clamp and checks it."]  # fmt: skip
    server = http_server(llama_n(lambda seed: script))
    spec = "Write a function clamp(x, lo, hi): x limited to [lo, hi]. clamp(5, 0, 3) -> 3"
    result, _ = _heal_four(server, spec, "script")

    bodies = [r.json() for r in server.requests]
    assert sorted((b["temperature"], b.get("n", 1)) for b in bodies) == [(0.0, 1), (0.8, 3)]
    response = (
        "Below is a Python script with a self-contained function that solves the problem and "
        "passes corresponding tests:\n```python\n"
    )
    for body in bodies:
        assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant"]
        assert body["messages"][1]["content"].startswith(
            "Please provide a self-contained Python script that solves the following problem "
            f"in a markdown code block:\n```\n{spec}\n```"
        )
        assert body["messages"][2]["content"] == response
        assert "\n```" in body["stop"]
    assert [(c.origin, c.form) for c in result.candidates] == [("greedy", "script")] + [
        ("sample", "script")
    ] * 3
    assert all(c.code == CLAMP.strip() for c in result.candidates)
    assert result.code == CLAMP.strip() and result.status == "verified"
    calls = [e for e in result.timeline if e.kind == "llm" and e.node == "generate"]
    assert [e.detail.split(" via ")[1] for e in calls] == ["script.yaml v1"] * 4
    assert all(e.reply == CLAMP + "\n" for e in calls)  # no test, no prose: cut there


def _suspended_http_generators() -> list[str]:
    """The HTTP stack's async generators alive and not run to their end."""
    return [
        o.__qualname__
        for o in gc.get_objects()
        if inspect.isasyncgen(o)
        and o.ag_frame is not None
        and any(k in o.ag_code.co_filename for k in ("openai", "httpx", "httpcore"))
    ]


@pytest.mark.parametrize("one_request", [False, True])
def test_a_stream_cut_by_the_stop_rule_is_closed_on_selfheals_loop(
    http_server: Callable[..., FakeServer], one_request: bool
) -> None:
    """Replies stopped where the function ends (each answer its own request, or one request
    for all three) leave no HTTP generator for the cyclic garbage collector: the SDK's stream
    reader holds its stream in a reference cycle, and left open it and the httpx generators
    under it were finalized in whichever thread the collector ran ("async generator already
    executing" in a benchmark's scoring thread). With the collector off, they are closed on
    selfheal's loop once it has run."""
    pieces = ["```python\n", "def f(x):\n", "    return x\n", "```", "\n"] + ["blah "] * 300
    server = http_server(llama_n(lambda seed: pieces))
    p = OpenAICompatible(
        model="m",
        base_url=server.url + "/v1",
        api_key="k",
        policy=RetryPolicy(timeout=10.0),
        one_request=one_request,
    )
    gc.collect()
    assert _suspended_http_generators() == []
    gc.disable()
    try:
        done = p.complete_many(
            [Message(role="user", content="f")], n=3, stop_when=FunctionEnds("f")
        )
        for _ in range(5):
            run_sync(asyncio.sleep(0.01))  # the loop runs the closes it was handed
        left = _suspended_http_generators()
    finally:
        gc.enable()
    assert [d.text for d in done] == ["```python\ndef f(x):\n    return x\n"] * 3
    assert left == []
