"""Kernel side: pytest's collection of your test module, once per heal (see
``pytest_item.py``), printed as one JSON line. Shipped to the kernel as source (see ``_harness/__init__.py``).
"""

from __future__ import annotations

import sys as _pt_sys
from typing import Any

if __name__ != "__sh_harness__":  # on the host; in the kernel every part shares one namespace
    from selfheal.kernel_sandbox._harness.pytest_item import _PT, _PT_FILE, pt_combos, pt_run


def pt_collect(text: str) -> None:
    """Collect ``text`` with pytest and print the items as one JSON line (see the module
    docstring)."""
    import json
    import os

    pytest = _PT.get("pytest")
    if pytest is None:
        print(
            json.dumps(
                {"errors": ["pytest is not installed in the sandbox's Python: pip install pytest"]}
            )
        )
        return
    import _pytest.skipping as skipping

    candidate = _pt_sys.modules.get("candidate")
    if candidate is not None:  # no candidate yet: any name imported from it is a stand-in
        setattr(candidate, "__getattr__", _PtStandIn)  # noqa: B010 - a module __getattr__
    path = os.path.join(os.getcwd(), _PT_FILE)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    found: dict[str, Any] = {"items": [], "skipped": [], "errors": []}

    class Collector:
        def pytest_collectreport(self, report: Any) -> None:
            if report.failed:
                found["errors"].append(str(report.longreprtext))

        def pytest_collection_finish(self, session: Any) -> None:
            for item in session.items:
                where = item.nodeid.split("::", 1)[-1]
                skip = skipping.evaluate_skip_marks(item)
                xfail = skipping.evaluate_xfail_marks(item)
                if skip is not None or xfail is not None:
                    why = (
                        skip.reason
                        if skip is not None
                        else f"xfail: {getattr(xfail, 'reason', '')}"
                    )
                    found["skipped"].append({"id": where, "reason": why or "marked"})
                    continue
                cs = getattr(item, "callspec", None)
                target = dict(cs.params) if cs is not None else {}
                cls = item.cls
                fn = getattr(cls, item.originalname) if cls is not None else item.obj
                combos = pt_combos(vars(item.module), cls, fn)
                k = next(
                    (
                        i
                        for i, c in enumerate(combos)
                        if len(c) == len(target)
                        and all(c.get(n, c) is v for n, v in target.items())
                    ),
                    None,
                )
                if k is None:
                    found["errors"].append(
                        f"{where}: selfheal cannot reproduce this item's parameters"
                    )
                    continue
                found["items"].append(
                    {
                        "id": where,
                        "cls": cls.__name__ if cls is not None else None,
                        "func": item.originalname,
                        "k": k,
                        "params": {n: _pt_short(v) for n, v in target.items()},
                        "line": (item.location[1] or 0) + 1,
                    }
                )

    # an ini file of its own in the run's folder: pytest looks no further up (a boundary
    # that refuses listing the folders above is then no obstacle)
    ini = os.path.join(os.getcwd(), "pytest.ini")
    with open(ini, "w", encoding="utf-8") as fh:
        fh.write("[pytest]\n")
    saved = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        pytest.main(
            [
                "--collect-only",
                "-qq",
                "-s",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:faulthandler",
                "-p",
                "no:stepwise",
                "-c",
                ini,
                "--rootdir",
                os.getcwd(),
                "--confcutdir",
                os.getcwd(),
                "--assert=plain",
                "-W",
                "ignore",
                "--color=no",
                "--tb=short",
                path,
            ],
            plugins=[Collector()],
        )
    finally:
        if saved is None:
            os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = saved
        _pt_sys.modules.pop(_PT_FILE[:-3], None)
    print("\n__selfheal_collected__ " + json.dumps(found))


class _PtStandIn:
    """What ``from candidate import name`` gives at collection, before any candidate."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{self.name} was called while your tests were collected")


def _pt_short(v: Any) -> str:
    try:
        r = repr(v)
    except Exception:
        r = f"<{type(v).__name__}>"
    return r if len(r) <= 80 else r[:77] + "..."


def pytest_item(op: str, *args: Any) -> None:
    """The helper tests call as ``__sh_pytest__``: ``("collect", text)`` or ``("run", names,
    cls, func, k)``."""
    if op == "collect":
        pt_collect(*args)
    else:
        pt_run(*args)
