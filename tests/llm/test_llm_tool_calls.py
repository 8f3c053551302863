"""Native tool calling: the OpenAI-compatible provider (the real ``openai`` SDK against a fake
server on 127.0.0.1 streaming ``tool_calls`` deltas the way llama-server does) and the
Anthropic provider (the real ``anthropic`` SDK against a fake Messages API). Tools go out in
each wire format, calls come back as ``Completion.tool_calls``, and a conversation with a
tool call and its result goes back in the wire format. No internet, no model."""

from __future__ import annotations

from collections.abc import Callable

from llm_fakes import FakeServer, Request, Response, openai_stream
from test_llm_anthropic import message

from selfheal.llm import Message, OpenAICompatible, RetryPolicy
from selfheal.llm.anthropic import AnthropicProvider, to_anthropic_messages
from selfheal.llm.base import ToolCall, ToolSpec, WrapperProvider, supports_tools
from selfheal.llm.mock import MockProvider
from selfheal.llm.openai_compat import TOOL_PADDING_STOP

TRACE = ToolSpec(
    name="trace_failure",
    description="Run a failing test with line-level tracing.",
    parameters={
        "type": "object",
        "properties": {"test_id": {"type": "string"}},
        "required": ["test_id"],
    },
)
CHAT = [
    Message(role="system", content="You debug."),
    Message(role="user", content="Why does ex2 fail?"),
]


def openai_provider(server: FakeServer) -> OpenAICompatible:
    return OpenAICompatible(
        model="m",
        base_url=server.url + "/v1",
        api_key="k",
        policy=RetryPolicy(timeout=10.0, attempts=1),
    )


def test_which_providers_call_tools_natively(http_server: Callable[..., FakeServer]) -> None:
    server = http_server(lambda r: Response.json({}))
    assert supports_tools(openai_provider(server))
    assert supports_tools(WrapperProvider(openai_provider(server)))
    assert not supports_tools(MockProvider({}))
    assert not supports_tools(WrapperProvider(MockProvider({})))


def test_openai_tool_call_round_trip(http_server: Callable[..., FakeServer]) -> None:
    parts = ['{"test', '_id": ', '"ex2"}']
    server = http_server(lambda r: openai_stream(parts, tool="trace_failure"))
    p = openai_provider(server)
    c = p.complete(CHAT, tools=[TRACE], tool_choice="required", max_tokens=64)
    assert c.tool_calls == (
        ToolCall(id="call_7", name="trace_failure", arguments='{"test_id": "ex2"}'),
    )
    assert c.text == "" and c.finish_reason == "tool_calls"
    assert (c.prompt_tokens, c.completion_tokens) == (120, 14)
    assert c.shown() == '[tool call] trace_failure {"test_id": "ex2"}'
    body = server.requests[-1].json()
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "trace_failure",
                "description": TRACE.description,
                "parameters": TRACE.parameters,
            },
        }
    ]
    assert body["tool_choice"] == "required" and "response_format" not in body

    # the call and its result go back in the wire format
    convo = [
        *CHAT,
        Message(role="assistant", content="", tool_calls=c.tool_calls),
        Message(role="tool", content="outcome: failed ...", tool_call_id="call_7"),
    ]
    p.complete(convo, tools=[TRACE], tool_choice="auto")
    sent = server.requests[-1].json()
    assert sent["tool_choice"] == "auto"
    assert sent["messages"][2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_7",
                    "type": "function",
                    "function": {"name": "trace_failure", "arguments": '{"test_id": "ex2"}'},
                }
            ],
        },
        {"role": "tool", "content": "outcome: failed ...", "tool_call_id": "call_7"},
    ]


def test_a_request_without_tools_sends_none(http_server: Callable[..., FakeServer]) -> None:
    def handle(r: Request) -> Response:
        return openai_stream(["ok"])

    server = http_server(handle)
    openai_provider(server).complete(CHAT)
    body = server.requests[-1].json()
    assert "tools" not in body and "tool_choice" not in body


def test_a_local_server_gets_a_stop_for_blank_line_padding_with_tools(
    http_server: Callable[..., FakeServer],
) -> None:
    server = http_server(lambda r: openai_stream(["ok"]))
    local = OpenAICompatible(model="m", base_url=server.url + "/v1", local=True)
    local.complete(CHAT, tools=[TRACE], stop=["END"])
    assert server.requests[-1].json()["stop"] == ["END", TOOL_PADDING_STOP]
    local.complete(CHAT)  # no tools: no extra stop
    assert "stop" not in server.requests[-1].json()
    openai_provider(server).complete(CHAT, tools=[TRACE])  # a remote API: not sent
    assert "stop" not in server.requests[-1].json()


def anthropic_tool_handler(request: Request) -> Response:
    tool = {
        "type": "tool_use",
        "id": "toolu_9",
        "name": "trace_failure",
        "input": {"test_id": "ex2"},
    }
    text = {"type": "text", "text": "Let me trace it."}
    return Response.json(message([text, tool], stop="tool_use"))


def test_anthropic_tool_call_round_trip(http_server: Callable[..., FakeServer]) -> None:
    server = http_server(anthropic_tool_handler)
    p = AnthropicProvider("claude-test", api_key="sk-test", base_url=server.url)
    assert supports_tools(p)
    c = p.complete(CHAT, tools=[TRACE], tool_choice="required")
    assert c.tool_calls == (
        ToolCall(id="toolu_9", name="trace_failure", arguments='{"test_id": "ex2"}'),
    )
    assert c.text == "Let me trace it."
    body = server.requests[-1].json()
    assert body["tools"] == [
        {
            "name": "trace_failure",
            "description": TRACE.description,
            "input_schema": TRACE.parameters,
        }
    ]
    assert body["tool_choice"] == {"type": "any"}

    convo = [
        *CHAT,
        Message(role="assistant", content=c.text, tool_calls=c.tool_calls),
        Message(role="tool", content="outcome: failed", tool_call_id="toolu_9"),
        Message(role="user", content="Two calls left."),
    ]
    p.complete(convo, tools=[TRACE])
    sent = server.requests[-1].json()
    assert sent["tool_choice"] == {"type": "auto"}
    assert sent["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me trace it."},
                {
                    "type": "tool_use",
                    "id": "toolu_9",
                    "name": "trace_failure",
                    "input": {"test_id": "ex2"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_9", "content": "outcome: failed"},
                {"type": "text", "text": "Two calls left."},
            ],
        },
    ]


def test_anthropic_conversion_keeps_plain_turns_plain() -> None:
    _, turns = to_anthropic_messages(CHAT)
    assert turns == [{"role": "user", "content": "Why does ex2 fail?"}]
