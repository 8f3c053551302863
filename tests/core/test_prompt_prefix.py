"""Every role's prompt opens with the same system message and spec block, so the served
model's prompt cache reuses that prefix from one role's call to the next."""

from __future__ import annotations

import scripted as s

from selfheal import HealRequest, Run
from selfheal.kernel_sandbox import KernelPool
from selfheal.llm.mock import MockProvider


def test_every_role_shares_the_system_message_and_the_spec_block(pool: KernelPool) -> None:
    mock = MockProvider(s.every_role())
    Run.start(HealRequest(s.SPEC, provider=mock, config=s.chain(), executor=pool)).run()
    roles = {c.role for c in mock.calls}
    assert roles >= {"test_writer", "generator", "adversary", "debugger", "lessons", "critic"}
    systems = {c.messages[0].content for c in mock.calls}
    assert len(systems) == 1 and all(c.messages[0].role == "system" for c in mock.calls)
    users = [c.messages[1].content for c in mock.calls]
    shared = users[0][: min(len(u) for u in users)]
    while not all(u.startswith(shared) for u in users):
        shared = shared[:-1]
    # the whole spec and its signature line, then each role's own task
    assert shared.startswith("Spec:\n" + s.SPEC.strip()) and "Function name: `clamp`" in shared
    assert all(u.strip() != shared.strip() for u in users)
