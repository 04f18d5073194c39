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


# Packages beside the controllers that hold what they share, not a controller.
SHARED = {"inputs"}


def test_every_controller_package_has_a_register_taking_deps_first() -> None:
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        if init.parent.name in SHARED:
            continue
        module = importlib.import_module(f"karpy.controllers.{init.parent.name}")
        register = getattr(module, "register", None)
        assert callable(register), f"karpy.controllers.{init.parent.name} has no register()"
        assert next(iter(inspect.signature(register).parameters)) == "deps", init.parent.name


def test_the_shared_packages_hold_no_controller() -> None:
    """A shared package (the scheduling inputs) has no reconciler and no register():
    were it to grow one, it would be a controller package and must say so."""
    for name in sorted(SHARED):
        for path in sorted((PACKAGE / name).rglob("*.py")):
            tree = ast.parse(path.read_text())
            reconcilers = [f"{path.name}:{node.name}" for node in ast.walk(tree)
                           if isinstance(node, ast.ClassDef)
                           and any(isinstance(i, ast.AsyncFunctionDef) and i.name == "reconcile"
                                   for i in node.body)]
            assert reconcilers == [], reconcilers
            assert not any(isinstance(n, ast.FunctionDef) and n.name == "register"
                           for n in tree.body), path
