"""karpy.runtime imports nothing else from karpy, and its error tree is documented.
(Its exact surface is pinned to docs/runtime.md by tests/test_public_surface.py.)"""

from __future__ import annotations

import subprocess
import sys


def test_runtime_imports_nothing_else_from_karpy() -> None:
    code = (
        "import sys, karpy.runtime, karpy.runtime.testing;"
        "print(sorted(m for m in sys.modules if m.startswith('karpy.')"
        " and not m.startswith('karpy.runtime')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"


def test_errors_module_exports_its_tree() -> None:
    from karpy.runtime import errors

    assert issubclass(errors.AlreadyExists, errors.Conflict)
    assert issubclass(errors.RequestTimeout, errors.TransportError)
    assert issubclass(errors.ServiceUnavailable, errors.ServerError)
    for name in errors.__all__:
        assert getattr(errors, name).__doc__
