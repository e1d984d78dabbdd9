"""Scoring stage: deterministic metrics and statistics, plain Python (no Dagster here).

- `retrieval_metrics`: recall_any@k, recall_all@k, NDCG@k, turn and session level, upstream
  and all-evidence variants;
- `tokens`: payload tokens with a pinned, offline tiktoken encoding;
- `answer_proxy`: offline answer proxies (containment, token F1), not a judge;
- `stats`: rates, bootstrap confidence intervals, exact McNemar, medians.
"""

from eval_pipeline.score.answer_proxy import answer_proxies
from eval_pipeline.score.retrieval_metrics import exclusion_set, question_metrics
from eval_pipeline.score.stats import bootstrap_ci, mcnemar_exact, mcnemar_paired, median, rate
from eval_pipeline.score.tokens import PINNED_BPE_SHA256, PayloadTokenizer

__all__ = [
    "PINNED_BPE_SHA256",
    "PayloadTokenizer",
    "answer_proxies",
    "bootstrap_ci",
    "exclusion_set",
    "mcnemar_exact",
    "mcnemar_paired",
    "median",
    "question_metrics",
    "rate",
]
