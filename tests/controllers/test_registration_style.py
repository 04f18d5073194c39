"""One way to register a controller (docs/design.md, "How a controller is wired"): each
controller package's ``register(deps)`` builds its controllers and declares their
watches with the manager's builder, as docs/runtime.md's example does; a controller
class only reconciles and never registers itself."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import karpy.controllers as controllers

PACKAGE = Path(controllers.__file__).parent


def test_no_controller_class_registers_itself() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                found += [f"{path.relative_to(PACKAGE)}:{node.name}.{item.name}"
                          for item in node.body
                          if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                          and item.name == "register"]
    assert found == []


def test_every_controller_package_has_a_register_taking_deps_first() -> None:
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        module = importlib.import_module(f"karpy.controllers.{init.parent.name}")
        register = getattr(module, "register", None)
        assert callable(register), f"karpy.controllers.{init.parent.name} has no register()"
        assert next(iter(inspect.signature(register).parameters)) == "deps", init.parent.name
