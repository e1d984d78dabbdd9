"""The words the LLM layer's configuration is written in, shared by the config and by the
provider plug-in interface (so neither has to import the other).
"""

from __future__ import annotations

import re
from typing import Literal, get_args

# json_schema: the provider's native schema option (llama.cpp compiles it into a grammar);
# json_object: "some JSON object" mode; prompt: the schema in the prompt only. A server that
# refuses a mode is asked again in the next one (see layer.py), each with one repair.
StructuredOutputMode = Literal["json_schema", "json_object", "prompt"]
STRUCTURED_OUTPUT_MODES: tuple[str, ...] = get_args(StructuredOutputMode)

# The NAME of an environment variable (never its value).
ENV_NAME_PATTERN = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")
