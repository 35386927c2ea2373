"""`python -m harness foreign pack vllm==0.33.0 --out F.tar.gz` and `foreign unpack F.tar.gz`:
carry an installed release to a machine that cannot download (the GPU device: at most 64 MiB
a run). The pack holds only what the kernel laws load: the worker runs every kernel law
once, then lists the files of the modules it imported from the install folder (Python
sources, the extension modules of side packages), plus every *.dist-info (versions,
metadata). numpy stays out: it is the CPU interpreter's pin, and the GPU machine's own
numpy serves compiled Triton. Kernels a law reaches lazily on a GPU only (a CUDA-only
branch: vLLM's platform module on a CUDA machine) are not in it unless `--all-sources` adds
every Python source of the engine's own package (not its extension modules); a side
package imported there only is named by the worker (ForeignImportError). The pack is
xz-compressed when its name ends in .xz.

`--python 3.12`: the target machine's Python, when it is not this one's. The same release
and side packages (the versions this folder resolved) are installed again for that
interpreter (`pip --python-version --only-binary`), and the pack takes the same files from
there, an extension module by its module name (its ABI tag differs)."""
from __future__ import annotations

import json
import tarfile
from pathlib import Path

from harness.adapters.foreign import install as inst

# numpy: the CPU interpreter's pin. scipy: transformers (the device's) imports it only when
# it is there (optional), and it is a quarter of a vLLM pack.
SKIP = ("numpy/", "numpy.libs/", "numpy-", "scipy/", "scipy.libs/", "scipy-")
# What the GPU machine brings itself (torch, Triton, transformers and what they pull in,
# the test tools): the pack never carries these.
DEVICE_HAS = {"torch", "triton", "numpy", "transformers", "tokenizers", "huggingface_hub",
              "safetensors", "regex", "requests", "urllib3", "certifi", "charset_normalizer",
              "idna", "yaml", "tqdm", "filelock", "packaging", "fsspec", "jinja2", "markupsafe",
              "sympy", "mpmath", "networkx", "typing_extensions", "setuptools",
              "pkg_resources", "_distutils_hack", "hypothesis", "pytest", "_pytest", "pluggy",
              "xdist", "execnet", "matplotlib", "PIL", "specdec", "harness", "kernels",
              "faultpoints", "cases", "sortedcontainers", "attr", "attrs", "iniconfig",
              "hf_xet", "functorch", "torchgen"}
# Linux x86-64 wheels of any glibc from 2.17 (manylinux2014) to 2.39.
PLATFORMS = [a for g in range(17, 40) for a in ("--platform", f"manylinux_2_{g}_x86_64")] + [
    "--platform", "manylinux2014_x86_64", "--platform", "linux_x86_64"]


def _outside_dists(modules: list[str]) -> list[str]:
    """name==version of the distributions (of this environment) behind the loaded top-level
    modules that came from outside the install folder, but for what the device has."""
    from importlib.metadata import packages_distributions, version
    dists = packages_distributions()
    return sorted({f"{d}=={version(d)}" for m in modules if m not in DEVICE_HAS
                   for d in dists.get(m, [])})


def _loaded_from(folder: Path, modules: set[str]) -> set[str]:
    """Every file of the given top-level packages (or modules) in `folder`."""
    out = set()
    for m in modules:
        for p in [folder / m, *folder.glob(f"{m}.*")]:
            paths = p.rglob("*") if p.is_dir() else [p]
            out |= {str(q.relative_to(folder)) for q in paths
                    if q.is_file() and "__pycache__" not in q.parts}
    return out


def _for_python(folder: Path, *, dist: str, version: str, python: str, log,
                extra: list[str] = ()) -> Path:
    """The release, the side packages `folder` resolved and `extra` (what this environment
    served the worker), installed for another Python."""
    import subprocess
    import sys
    other = folder.with_name(f"{folder.name}-py{python}")
    if (other / inst.MARKER).exists():
        return other
    lock = [p for p in json.loads((folder / inst.MARKER).read_text()).get("side_packages", [])
            if not p.lower().startswith("numpy==")]
    lock += [e for e in extra if e.split("==")[0].lower() not in {x.split("==")[0].lower()
                                                                  for x in lock}]
    log(f"installing {dist}=={version} and {len(lock)} side packages for Python {python}")
    for req in [f"{dist}=={version}", *lock]:
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(other),
               "--python-version", python, "--implementation", "cp", *PLATFORMS, req]
        binary = pip[:5] + ["--only-binary=:all:"] + pip[5:]
        done = subprocess.run(binary, capture_output=True, text=True)
        if done.returncode and req != f"{dist}=={version}":
            # No wheel of this version for that Python: the newest that has one.
            done = subprocess.run(binary[:-1] + [req.split("==")[0]], capture_output=True,
                                  text=True)
        if done.returncode:  # a pure-Python package published as a source archive only
            done = subprocess.run(pip, capture_output=True, text=True)
        if done.returncode and req == f"{dist}=={version}":
            raise ValueError(f"{req} for Python {python}: {done.stderr.strip()[-300:]}")
        if done.returncode:  # the worker names it on the target if it was needed
            log(f"  {req}: no wheel for Python {python}; left out")
    (other / inst.MARKER).write_text(json.dumps({"dist": dist, "version": version,
                                                 "python": python}))
    return other


def _same_files(files: set[str], folder: Path) -> set[str]:
    """`files` (paths of another folder) as they are named in `folder`: sources as they are,
    extension modules by module name whatever their ABI tag."""
    out = set()
    for f in files:
        if (folder / f).exists():
            out.add(f)
        elif f.endswith(".so"):
            stem = Path(f).name.split(".")[0]
            out |= {str(p.relative_to(folder)) for p in (folder / f).parent.glob(f"{stem}.*so")}
    return out


def _sources(package: Path, folder: Path) -> set[str]:
    """The engine package's files but its binaries (extension modules, executables) and
    vendored third-party trees: Python sources, and the data its import reads (SGLang's JIT
    include/ and csrc/ folders must exist when sglang.kernels.jit is imported)."""
    return {str(p.relative_to(folder)) for p in package.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and "third_party" not in p.parts
            and ".so" not in p.suffixes and p.suffix}


def _jit_side(adapter_cls, folder: Path, log) -> set[str]:
    """What the engine's CUDA JIT kernels build from that no import names (JIT_SIDE: package
    -> the files kept, JIT_DIRS: folders that must exist), installed at the engine's own
    pinned version into the folder's JIT_SIDE_DIR, out of the import path (the adapter points
    the build at it); folders are returned with a trailing "/" (carried empty)."""
    side = getattr(adapter_cls, "JIT_SIDE", {})
    where = folder / getattr(adapter_cls, "JIT_SIDE_DIR", "_jit_side")
    reqs = inst._requirements(folder, adapter_cls.DIST)
    out = set()
    for dist, keep in side.items():
        req = inst._side_requirement(dist, reqs)
        if inst._pip(where, req).returncode:
            log(f"  {req}: could not be installed; the JIT kernels will say what is missing")
            continue
        for prefix in keep:
            base = where / prefix
            paths = base.rglob("*") if prefix.endswith("/") else [base]
            out |= {str(p.relative_to(folder)) for p in paths
                    if p.is_file() and "__pycache__" not in p.parts}
    return out | {str((where / d).relative_to(folder)) + "/"
                  for d in getattr(adapter_cls, "JIT_DIRS", ()) if (where / d).is_dir()}


def pack(adapter_cls, *, version: str, out: str, exercise, log=print,
         python: str | None = None, all_sources: bool = False) -> Path:
    """`exercise(kernels)` runs the laws over the release's worker once, so that every
    module a component loads lazily is imported (harness/runners/kernel_suite.py)."""
    from harness.adapters.foreign.remote import RemoteKernels
    folder = inst.install(adapter_cls, version, "cpu", log)
    kernels = RemoteKernels(adapter_cls.name, target=adapter_cls.TARGET, paths=[str(folder)],
                            device="cpu",
                            env=adapter_cls.ENV, release=version)
    exercise(kernels)
    loaded = kernels.call("loaded_files", str(folder))
    kernels.close()
    files = set(loaded["inside"])
    if python:
        folder = _for_python(folder, dist=adapter_cls.DIST, version=version, python=python, log=log,
                             extra=_outside_dists(loaded["outside"]))
        files = _same_files(files, folder)
        files |= _loaded_from(folder, set(loaded["outside"]) - DEVICE_HAS)
    files |= {str(p.relative_to(folder)) for info in folder.glob("*.dist-info")
              for p in info.rglob("*") if p.is_file()}
    # Shared libraries that wheels vendor beside their extension modules (auditwheel's
    # <dist>.libs, e.g. pyzmq.libs): loaded by the dynamic linker, so no module trace names them.
    files |= {str(p.relative_to(folder)) for libs in folder.glob("*.libs")
              for p in libs.rglob("*") if p.is_file()}
    if all_sources:
        files |= _sources(folder / adapter_cls.DIST, folder)
        # A side package the trace saw is carried whole: a shared library it opens through
        # ctypes (tvm_ffi's lib/libtvm_ffi.so) is no module, so no trace names it.
        tops = {f.split("/")[0] for f in files if "/" in f and not f.startswith(
            (adapter_cls.DIST + "/",)) and ".dist-info/" not in f}
        files |= _loaded_from(folder, tops)
        files |= _jit_side(adapter_cls, folder, log)
    files = sorted(f for f in files if not f.startswith(SKIP))
    with tarfile.open(out, "w:xz" if out.endswith(".xz") else "w:gz") as tar:
        for f in files:  # a folder (trailing "/") goes in empty
            tar.add(folder / f, arcname=f"{adapter_cls.DIST}-{version}/{f.rstrip('/')}",
                    recursive=not f.endswith("/"))
    log(f"{out}: {len(files)} files, {Path(out).stat().st_size / 2**20:.1f} MiB")
    return Path(out)


def unpack(path: str, log=print) -> Path:
    """Into $SPECDEC_FOREIGN_DIR; marks the release installed."""
    root = inst.cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path) as tar:
        names = {m.name.split("/")[0] for m in tar.getmembers()}
        if len(names) != 1:
            raise ValueError(f"{path}: expected one release folder, found {sorted(names)}")
        tar.extractall(root, filter="data")
    folder = root / names.pop()
    dist, _, version = folder.name.partition("-")
    (folder / inst.MARKER).write_text(json.dumps({"dist": dist, "version": version,
                                                  "packed": True}))
    log(f"unpacked {dist}=={version} into {folder}")
    return folder
