"""One LLM layer for every role: reconciler, retrieval_agent, reader, judge.

Modules, by what they hold:
  config          role/provider settings and the CLI form PROVIDER:MODEL[@BASE_URL]
  layer           LLMLayer and RoleClient: cache → limits → timeout → retries → repair → ledger
  providers       OpenAI / Anthropic SDK adapters, and error classification
  structured      JSON-schema instructions, validation, the one repair message
  cache           content-addressed SQLite response cache
  accounting      per-role counters and the serialisable UsageSnapshot
  prices          the pinned price table
  credentials     keys from the environment only; redaction of logs and errors
  deepeval_env    deepeval hardening and the Confident-upload refusal
  deepeval_adapter  DeepEvalBaseLLM on this layer (imports deepeval; not imported here)
"""

from eval_pipeline.llm.accounting import RoleUsage, UsageSnapshot
from eval_pipeline.llm.config import (
    ROLE_NAMES,
    LLMSettings,
    ProviderSpec,
    RetryPolicy,
    RoleConfig,
    parse_provider_spec,
)
from eval_pipeline.llm.credentials import install_log_redaction, redact, redact_counted
from eval_pipeline.llm.deepeval_env import (
    ensure_no_confident_upload,
    harden_deepeval_env,
    import_deepeval,
)
from eval_pipeline.llm.errors import (
    ConfidentUploadRefused,
    LLMCacheError,
    LLMCallFailed,
    LLMConfigError,
    LLMError,
    OfflineRoleError,
    StructuredOutputInvalid,
)
from eval_pipeline.llm.layer import LLMLayer, RoleClient
from eval_pipeline.llm.messages import ChatMessage, Completion

__all__ = [
    "ROLE_NAMES",
    "ChatMessage",
    "Completion",
    "ConfidentUploadRefused",
    "LLMCacheError",
    "LLMCallFailed",
    "LLMConfigError",
    "LLMError",
    "LLMLayer",
    "LLMSettings",
    "OfflineRoleError",
    "ProviderSpec",
    "RetryPolicy",
    "RoleClient",
    "RoleConfig",
    "RoleUsage",
    "StructuredOutputInvalid",
    "UsageSnapshot",
    "ensure_no_confident_upload",
    "harden_deepeval_env",
    "import_deepeval",
    "install_log_redaction",
    "parse_provider_spec",
    "redact",
    "redact_counted",
]
