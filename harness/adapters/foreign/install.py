"""`python -m harness foreign install vllm==0.33.0`: a foreign engine's released wheel and the
side packages its speculative kernels import, in a cache folder of its own.

- The wheel goes in with `--no-deps`: vLLM and SGLang pin a torch (and CUDA wheels) that
  must never replace the user's. The harness's torch and Triton serve their kernels.
- Side packages are resolved from the import graph, not the wheel's full requirement list
  (which pulls GPU-only packages by the gigabyte): the worker imports the adapter's modules,
  and each missing module is installed (`--no-deps`, at the version range the engine's own
  metadata asks for, where it names one), until the import succeeds. A lock file
  (harness/adapters/foreign/locks/<dist>-<version>.txt), where one is committed, installs the known
  set in one pip call first; a release without one starts from the nearest older lock.
- On CPU with Triton 3.6, numpy below 2.4 goes in the folder too: numpy 2.4 breaks the
  Triton 3.6 interpreter on loops over a loaded scalar (Triton issue #9171).
- This environment never breaks a release: a requirement of the engine (or, in turn, of a
  package in its folder) that this environment has at a version outside the engine's range
  goes into the folder at that range first (`mismatched`): sglang 0.5.16's transformers pin,
  where the user's transformers 5.24 registers a config name the release registers too.
- A checkout (`NAME@PATH`, source.py) is served the same way over a side folder of its own
  (`serve_checkout`), its files imported from where they are.
The folder: $SPECDEC_FOREIGN_DIR/<dist>-<version>, by default ~/.cache/specdec/foreign."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

MARKER = ".specdec-install.json"
MAX_ROUNDS = 80
LOCKS = Path(__file__).with_name("locks")
# Import name -> distribution, where they differ.
MODULE_DISTS = {
    "zmq": "pyzmq", "yaml": "PyYAML", "google": "protobuf", "PIL": "pillow",
    "cv2": "opencv-python-headless", "huggingface_hub": "huggingface-hub",
    "dateutil": "python-dateutil", "sklearn": "scikit-learn", "attr": "attrs",
    "jwt": "PyJWT", "pkg_resources": "setuptools", "openai_harmony": "openai-harmony",
    "multipart": "python-multipart", "dotenv": "python-dotenv", "tvm_ffi": "apache-tvm-ffi",
    "grpc": "grpcio", "sgl_kernel": "sglang-kernel", "cpuinfo": "py-cpuinfo",
    "pythonjsonlogger": "python-json-logger", "opentelemetry": "opentelemetry-api",
    "typing_inspection": "typing-inspection", "annotated_types": "annotated-types",
    "pydantic_core": "pydantic-core", "rpds": "rpds-py", "email_validator": "email-validator",
    "importlib_metadata": "importlib-metadata", "jsonschema_specifications":
    "jsonschema-specifications", "charset_normalizer": "charset-normalizer",
    "typing_extensions": "typing-extensions", "mistral_common": "mistral-common",
    "compressed_tensors": "compressed-tensors", "partial_json_parser": "partial-json-parser",
    "lm_format_enforcer": "lm-format-enforcer", "outlines_core": "outlines-core",
    "prometheus_fastapi_instrumentator": "prometheus-fastapi-instrumentator",
}


def cache_root() -> Path:
    return Path(os.environ.get("SPECDEC_FOREIGN_DIR")
                or Path.home() / ".cache" / "specdec" / "foreign")


def site_dir(dist: str, version: str) -> Path:
    return cache_root() / f"{dist}-{version}"


def installed(dist: str, version: str) -> dict | None:
    marker = site_dir(dist, version) / MARKER
    return json.loads(marker.read_text()) if marker.exists() else None


def _pip(target: Path, *reqs: str) -> subprocess.CompletedProcess:
    """`reqs` into `target`, replacing a version already there. pip --target keeps an existing
    top-level folder without --upgrade (the old package's files stay, under the new one's
    dist-info) and replaces it whole with it, bin/ included: the other packages' scripts are
    put back, and the old version's dist-info removed."""
    before = {info.name for info in target.glob("*.dist-info")}
    bin_dir, kept = target / "bin", target.parent / f".{target.name}.bin"
    if bin_dir.is_dir():
        shutil.copytree(bin_dir, kept, dirs_exist_ok=True)
    # --no-compile: byte-compiling every file (transformers' thousands) is most of an
    # install's time; the worker compiles what it imports.
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--upgrade", "--no-compile", "--disable-pip-version-check",
                           "--target", str(target), *reqs], capture_output=True, text=True)
    if kept.is_dir():
        bin_dir.mkdir(exist_ok=True)
        for script in kept.iterdir():
            if not (bin_dir / script.name).exists():
                shutil.move(str(script), bin_dir / script.name)
        shutil.rmtree(kept)
    new = {_canonical(n) for n in {i.name for i in target.glob("*.dist-info")} - before}
    for name in before:
        if _canonical(name) in new:
            shutil.rmtree(target / name, ignore_errors=True)
    return done


def _canonical(dist_info: str) -> str:
    from packaging.utils import canonicalize_name
    return canonicalize_name(dist_info.partition("-")[0])


def _requirements(target: Path, dist: str) -> dict[str, str]:
    """canonical name -> requirement string, from the engine wheel's own metadata (extras and
    markers that do not hold here dropped: the version range is what matters)."""
    out = {}
    for meta in target.glob(f"{dist}-*.dist-info/METADATA"):
        out.update(_metadata_requirements(meta))
    return out


def _side_requirement(module: str, reqs: dict[str, str]) -> str:
    from packaging.utils import canonicalize_name
    name = MODULE_DISTS.get(module, module)
    return reqs.get(canonicalize_name(name), name)


def _needs_old_numpy(device: str) -> bool:
    import numpy
    import triton
    old_triton = tuple(int(x) for x in re.findall(r"\d+", triton.__version__)[:2]) <= (3, 6)
    return device == "cpu" and old_triton and tuple(
        int(x) for x in numpy.__version__.split(".")[:2]) >= (2, 4)


def install(adapter_cls, version: str, device: str = "cpu", log=print) -> Path:
    """Install `adapter_cls.DIST==version` and resolve its side packages; returns the folder.
    Raises ForeignImportError naming the module when the import graph cannot be served.
    One installer at a time per release (pytest -n auto's workers); the others wait, then
    find it installed."""
    import fcntl
    dist = adapter_cls.DIST
    target = site_dir(dist, version)
    if installed(dist, version):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{dist}-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed(dist, version):
            return target
        if target.exists():  # an install stopped half-way: pip --target replaces nothing
            shutil.rmtree(target)
        target.mkdir()
        return _install(adapter_cls, version, target, device, log)


def _install(adapter_cls, version: str, target: Path, device: str, log) -> Path:
    dist = adapter_cls.DIST
    log(f"installing {dist}=={version} into {target} (--no-deps)")
    done = _pip(target, f"{dist}=={version}")
    if done.returncode:
        raise ValueError(f"{dist}=={version}: pip could not install it: "
                         f"{done.stderr.strip().splitlines()[-1:]}")
    reqs = _requirements(target, dist)
    _seed(adapter_cls, target=target, version=version, device=device, reqs=reqs, log=log)
    try:
        resolve(adapter_cls, paths=[str(target)], target=target, reqs=reqs, release=version,
                device=device, log=log).close()
    finally:
        # The next release's starting set (_lock_for), even from a release that could not
        # be served: a sweep goes release by release, and neighbours import nearly the same.
        learned = cache_root() / "locks" / f"{dist}-{version}.txt"
        learned.parent.mkdir(parents=True, exist_ok=True)
        learned.write_text("\n".join(p for p in _frozen(target, dist)
                                     if not p.lower().startswith("numpy==")) + "\n")
    (target / MARKER).write_text(json.dumps({"dist": dist, "version": version,
                                             "side_packages": _frozen(target, dist)}, indent=1))
    return target


def serve_checkout(adapter_cls, source, device: str = "cpu", log=print):
    """A worker over the checkout at `source.root` (source.py), its side packages resolved
    into a folder of their own (keyed by the checkout's path) as a release's are: the
    checkout's requirements (its pyproject.toml, or an unpacked release's metadata), the
    lock of its version or else of the newest pinned release, then whatever its import graph
    still misses. The checkout's own files are imported as they are on disk."""
    import fcntl
    from harness.adapters.foreign.source import checkout_key
    target = site_dir(adapter_cls.DIST, checkout_key(source))
    target.mkdir(parents=True, exist_ok=True)
    root = Path(source.root)
    reqs = _requirements(root, adapter_cls.DIST) or _pyproject_requirements(root)
    # One resolver at a time per folder (pytest -n auto starts a worker per xdist process);
    # the others wait, then find the folder complete.
    with open(target / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / MARKER).exists():
            _seed(adapter_cls, target=target,
                  version=_checkout_version(root, adapter_cls.DIST), device=device, reqs=reqs,
                  log=log)
            (target / MARKER).write_text(json.dumps({"dist": adapter_cls.DIST,
                                                     "checkout": source.spec}, indent=1))
        return resolve(adapter_cls, paths=[str(root), str(target)], target=target, reqs=reqs,
                       release=source.spec, device=device, log=log)


def _seed(adapter_cls, *, target: Path, version: str, device: str, reqs: dict, log) -> None:
    """What goes into the folder before the import graph is tried: numpy below 2.4 where the
    Triton 3.6 interpreter needs it, the committed lock of this version (else the nearest
    older release's, or the newest pinned release's for a checkout: _lock_for), and every requirement that this environment has at a
    version the engine does not accept (its transformers, say): the user's packages never
    break a release."""
    seeds = ["numpy<2.4"] if _needs_old_numpy(device) else []
    lock = _lock_for(adapter_cls, version, released=bool(_requirements(target, adapter_cls.DIST)))
    if lock.exists():
        seeds += [ln.strip() for ln in lock.read_text().splitlines()
                  if ln.strip() and not ln.startswith("#")]
    if seeds:
        _pip(target, *seeds)
    for _ in range(8):  # a pinned package's own pins, in turn (transformers -> tokenizers)
        wrong = mismatched(reqs, target, adapter_cls.NEVER_INSTALL)
        for name, _, info in _dist_infos(target):
            if name.lower() != adapter_cls.DIST:
                wrong += mismatched(_metadata_requirements(info / "METADATA"), target,
                                    adapter_cls.NEVER_INSTALL)
        wrong = sorted(set(wrong))
        if not wrong:
            return
        log(f"  {adapter_cls.DIST}: this environment's versions are not the engine's: "
            f"installing {', '.join(wrong)} into its folder")
        if _pip(target, *wrong).returncode:
            raise ValueError(f"{adapter_cls.DIST}: pip could not install {wrong} into {target}")


def _lock_for(adapter_cls, version: str, *, released: bool) -> Path:
    """This version's committed lock; a release without one starts from the nearest older
    release's, committed or learned by an earlier install here (its import graph resolves
    what differs, and `mismatched` re-pins what the release's own metadata asks otherwise); a
    checkout without one, from the newest pinned release's."""
    from harness.adapters.foreign.releases import nearest_older
    prefix = f"{adapter_cls.DIST}-"
    own = LOCKS / f"{prefix}{version}.txt"
    if own.exists():
        return own
    if not released:
        return LOCKS / f"{prefix}{adapter_cls.SUPPORTED[-1]}.txt"
    known = {p.stem[len(prefix):]: p for folder in (LOCKS, cache_root() / "locks")
             for p in sorted(folder.glob(f"{prefix}*.txt"))}
    near = nearest_older(version, list(known))
    return known[near] if near else own


def resolve(adapter_cls, *, paths: list[str], target: Path, reqs: dict, release: str,
            device: str, log):
    """Start the worker until its import graph is served: each module it misses is installed
    into `target` (at the engine's own version range where it names one); the live worker."""
    from harness.adapters.foreign.remote import ForeignImportError, RemoteKernels
    added = []
    for _ in range(MAX_ROUNDS):
        try:
            return RemoteKernels(adapter_cls.name, target=adapter_cls.TARGET, paths=paths,
                                 device=device, env=adapter_cls.ENV, release=release)
        except ForeignImportError as exc:
            module = (exc.module or "").split(".")[0]
            if not module or module in added or module in adapter_cls.NEVER_INSTALL:
                raise
            req = _side_requirement(module, reqs)
            log(f"  {adapter_cls.DIST}@{release} imports {module}: installing {req}")
            if _pip(target, req).returncode:
                raise
            added.append(module)
    raise ForeignImportError(f"{adapter_cls.DIST}@{release}: still missing modules after "
                             f"{MAX_ROUNDS} side packages")


def mismatched(reqs: dict[str, str], target: Path, never) -> list[str]:
    """The requirements (canonical name -> `name<spec>`) that what the worker would import
    (the folder's copy, else this environment's) does not meet; those neither present (the
    import graph resolves them if it needs them) nor `never` (torch, Triton, the engine)."""
    from importlib.metadata import PackageNotFoundError, version
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    skip = {canonicalize_name(MODULE_DISTS.get(n, n)) for n in never} | {
        canonicalize_name(n) for n in never}
    here = {canonicalize_name(name): ver for name, ver, _ in _dist_infos(target)}
    out = []
    for name, text in reqs.items():
        req = Requirement(text)
        if name in skip or not req.specifier:
            continue
        have = here.get(name)
        if have is None:
            try:
                have = version(name)
            except PackageNotFoundError:
                continue
        if not req.specifier.contains(have, prereleases=True):
            out.append(text)
    return out


def _parse_requirements(texts) -> dict[str, str]:
    """canonical name -> `name<specifier>` of each requirement text that applies here
    (extras and markers that do not hold dropped: the version range is what matters)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    out = {}
    for text in texts:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is not None and ("extra" in str(req.marker) or not req.marker.evaluate()):
            continue
        out.setdefault(canonicalize_name(req.name), f"{req.name}{req.specifier}")
    return out


def _metadata_requirements(meta: Path) -> dict[str, str]:
    if not meta.exists():
        return {}
    return _parse_requirements(line.split(":", 1)[1].strip()
                               for line in meta.read_text(errors="replace").splitlines()
                               if line.startswith("Requires-Dist:"))


def _pyproject_requirements(root: Path) -> dict[str, str]:
    """A checkout's [project] dependencies (pyproject.toml at the import root or above it)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: pip's vendored copy of the same parser
        from pip._vendor import tomli as tomllib
    for folder in (root, root.parent):
        path = folder / "pyproject.toml"
        if path.exists():
            return _parse_requirements(
                tomllib.loads(path.read_text()).get("project", {}).get("dependencies", []))
    return {}


def _dist_infos(target: Path) -> list[tuple[str, str, Path]]:
    """(name, version, folder) of each installed distribution in `target`, by name."""
    out = []
    for info in sorted(target.glob("*.dist-info")):
        name, _, ver = info.name[:-len(".dist-info")].partition("-")
        out.append((name, ver, info))
    return out


def _checkout_version(root: Path, dist: str) -> str:
    """The checkout's version as its package spells it (version.py's __version__), or ""."""
    for name in ("version.py", "_version.py"):
        path = root / dist / name
        if path.exists():
            found = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", path.read_text())
            if found:
                return found.group(1)
    return ""


def _frozen(target: Path, dist: str) -> list[str]:
    """name==version of every package in the folder but the engine itself."""
    return [f"{name}=={ver}" for name, ver, _ in _dist_infos(target)
            if name.lower() != dist.lower()]
