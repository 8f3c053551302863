"""heal() inside real Jupyter kernels: headless (nbclient) never hangs, a live start() returns
a handle whose approvals resolve in the kernel's event loop, full autonomy streams widget
updates."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from selfheal.llm.mock import DEMO_SPEC
from selfheal.notebook import notebook_mode

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
WIDGET = "application/vnd.jupyter.widget-view+json"

PRELUDE = """import selfheal
from selfheal import HealConfig
from selfheal.llm.mock import DEMO_SPEC
from selfheal.notebook import notebook_mode
print("MODE", notebook_mode())"""


@pytest.fixture
def kernel_env(monkeypatch: pytest.MonkeyPatch, runs_dir: Path) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("SELFHEAL_MODEL", "mock")


def test_outside_a_kernel_the_mode_is_none() -> None:
    assert notebook_mode() == "none"


def test_headless_nbclient_fails_fast_or_follows_on_headless(
    kernel_env: None, tmp_path: Path
) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(PRELUDE),
        nbformat.v4.new_code_cell(
            "try:\n"
            "    selfheal.heal(DEMO_SPEC, config=HealConfig(autonomy='review_repairs'))\n"
            "except selfheal.ApprovalRequired as e:\n"
            "    print('APPROVAL-REQUIRED', e.state.status, 'on_headless' in str(e))"
        ),
        nbformat.v4.new_code_cell(
            "r = selfheal.heal(DEMO_SPEC, config=HealConfig(autonomy='review_repairs', "
            "on_headless='approve'))\nprint('RESULT', r.status, [d.kind for d in r.state.decisions])"
        ),
    ]
    # a cell waiting for a click would run into nbclient's per-cell timeout and fail here
    NotebookClient(
        nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outs = ["".join(o.get("text", "") for o in c.outputs) for c in nb.cells]
    assert outs[0].strip() == "MODE headless"
    assert outs[1].strip() == "APPROVAL-REQUIRED awaiting_approval True"
    assert outs[2].strip() == "RESULT verified ['approve']"
    # without a frontend the view is shown as markdown/text: the timeline up to the approval
    shown = [o for o in nb.cells[1].outputs if o.get("output_type") == "display_data"]
    assert len(shown) == 1
    assert "| ● | approval |" in shown[0]["data"]["text/markdown"]
    assert "median: waiting for your approval" in shown[0]["data"]["text/plain"]
    # a finished run leads with its evidence, then the candidates with the chosen one marked
    (final,) = [o for o in nb.cells[2].outputs if o.get("output_type") == "display_data"]
    md = final["data"]["text/markdown"]
    assert "**Evidence:** 2/2 trusted tests pass" in md
    assert "| ✓ | **c5** ▶ | patch | 2 | c1 | 2/2 | 0 |" in md


class Kernel:
    """A real kernel driven like a frontend that can answer (``allow_stdin=True``)."""

    def __init__(self, cwd: Path) -> None:
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=str(cwd))
        self.kc: BlockingKernelClient = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=120)
        self.payloads: list[dict[str, Any]] = []
        """Payloads of every execute_reply so far (``set_next_input``...)."""

    def execute(self, code: str, timeout: float = 240) -> list[dict[str, Any]]:
        msg_id = self.kc.execute(code, allow_stdin=True)
        msgs = []
        deadline = time.monotonic() + timeout
        while True:
            m = self.kc.get_iopub_msg(timeout=max(1.0, deadline - time.monotonic()))
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            msgs.append(m)
            if m["msg_type"] == "error":
                raise AssertionError("\n".join(m["content"]["traceback"]))
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                self.payloads += self._reply(msg_id, timeout)["payload"]
                return msgs

    def _reply(self, msg_id: str, timeout: float) -> dict[str, Any]:
        while True:
            m = self.kc.get_shell_msg(timeout=timeout)
            if m["parent_header"].get("msg_id") == msg_id:
                return dict(m["content"])

    def text(self, code: str, timeout: float = 240) -> str:
        msgs = self.execute(code, timeout)
        return "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream")

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture
def kernel(kernel_env: None, tmp_path: Path) -> Iterator[Kernel]:
    k = Kernel(tmp_path)
    try:
        yield k
    finally:
        k.close()


def test_live_start_returns_a_handle_and_approval_resumes(kernel: Kernel) -> None:
    assert kernel.text(PRELUDE).strip() == "MODE live"
    msgs = kernel.execute(
        "h = selfheal.notebook.start(DEMO_SPEC, config=HealConfig(autonomy='review_repairs'))\n"
        "print(type(h).__name__, h.done())"
    )
    # start() returned a handle to a run still going (not the finished result)
    assert "LiveHeal False" in "".join(
        m["content"].get("text", "") for m in msgs if m["msg_type"] == "stream"
    )
    assert any(m["msg_type"] == "display_data" and WIDGET in m["content"]["data"] for m in msgs)
    # the run goes on while the kernel is idle, until it waits for the human
    deadline = time.monotonic() + 180
    while kernel.text("print(h.status)").strip() != "awaiting_approval":
        assert time.monotonic() < deadline, "the live run never reached its approval"
        time.sleep(0.5)
    assert "still going" in kernel.text(
        "try:\n    h.result()\nexcept selfheal.ConfigError as e:\n    print(e)"
    )
    assert "approval" in kernel.text("print(h.view.header.value)")
    # awaiting a run that waits for a click would hold the kernel forever: it says so instead
    assert "Decide first" in kernel.text(
        "try:\n    await h\nexcept selfheal.ApprovalRequired as e:\n    print(e)", timeout=30
    )
    kernel.execute("h.approve()")
    out = kernel.text("r = await h\nprint(r.status, r.verified, r.function([4, 1, 3, 2]))")
    assert out.strip() == "verified True 2.5"
    assert kernel.text("print(h.code == r.code, h.view.approval_panel.layout.display)").split() == [
        "True",
        "none",
    ]


def test_live_start_asks_its_question_in_the_view_and_the_answer_resumes(kernel: Kernel) -> None:
    # two candidates that pass the example and differ below lo: the run asks which is right
    assert kernel.text(PRELUDE).strip() == "MODE live"
    kernel.execute(
        "from selfheal.llm.mock import MockProvider\n"
        "good = '```python\\ndef clamp(x, lo, hi):\\n    return max(lo, min(x, hi))\\n```'\n"
        "bad = '```python\\ndef clamp(x, lo, hi):\\n    return min(x, hi)\\n```'\n"
        "mock = MockProvider({'generator': [bad, good], 'test_writer': ['```python\\n```']})\n"
        "cfg = HealConfig(autonomy='review_repairs', candidates=2, oracle_calls=0, memory=False,\n"
        "                 first_answer='instruct')\n"
        "h = selfheal.notebook.start('Write a function clamp(x, lo, hi) that returns x limited '\n"
        "    'to the range [lo, hi]. Example: clamp(5, 0, 3) -> 3', provider=mock, config=cfg)"
    )
    deadline = time.monotonic() + 180
    while kernel.text("print(h.asker.waiting)").strip() != "True":
        assert time.monotonic() < deadline, "the live run never asked its question"
        time.sleep(0.5)
    assert kernel.text("print(h.asker.question.call)").strip() == "clamp(-5, 0, 3)"
    shown = kernel.text("print(h.view.question_panel.box.layout.display, h.view.header.value)")
    assert shown.startswith("flex") and "waiting for your answer" in shown
    assert "Decide first" in kernel.text(
        "try:\n    await h\nexcept selfheal.ApprovalRequired as e:\n    print(e)", timeout=30
    )
    kernel.execute("h.answer(selfheal.Pick('0'))")
    out = kernel.text("r = await h\nprint(r.state.questions[0].test_id, r.function(-5, 0, 3))")
    assert out.split() == ["ua1", "0"]


def test_live_full_auto_blocks_and_streams_widget_updates(kernel: Kernel) -> None:
    kernel.execute(PRELUDE)
    msgs = kernel.execute("r = selfheal.heal(DEMO_SPEC)\nprint(type(r).__name__, r.status)")
    out = "".join(m["content"].get("text", "") for m in msgs if m["msg_type"] == "stream")
    assert out.strip() == "HealResult verified"
    updates = [m for m in msgs if m["msg_type"] == "comm_msg"]
    assert len(updates) > 12  # the view changed while the cell was running, node after node


@pytest.mark.parametrize("call", ["await selfheal.aheal", "selfheal.heal"])
def test_heal_in_a_live_kernel_cannot_wait_for_buttons(kernel: Kernel, call: str) -> None:
    """A running (or awaiting) cell holds the kernel: heal() returns a HealResult, never a
    handle, and an approval no approver answers follows on_headless, pointing at start()."""
    kernel.execute(PRELUDE)
    out = kernel.text(
        "try:\n"
        f"    {call}(DEMO_SPEC, config=HealConfig(autonomy='review_repairs'))\n"
        "except selfheal.ApprovalRequired as e:\n"
        "    print('APPROVAL-REQUIRED', 'selfheal.notebook.start' in str(e))\n"
        f"r = {call}(DEMO_SPEC, config=HealConfig(autonomy='review_repairs'), "
        "approver=lambda p, s: selfheal.Approve())\n"
        "print(type(r).__name__, r.status)"
    )
    assert out.split() == ["APPROVAL-REQUIRED", "True", "HealResult", "verified"]


FAILING = '''def mean_of_positive(xs):
    """Mean of the positive numbers in xs; 0.0 if there are none."""
    pos = [x for x in xs if x > 0]
    return sum(pos) / len(pos)

mean_of_positive([-1, -2])'''

FIXED = (
    "```python\ndef mean_of_positive(xs):\n    pos = [x for x in xs if x > 0]\n"
    "    return sum(pos) / len(pos) if pos else 0.0\n```"
)
FIXED_TOO = (
    "```python\ndef mean_of_positive(xs):\n    pos = [x for x in xs if x > 0]\n"
    "    if not pos:\n        return 0.0\n    return sum(pos) / len(pos)\n```"
)


def _answering(kernel: Kernel, code: str, answer: str) -> tuple[list[str], dict[str, Any], str]:
    """Run ``code`` as a frontend that types ``answer`` into every input box: the prompts
    asked, the cell's execute_reply, and the text of its stream outputs."""
    kc = kernel.kc
    msg_id = kc.execute(code, allow_stdin=True)
    prompts: list[str] = []
    deadline = time.monotonic() + 240
    while True:
        assert time.monotonic() < deadline, "the cell never finished"
        try:
            req = kc.get_stdin_msg(timeout=0.2)
        except Exception:  # queue.Empty: nothing asked yet
            req = None
        if req is not None and req["msg_type"] == "input_request":
            prompts.append(req["content"]["prompt"])
            kc.input(answer)
        try:
            reply = kc.get_shell_msg(timeout=0.2)
        except Exception:
            continue
        if reply["parent_header"].get("msg_id") == msg_id:
            return prompts, dict(reply["content"]), _streams(kernel, msg_id, deadline)


def _streams(kernel: Kernel, msg_id: str, deadline: float) -> str:
    """The stream text of the request ``msg_id``, read from iopub until it goes idle."""
    text = []
    while True:
        m = kernel.kc.get_iopub_msg(timeout=max(1.0, deadline - time.monotonic()))
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        if m["msg_type"] == "stream":
            text.append(m["content"]["text"])
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            return "".join(text)


PROMPT = "approve this change?"
"""The approver's question: asked in the input box (stdin), never printed to the cell."""


def test_cell_magic_with_review_asks_in_its_cell_and_offers_the_code_below_it(
    kernel: Kernel,
) -> None:
    """%%selfheal under a review in a live kernel asks in its own cell (an input box) and runs
    to the end there, as %selfheal does: the function is defined and the code cell rides on
    the %%selfheal cell's own execute_reply (it used to come with the reply of whatever cell
    ran after the run ended, and was lost when that cell raised)."""
    kernel.execute(PRELUDE + "\n%load_ext selfheal\n%selfheal_config autonomy=review_repairs")
    prompts, reply, shown = _answering(kernel, f"%%selfheal --name median\n{DEMO_SPEC}", "a")
    assert reply["status"] == "ok"
    assert len(prompts) == 1 and PROMPT in prompts[0]
    # the proposal is printed once, its question only asked (a prompt in the cell's text
    # would show twice in JupyterLab: printed, then in the answered box's line)
    assert shown.count("proposal awaiting approval") == 1 and PROMPT not in shown, shown
    (offered,) = [p for p in reply["payload"] if p.get("source") == "set_next_input"]
    assert offered["replace"] is False and offered["text"].startswith("def median(values):")
    _, later, _ = _answering(kernel, "1 / 0", "a")
    assert later["status"] == "error" and later.get("payload", []) == []
    assert kernel.text("print(median([4, 1, 3, 2]))").strip() == "2.5"
    status = "selfheal.magics.defaults(get_ipython()).last.status"
    assert kernel.text(f"import selfheal.magics\nprint({status})").strip() == "verified"


def test_selfheal_review_asks_in_its_cell_and_offers_the_fix_below_it(kernel: Kernel) -> None:
    """Issue 44: a review of %selfheal is asked in the %selfheal cell (an input box), so its
    own execute_reply carries the fixed cell (JupyterLab and Notebook 7 insert a
    set_next_input cell below the cell whose reply carries it), and a later cell that raises
    gets nothing."""
    kernel.execute(
        PRELUDE + "\n%load_ext selfheal\nimport sys\n"
        f"sys.path.insert(0, {str(REPO / 'tests' / 'notebook')!r})\n"
        "from nb_fakes import InProcessExecutor\nfrom selfheal.llm.mock import MockProvider\n"
        "d = selfheal.magics.defaults(get_ipython())\nd.executor = InProcessExecutor()\n"
        f"d.provider = MockProvider({{'generator': [{FIXED!r}, {FIXED_TOO!r}], 'test_writer': ['```python\\n"
        "assert mean_of_positive([1, 3]) == 2\\n```'], 'debugger': ['{}']}, repeat_last=True)\n"
        "%selfheal_config autonomy=review_all"
    )
    _, reply, _ = _answering(kernel, FAILING, "a")
    assert reply["status"] == "error" and reply["ename"] == "ZeroDivisionError"
    prompts, reply, shown = _answering(kernel, "%selfheal", "a")
    assert reply["status"] == "ok"
    assert len(prompts) == 1 and PROMPT in prompts[0]
    assert shown.count("proposal awaiting approval") == 1 and PROMPT not in shown, shown
    (offered,) = [p for p in reply["payload"] if p.get("source") == "set_next_input"]
    assert offered["replace"] is False
    assert "return sum(pos) / len(pos) if pos else 0.0" in offered["text"]
    assert offered["text"].rstrip().endswith("mean_of_positive([-1, -2])")
    _, later, _ = _answering(kernel, "1 / 0", "a")
    assert later["status"] == "error" and later.get("payload", []) == []
    assert kernel.text("print(mean_of_positive([-1, -2]))").strip() == "0.0"
