"""Import-time placeholders for modules a foreign engine imports but no kernel under test
uses, and that cannot be installed or carried where the worker runs: SGLang's torchvision
(the index's wheel links a CUDA torch) and sgl_kernel (CUDA-only ops some releases import on
CPU), vLLM's compiled op library on a GPU (imported by its CUDA platform module; 92 MB, more
than a device run carries). A placeholder raises ImportError naming the stub the moment
anything is called or instantiated, so a kernel that did use one fails the law's crash check
instead of running on a fake."""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types


def _present(name: str) -> bool:
    """A top-level package counts as present when it is installed; a submodule (an
    extension module of the engine) when it imports: one carried but built for another
    CUDA or torch is as absent as one left out."""
    if name in sys.modules:
        return True
    if "." not in name:
        return importlib.machinery.PathFinder.find_spec(name) is not None
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def stub_package(name: str) -> None:
    """Serve the module `name` (a top-level package or a dotted submodule) and everything
    under it as placeholders, unless it is really there."""
    if _present(name):
        return

    class _Meta(type):
        def __getattr__(cls, attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return cls

    class Placeholder(metaclass=_Meta):
        def __init__(self, *a, **k):
            raise ImportError(f"{name} is a stub in the specdec kernel worker")

        def __call__(self, *a, **k):
            raise ImportError(f"{name} is a stub in the specdec kernel worker")

    class Module(types.ModuleType):
        def __getattr__(self, attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return sys.modules.get(f"{self.__name__}.{attr}", Placeholder)

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname, path=None, target=None):
            if fullname == name or fullname.startswith(name + "."):
                return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
            return None

        def create_module(self, spec):
            mod = Module(spec.name)
            mod.__path__, mod.__version__ = [], "0.0.0+specdec.stub"
            return mod

        def exec_module(self, module):
            pass

    sys.meta_path.insert(0, Finder())
