"""Loads PyTorch's own schedule-checking functions from a PyTorch source tree, unmodified, for a
Python whose installed torch has no torch.distributed.pipelining (Debian's torch 1.13 here).

torch/distributed/pipelining/schedules.py cannot be imported without a torch of its own release
(it imports FSDP, the profiler and the pipeline stage at module level), but the functions that
check a compute-only schedule use only the standard library. So the file is parsed with `ast`,
and exactly the top-level statements that define the wanted names, and the ones those need, are
compiled from PyTorch's syntax tree as they stand (file name and line numbers kept, so a failure
points into PyTorch's file) and executed in a fresh namespace. Nothing is rewritten. A name that
the selected code refers to but that only a torch or package-relative import binds is bound to a
stand-in that raises when used (`stubbed` lists them): it can satisfy a reference, never take part
in a check.
"""
import ast
import builtins
import os

# What PyTorch's own tests (test/distributed/pipelining/test_schedule.py) use to check a
# compute-only schedule: parse each cell, validate the per-stage action order and counts, lower
# to sends and receives (which asserts progress), then dry-run the lowered schedule.
# The last two came with PyTorch 2.5's schedule runtime: an older tree's are None.
REQUIRED = ("_Action", "_ComputationType", "_validate_schedule")
WANTED = REQUIRED + ("_add_send_recv", "_simulate_comms_compute")

SCHEDULES = os.path.join("torch", "distributed", "pipelining", "schedules.py")


def find_schedules_py(source):
    """schedules.py under a PyTorch checkout, a site-packages directory, the pipelining directory,
    or the file itself; None when `source` holds none of these."""
    for candidate in (source, os.path.join(source, "schedules.py"),
                      os.path.join(source, SCHEDULES)):
        if os.path.isfile(candidate) and os.path.basename(candidate) == "schedules.py":
            return candidate
    return None


def pytorch_version(schedules_py):
    """version.txt of the checkout holding schedules_py (e.g. "2.6.0a0"), or None."""
    root = os.path.dirname(os.path.abspath(schedules_py))
    for _ in range(4):  # pipelining -> distributed -> torch -> checkout
        root = os.path.dirname(root)
        path = os.path.join(root, "version.txt")
        if os.path.isfile(path):
            with open(path) as f:
                return f.read().strip()
        version_py = os.path.join(root, "torch", "version.py")  # an installed torch
        if os.path.isfile(version_py):
            with open(version_py) as f:
                for line in f:
                    if line.startswith("__version__"):
                        return line.split("=", 1)[1].strip().strip("'\"")
    return None


class _Unavailable:
    """Stands for a name that only torch provides; any use of it is an error."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        raise RuntimeError(f"{self._name}.{attr} needs a real torch (stand-in from "
                           "pytorch_schedule_source)")

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._name}() needs a real torch (stand-in from "
                           "pytorch_schedule_source)")

    def __getitem__(self, item):  # a subscripted annotation such as List[dist.P2POp]
        raise RuntimeError(f"{self._name}[...] needs a real torch")


def _bound_names(node):
    """Top-level names a module statement binds."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _is_torch_import(node):
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == "torch" for a in node.names)
    return node.level > 0 or (node.module or "").split(".")[0] == "torch"


class PyTorchSchedules:
    """Attributes: the WANTED functions and classes (None for an absent optional one), `path`,
    `version`, `stubbed` (names bound to stand-ins) and `statements` (where each executed
    statement starts in PyTorch's file, and what it binds)."""

    def __init__(self, source):
        path = find_schedules_py(source)
        if path is None:
            raise FileNotFoundError(f"no {SCHEDULES} under {source}")
        self.path = path
        self.version = pytorch_version(path)
        with open(path) as f:
            tree = ast.parse(f.read(), filename=path)

        binders = {}  # name -> indices of the top-level statements that bind it
        for i, node in enumerate(tree.body):
            for name in _bound_names(node):
                binders.setdefault(name, []).append(i)

        selected, stubbed, todo, seen = set(), set(), list(WANTED), set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if name not in binders:
                if name in REQUIRED:
                    raise ImportError(f"{path} defines no {name}")
                continue  # a builtin, a local name of the selected code, or an absent optional
            for i in binders[name]:
                node = tree.body[i]
                if isinstance(node, (ast.Import, ast.ImportFrom)) and _is_torch_import(node):
                    stubbed.add(name)
                    continue
                selected.add(i)
                todo.extend(n.id for n in ast.walk(node) if isinstance(n, ast.Name))

        body = [tree.body[i] for i in sorted(selected)]
        namespace = {"__name__": "torch.distributed.pipelining.schedules",
                     "__file__": path, "__builtins__": builtins}
        for name in stubbed:
            namespace[name] = _Unavailable(name)
        exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), namespace)
        for name in WANTED:
            setattr(self, name, namespace.get(name))
        self.stubbed = sorted(stubbed)
        self.statements = [f"{path}:{node.lineno} {type(node).__name__} "
                           f"{', '.join(sorted(_bound_names(node)))}" for node in body]
