"""The Python packages' layering (docs/architecture.md, "The Python layer"): every module imports
alone in a fresh interpreter; hvd.torch's modules import only the layers below them; no import
sits inside a function to dodge a cycle; and underscore names cross modules only out of
hvd.torch._engine, the one internal module made for it. (It runs as one plain process.)"""

import ast
import os
import pkgutil
import subprocess
import sys

import hvd
import horovod

# Leaf first: a module may import only those before it (and the standard library and torch).
LAYERS = [
    "hvd.exceptions",
    "hvd._capi",
    "hvd.torch.basics",
    "hvd.torch.compression",
    "hvd.torch.process_sets",
    "hvd.torch._engine",
    "hvd.torch.mpi_ops",
    "hvd.torch.functions",
    "hvd.torch.optimizer",
    "hvd.torch.sync_batch_norm",
    "hvd.torch.elastic.sampler",
    "hvd.torch.elastic.common",
    "hvd.torch.elastic.state",
    "hvd.torch.elastic",
    "hvd.torch",
]
SHARED_INTERNAL = "hvd.torch._engine"


def modules():
    found = []
    for package in (hvd, horovod):
        found.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            found.append(info.name)
    return sorted(set(found))


def source_of(name):
    spec = __import__("importlib").util.find_spec(name)
    with open(spec.origin) as f:
        return ast.parse(f.read(), spec.origin)


def hvd_imports(tree):
    """(line, imported module, names, inside a function) for every import of hvd/horovod."""
    out = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                if child.module.split(".")[0] in ("hvd", "horovod"):
                    out.append((child.lineno, child.module, [a.name for a in child.names],
                                in_function))
            elif isinstance(child, ast.Import):
                for a in child.names:
                    if a.name.split(".")[0] in ("hvd", "horovod"):
                        out.append((child.lineno, a.name, [], in_function))
            visit(child, inner)

    visit(tree, False)
    return out


def test_every_module_imports_alone_in_a_fresh_interpreter():
    names = modules()
    assert "hvd.torch.mpi_ops" in names and "horovod.torch" in names, names
    failed = {}
    for name in names:
        r = subprocess.run([sys.executable, "-c", "import " + name], capture_output=True,
                           text=True, timeout=120, env=dict(os.environ))
        if r.returncode != 0:
            failed[name] = r.stderr.strip().splitlines()[-1:]
    assert not failed, failed


def test_hvd_torch_modules_import_only_the_layers_below_and_never_inside_a_function():
    problems = []
    for index, name in enumerate(LAYERS):
        below = LAYERS[:index]
        for line, module, names, in_function in hvd_imports(source_of(name)):
            # `from hvd import _capi` names the module hvd._capi; `from hvd.torch import x` too.
            targets = [module + "." + n for n in names if module + "." + n in LAYERS] or [module]
            if module == "hvd" and names == ["_library"]:
                continue  # written by the build: where libhvd is (optional, read lazily)
            for target in targets:
                if target not in below and target != "hvd":
                    problems.append("%s:%d imports %s, which is not below it" % (name, line,
                                                                                  target))
            if in_function:
                problems.append("%s:%d imports %s inside a function" % (name, line, module))
    assert not problems, problems


def test_underscore_names_cross_modules_only_out_of_the_engine_module():
    problems = []
    for name in LAYERS + ["horovod.torch", "horovod.common.process_sets"]:
        for line, module, names, _ in hvd_imports(source_of(name)):
            private = [n for n in names if n.startswith("_") and module + "." + n not in LAYERS]
            if private and module != SHARED_INTERNAL and not (module == "hvd" and
                                                              private == ["_library"]):
                problems.append("%s:%d imports %s from %s" % (name, line, private, module))
    assert not problems, problems
