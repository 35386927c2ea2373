"""`python -m harness foreign install vllm==0.33.0`: a foreign engine's released wheel and the
side packages its speculative kernels import, in a cache folder of its own.

- The wheel goes in with `--no-deps`: vLLM and SGLang pin a torch (and CUDA wheels) that
  must never replace the user's. The harness's torch and Triton serve their kernels.
- Side packages are resolved from the import graph, not the wheel's full requirement list
  (which pulls GPU-only packages by the gigabyte): the worker imports the adapter's modules,
  and each missing module is installed (`--no-deps`, at the version range the engine's own
  metadata asks for, where it names one), until the import succeeds. A lock file
  (harness/adapters/foreign/locks/<dist>-<version>.txt), where one is committed, installs the known
  set in one pip call first.
- On CPU with Triton 3.6, numpy below 2.4 goes in the folder too: numpy 2.4 breaks the
  Triton 3.6 interpreter on loops over a loaded scalar (Triton issue #9171).
The folder: $SPECDEC_FOREIGN_DIR/<dist>-<version>, by default ~/.cache/specdec/foreign."""
from __future__ import annotations

import json
import os
import re
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
    return subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--disable-pip-version-check", "--target", str(target), *reqs],
                          capture_output=True, text=True)


def _requirements(target: Path, dist: str) -> dict[str, str]:
    """canonical name -> requirement string, from the engine wheel's own metadata (markers
    dropped: the version range is what matters)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    out = {}
    for meta in target.glob(f"{dist}-*.dist-info/METADATA"):
        for line in meta.read_text(errors="replace").splitlines():
            if not line.startswith("Requires-Dist:"):
                continue
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is not None and "extra" in str(req.marker):
                continue
            out.setdefault(canonicalize_name(req.name), f"{req.name}{req.specifier}")
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
    Raises ForeignImportError naming the module when the import graph cannot be served."""
    from harness.adapters.foreign.remote import ForeignImportError, RemoteKernels
    dist = adapter_cls.DIST
    target = site_dir(dist, version)
    if installed(dist, version):
        return target
    target.mkdir(parents=True, exist_ok=True)
    log(f"installing {dist}=={version} into {target} (--no-deps)")
    done = _pip(target, f"{dist}=={version}")
    if done.returncode:
        raise ValueError(f"{dist}=={version}: pip could not install it: "
                         f"{done.stderr.strip().splitlines()[-1:]}")
    seeds = ["numpy<2.4"] if _needs_old_numpy(device) else []
    lock = LOCKS / f"{dist}-{version}.txt"
    if lock.exists():
        seeds += [ln.strip() for ln in lock.read_text().splitlines()
                  if ln.strip() and not ln.startswith("#")]
    if seeds:
        _pip(target, *seeds)
    reqs, added = _requirements(target, dist), []
    for _ in range(MAX_ROUNDS):
        try:
            RemoteKernels(adapter_cls.name, target=adapter_cls.TARGET, site_dir=str(target),
                          device=device,
                          env=adapter_cls.ENV, release=version).close()
            break
        except ForeignImportError as exc:
            module = (exc.module or "").split(".")[0]
            if not module or module in added or module in adapter_cls.NEVER_INSTALL:
                raise
            req = _side_requirement(module, reqs)
            log(f"  {dist}=={version} imports {module}: installing {req}")
            if _pip(target, req).returncode:
                raise
            added.append(module)
    else:
        raise ForeignImportError(f"{dist}=={version}: still missing modules after "
                                 f"{MAX_ROUNDS} side packages")
    (target / MARKER).write_text(json.dumps({"dist": dist, "version": version,
                                             "side_packages": _frozen(target, dist)}, indent=1))
    return target


def _frozen(target: Path, dist: str) -> list[str]:
    """name==version of every package in the folder but the engine itself."""
    out = []
    for info in sorted(target.glob("*.dist-info")):
        name, _, ver = info.name[:-len(".dist-info")].partition("-")
        if name.lower() != dist.lower():
            out.append(f"{name}=={ver}")
    return out
