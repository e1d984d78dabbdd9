"""Preflight for the sampler: would `--sample N` with this `--floor` be drawn, or refused at
the goldens stage (`sampling.allocate_quotas`: the floors of every stratum exceed N)?

Only an explicit floor can be refused (the default floor is 0 below the number of strata and
1 above it, which always fits), so only then is the upstream file read, and only when it is
on disk already: the bundled sample, a local path, or a Hugging Face file in the cache (one
not yet downloaded is left to the stage). The strata are counted on the whole file; errata in
exclude mode can only lower what the floors need, so a sample this check passes is drawn.

`check_unpinned_records` reads a local file no pin identifies record by record, as the corpus
stage will (strictly, within the size limits): its bad record is then a preflight error, exit
2, before anything is launched. A pinned file (the bundled sample, the pinned Hugging Face
file) is left to the stage, which still refuses a bad record before any wipe.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from eval_pipeline.corpus.convert import iter_questions
from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.corpus.sampling import SampleSpec, allocate_quotas, resolved_floor
from eval_pipeline.corpus.upstream import HF_REPO_ID, UpstreamSpec, _hf_target, resolve_upstream


def _on_disk(upstream: UpstreamSpec) -> Path | None:
    if upstream.source != "huggingface":
        return Path(resolve_upstream(upstream, verify=False).path)
    from huggingface_hub import try_to_load_from_cache

    _, file_name, _ = _hf_target(upstream)
    try:
        cached = try_to_load_from_cache(
            HF_REPO_ID,
            file_name,
            cache_dir=upstream.cache_dir,
            revision=upstream.revision,
            repo_type="dataset",
        )
    except Exception:  # noqa: BLE001 - an unreadable cache is the stage's to report
        return None
    return Path(cached) if isinstance(cached, str) else None


def check_unpinned_records(upstream: UpstreamSpec) -> None:
    """Raise the CorpusError of the first bad record of a local file no pin identifies."""
    if upstream.source != "path":
        return
    resolved = resolve_upstream(upstream, verify=False)
    if resolved.pinned:
        return
    for _ in iter_questions(resolved.path):
        pass


def check_sample_floor(upstream: UpstreamSpec, spec: SampleSpec) -> None:
    """Raise CorpusError (field `sample`, one line naming --sample and --floor) when the draw
    would be refused; return quietly otherwise, or when the file is not on disk yet."""
    if spec.sample is None or not spec.floor:
        return
    path = _on_disk(upstream)
    if path is None:
        return
    sizes = Counter(q.stratum for q in iter_questions(path))
    floor = resolved_floor(spec, len(sizes))
    try:
        allocate_quotas(dict(sizes), spec.sample, floor)
    except CorpusError:
        need = sum(min(floor, n) for n in sizes.values())
        raise CorpusError(
            f"--sample {spec.sample} is below what --floor {floor} needs in {path.name}: "
            f"{need} questions for its {len(sizes)} strata; use --sample {need} or more, "
            "or a lower --floor",
            field="sample",
        ) from None
