"""`python -m eval_pipeline.runs.records`: publish the records' JSON Schemas (see schemas)."""

import sys

from eval_pipeline.runs.records.schemas import main

sys.exit(main())
